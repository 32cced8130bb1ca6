// Reads the per-mirror gauges out of the facade's own /metrics text: the list
// page shows what Prometheus sees, from the same source.

export interface MirrorGauges {
  readonly mirror: string;
  readonly state?: string;
  readonly rowsSynced?: number;
  readonly lastBatchId?: number;
  readonly secondsSinceLastBatch?: number;
  readonly lagBytes?: number;
}

const sample = /^(tributary_[a-z_]+)\{([^}]*)\} (\S+)$/;

function labelsOf(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const match of text.matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/g)) {
    if (match[1])
      labels[match[1]] = (match[2] ?? '').replace(/\\(.)/g, (_all, char: string) =>
        char === 'n' ? '\n' : char,
      );
  }
  return labels;
}

export function mirrorGauges(metricsText: string): MirrorGauges[] {
  const byMirror = new Map<string, Record<string, string | number>>();
  for (const line of metricsText.split('\n')) {
    const match = sample.exec(line);
    if (!match?.[1] || match[2] === undefined || match[3] === undefined) continue;
    const labels = labelsOf(match[2]);
    const mirror = labels.mirror;
    if (!mirror) continue;
    const entry = byMirror.get(mirror) ?? { mirror };
    const value = Number(match[3]);
    switch (match[1]) {
      case 'tributary_mirror_phase':
        if (value === 1 && labels.phase) entry.state = labels.phase;
        break;
      case 'tributary_mirror_rows_synced':
        entry.rowsSynced = value;
        break;
      case 'tributary_mirror_last_batch_id':
        entry.lastBatchId = value;
        break;
      case 'tributary_mirror_seconds_since_last_batch':
        entry.secondsSinceLastBatch = value;
        break;
      case 'tributary_engine_replication_lag_bytes':
        entry.lagBytes = value;
        break;
      default:
        continue;
    }
    byMirror.set(mirror, entry);
  }
  // Only mirrors the facade lists (a phase gauge); engine series alone are not a mirror.
  return [...byMirror.values()]
    .filter((entry) => entry.state !== undefined)
    .map((entry) => entry as unknown as MirrorGauges)
    .sort((a, b) => a.mirror.localeCompare(b.mirror));
}

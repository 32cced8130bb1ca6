// The last hour of each mirror's lag and throughput, for the console's chart.
// The interface exposes current values only, so the console samples the
// facade's own /metrics at a fixed interval and keeps the samples in memory
// (lost on restart; each api-server replica keeps its own).
import { mirrorGauges } from './prometheus-text.ts';

interface Sample {
  readonly atSeconds: number;
  readonly lagBytes: number | null;
  readonly rowsSynced: number | null;
}

export interface MirrorHistory {
  /** Unix seconds of each sample. */
  readonly time: number[];
  readonly lagBytes: (number | null)[];
  /** Rows synced per second since the previous sample. */
  readonly rowsPerSecond: (number | null)[];
}

export class MetricsHistory {
  readonly #readMetrics: () => Promise<string>;
  readonly #intervalMs: number;
  readonly #keepSeconds: number;
  readonly #samples = new Map<string, Sample[]>();
  #timer: NodeJS.Timeout | undefined;

  constructor(readMetrics: () => Promise<string>, options: { intervalMs: number; keepSeconds?: number }) {
    this.#readMetrics = readMetrics;
    this.#intervalMs = options.intervalMs;
    this.#keepSeconds = options.keepSeconds ?? 3_600;
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.sample().catch(() => {}), this.#intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Takes one sample of every mirror /metrics lists; mirrors no longer listed are forgotten. */
  async sample(nowMs = Date.now()): Promise<void> {
    const atSeconds = Math.round(nowMs / 1000);
    const listed = new Set<string>();
    for (const gauges of mirrorGauges(await this.#readMetrics())) {
      listed.add(gauges.mirror);
      const samples = this.#samples.get(gauges.mirror) ?? [];
      samples.push({ atSeconds, lagBytes: gauges.lagBytes ?? null, rowsSynced: gauges.rowsSynced ?? null });
      while (samples.length > 0 && (samples[0]?.atSeconds ?? atSeconds) < atSeconds - this.#keepSeconds)
        samples.shift();
      this.#samples.set(gauges.mirror, samples);
    }
    for (const mirror of this.#samples.keys()) if (!listed.has(mirror)) this.#samples.delete(mirror);
  }

  history(mirror: string): MirrorHistory {
    const samples = this.#samples.get(mirror) ?? [];
    return {
      time: samples.map((sample) => sample.atSeconds),
      lagBytes: samples.map((sample) => sample.lagBytes),
      rowsPerSecond: samples.map((sample, index) => {
        const previous = samples[index - 1];
        if (!previous || sample.rowsSynced === null || previous.rowsSynced === null) return null;
        const seconds = sample.atSeconds - previous.atSeconds;
        return seconds > 0 ? Math.max(0, sample.rowsSynced - previous.rowsSynced) / seconds : null;
      }),
    };
  }
}

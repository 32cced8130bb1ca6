// Prometheus metrics of every mirror, read from the resources and the catalog at
// scrape time (engines report to the catalog; nothing here keeps state but a
// one-second memo, so the gauges of one scrape share one read).
import { Gauge, Registry } from 'prom-client';
import {
  type FlowState,
  flowStateByPhase,
  registerTableMetrics,
  type TableStatus,
} from '../../../engine/src/index.ts';
import type { FacadeContext } from './context.ts';

interface MirrorSample {
  readonly mirror: string;
  readonly phase: FlowState;
  readonly rowsSynced: number;
  readonly lastBatchId?: number;
  readonly secondsSinceLastBatch?: number;
  readonly tables: readonly TableStatus[];
}

export function mirrorMetricsRegistry(context: Pick<FacadeContext, 'store' | 'catalog'>): Registry {
  const read = async (): Promise<MirrorSample[]> =>
    Promise.all(
      (await context.store.listMirrors()).map(async (mirror) => {
        const [runtime, snapshot, cdcRows, { batches }, tables] = await Promise.all([
          context.catalog.getRuntime(mirror.name),
          context.catalog.listSnapshotProgress(mirror.name),
          context.catalog.cdcRowCount(mirror.name),
          context.catalog.listBatches(mirror.name, { limit: 1, ascending: false, finishedOnly: true }),
          context.catalog.listTables(mirror.name),
        ]);
        const snapshotRows = snapshot.reduce((total, table) => total + table.rowsSynced, 0n);
        const last = batches.find((batch) => batch.endTime !== null);
        return {
          mirror: mirror.name,
          phase: runtime ? flowStateByPhase[runtime.phase] : 'STATUS_SETUP',
          rowsSynced: Number(snapshotRows + cdcRows),
          tables,
          ...(last?.endTime
            ? {
                lastBatchId: Number(last.batchId),
                secondsSinceLastBatch: (Date.now() - last.endTime.getTime()) / 1000,
              }
            : {}),
        };
      }),
    );
  let memo: { at: number; samples: Promise<MirrorSample[]> } | undefined;
  const samples = () => {
    if (!memo || Date.now() - memo.at > 1_000) memo = { at: Date.now(), samples: read() };
    return memo.samples;
  };

  const registry = new Registry();
  const gauge = (name: string, help: string, value: (sample: MirrorSample) => number | undefined) =>
    new Gauge({
      name,
      help,
      labelNames: ['mirror'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const sample of await samples()) {
          const measured = value(sample);
          if (measured !== undefined) this.set({ mirror: sample.mirror }, measured);
        }
      },
    });
  new Gauge({
    name: 'tributary_mirror_phase',
    help: 'Current phase of each mirror (1 for its phase)',
    labelNames: ['mirror', 'phase'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const sample of await samples()) this.set({ mirror: sample.mirror, phase: sample.phase }, 1);
    },
  });
  gauge(
    'tributary_mirror_rows_synced',
    'Rows written by the initial load and finished CDC batches',
    (s) => s.rowsSynced,
  );
  gauge('tributary_mirror_last_batch_id', 'Id of the last finished CDC batch', (s) => s.lastBatchId);
  gauge(
    'tributary_mirror_seconds_since_last_batch',
    'Seconds since the last CDC batch finished',
    (s) => s.secondsSinceLastBatch,
  );
  registerTableMetrics(registry, samples);
  return registry;
}

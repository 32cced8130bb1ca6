// Everything one mirror's pipeline runs with.
import type { Logger } from 'pino';
import type { Catalog, LogLevel } from '../catalog/catalog.ts';
import type { Destination } from '../connectors/destination.ts';
import type { Source } from '../connectors/source.ts';
import type { PipelineMetrics } from '../observability/engine-metrics.ts';
import type { MirrorSpec } from '../resources/mirror.ts';
import type { ProgressWatchdog } from './progress-watchdog.ts';

export interface MirrorContext {
  readonly spec: MirrorSpec;
  /**
   * The pipeline closes it after setup and after streaming (which releases its
   * connections, not the object); whoever created it need not close it again.
   */
  readonly source: Source;
  readonly destination: Destination;
  readonly catalog: Catalog;
  /** Binds the mirror's name as `mirror` (a child logger): lines here do not repeat it. */
  readonly logger: Logger;
  /** Aborting asks the pipeline to stop at the next batch boundary (pause, shutdown). */
  readonly signal: AbortSignal;
  /** Bytes of decoded row text one batch may hold before it is synced early. */
  readonly batchMemoryBudgetBytes: number;
  readonly metrics?: PipelineMetrics;
  /** Told when the pipeline moves forward; the supervisor uses it to clear faults and reset its backoff. */
  readonly progress?: ProgressListener;
  /**
   * How long a step that must end (a destination write, a COPY, a setup call)
   * may go without progress before the mirror shows as stalled; the
   * supervisor's default when absent (progress-watchdog.ts).
   */
  readonly stallAfterMs?: number;
  /** Watches the pipeline's steps for stalls; the supervisor sets it (a bare run watches nothing). */
  readonly watchdog?: Pick<ProgressWatchdog, 'begin' | 'watch'>;
}

/** Runs `work` as a step the watchdog watches, when there is one (see MirrorContext.watchdog). */
export function watched<T>(context: MirrorContext, step: string, work: () => Promise<T>): Promise<T> {
  return context.watchdog ? context.watchdog.watch(step, work) : work();
}

export interface ProgressListener {
  /** The replication stream is open and the mirror is running. */
  streaming(): void;
  /** A CDC batch or an initial-load partition became durable at the destination. */
  durable(): void;
}

export const defaultBatchMemoryBudgetBytes = 64 * 1024 * 1024;

/**
 * Writes a mirror log line to the process log and to the catalog, where the
 * API's logs endpoint reads it. Messages must not contain row values or secrets.
 */
export async function mirrorLog(context: MirrorContext, level: LogLevel, message: string): Promise<void> {
  const method = level === 'ERROR' ? 'error' : level === 'WARN' ? 'warn' : 'info';
  context.logger[method](message);
  await context.catalog.appendLog(context.spec.name, level, message).catch((error: unknown) => {
    context.logger.warn({ err: error }, 'could not write mirror log to the catalog');
  });
}

// Prometheus metrics an engine keeps while it runs: what it wrote, how long
// writes take, how far the slot trails the server and why runs failed. The
// catalog-derived gauges of the API server say where a mirror is; these say
// what its engine is doing right now (a retry loop, a slow destination, WAL
// piling up behind an unacknowledged slot).
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** What the pipeline reports; every method is cheap and never throws. */
export interface PipelineMetrics {
  batchSynced(mirror: string, rows: number, seconds: number): void;
  snapshotPartitionLoaded(mirror: string, table: string, rows: number): void;
  /** The server's WAL end as last heard, and what the slot has been told is durable. */
  replicationPosition(mirror: string, serverWalEnd: bigint, acknowledged: bigint): void;
  runFailed(mirror: string, kind: string, retrying: boolean): void;
  /** A step stalled (no progress past the bound, pipeline/progress-watchdog.ts), or moved again. */
  stalled(mirror: string, stalled: boolean): void;
  /**
   * While the mirror streams: how to read its lag in seconds at a time
   * (pipeline/replication-delay.ts), read at each scrape; undefined once it stops.
   */
  replicationDelay(mirror: string, secondsAt: ((nowMs: number) => number) | undefined): void;
  /** A heartbeat was written to the source (pipeline/heartbeats.ts), or could not be. */
  heartbeat(mirror: string, written: boolean): void;
}

// LSNs are byte positions up to 2^64; a float64 gauge is exact to 2^53 bytes
// (8 PiB of WAL), which is plenty for a position and exact for a lag.
const asNumber = (value: bigint) => Number(value);

export class EngineMetrics implements PipelineMetrics {
  readonly registry: Registry;
  readonly #cdcRows: Counter<'mirror'>;
  readonly #batches: Counter<'mirror'>;
  readonly #batchSeconds: Histogram<'mirror'>;
  readonly #snapshotRows: Counter<'mirror' | 'table'>;
  readonly #serverWalEnd: Gauge<'mirror'>;
  readonly #acknowledged: Gauge<'mirror'>;
  readonly #lagBytes: Gauge<'mirror'>;
  readonly #failures: Counter<'mirror' | 'kind' | 'retrying'>;
  readonly #stalled: Gauge<'mirror'>;
  readonly #lagSeconds: Gauge<'mirror'>;
  readonly #heartbeats: Counter<'mirror' | 'outcome'>;
  /** Each streaming mirror's delay, read at scrape time. */
  readonly #delays = new Map<string, (nowMs: number) => number>();

  /** `processMetrics` adds the process's own (memory, CPU, event loop): for an engine of its own. */
  constructor(options: { registry?: Registry; processMetrics?: boolean } = {}) {
    this.registry = options.registry ?? new Registry();
    const registers = [this.registry];
    if (options.processMetrics)
      collectDefaultMetrics({ register: this.registry, prefix: 'tributary_engine_' });
    this.#cdcRows = new Counter({
      name: 'tributary_engine_cdc_rows_total',
      help: 'Row changes written to the destination by CDC batches',
      labelNames: ['mirror'],
      registers,
    });
    this.#batches = new Counter({
      name: 'tributary_engine_cdc_batches_total',
      help: 'CDC batches written and acknowledged',
      labelNames: ['mirror'],
      registers,
    });
    this.#batchSeconds = new Histogram({
      name: 'tributary_engine_batch_sync_seconds',
      help: 'Time to write one CDC batch and its checkpoint to the destination',
      labelNames: ['mirror'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.#snapshotRows = new Counter({
      name: 'tributary_engine_snapshot_rows_total',
      help: 'Rows written by the initial load',
      labelNames: ['mirror', 'table'],
      registers,
    });
    this.#serverWalEnd = new Gauge({
      name: 'tributary_engine_server_wal_end_bytes',
      help: 'WAL end position the source server last reported, in bytes',
      labelNames: ['mirror'],
      registers,
    });
    this.#acknowledged = new Gauge({
      name: 'tributary_engine_acknowledged_lsn_bytes',
      help: 'Position acknowledged to the replication slot as durably written, in bytes',
      labelNames: ['mirror'],
      registers,
    });
    this.#lagBytes = new Gauge({
      name: 'tributary_engine_replication_lag_bytes',
      help: 'WAL the source keeps for this mirror: server WAL end minus the acknowledged position',
      labelNames: ['mirror'],
      registers,
    });
    this.#failures = new Counter({
      name: 'tributary_engine_run_failures_total',
      help: 'Failed runs by error kind; retrying="false" means the mirror stopped for a person to act',
      labelNames: ['mirror', 'kind', 'retrying'],
      registers,
    });
    const delays = this.#delays;
    this.#lagSeconds = new Gauge({
      name: 'tributary_engine_lag_seconds',
      help: 'How long the oldest transaction received and not yet durable at the destination has waited since its commit at the source; 0 when caught up (absent while the mirror does not stream)',
      labelNames: ['mirror'],
      registers,
      collect() {
        this.reset();
        const now = Date.now();
        for (const [mirror, secondsAt] of delays) this.set({ mirror }, secondsAt(now));
      },
    });
    this.#heartbeats = new Counter({
      name: 'tributary_engine_heartbeats_total',
      help: 'Heartbeats written to the source database while streaming (outcome="written"), or refused (outcome="failed"), so an idle database still moves its slot',
      labelNames: ['mirror', 'outcome'],
      registers,
    });
    this.#stalled = new Gauge({
      name: 'tributary_engine_stalled',
      help: 'Whether a step of the mirror (a destination write, a COPY, a setup call) has made no progress for longer than the stall bound: 1 while it lasts',
      labelNames: ['mirror'],
      registers,
    });
  }

  batchSynced(mirror: string, rows: number, seconds: number): void {
    this.#cdcRows.inc({ mirror }, rows);
    this.#batches.inc({ mirror });
    this.#batchSeconds.observe({ mirror }, seconds);
  }

  snapshotPartitionLoaded(mirror: string, table: string, rows: number): void {
    this.#snapshotRows.inc({ mirror, table }, rows);
  }

  replicationPosition(mirror: string, serverWalEnd: bigint, acknowledged: bigint): void {
    // A keepalive may name 0 before the server has sent anything.
    if (serverWalEnd > 0n) this.#serverWalEnd.set({ mirror }, asNumber(serverWalEnd));
    this.#acknowledged.set({ mirror }, asNumber(acknowledged));
    if (serverWalEnd > 0n) {
      this.#lagBytes.set({ mirror }, serverWalEnd > acknowledged ? asNumber(serverWalEnd - acknowledged) : 0);
    }
  }

  runFailed(mirror: string, kind: string, retrying: boolean): void {
    this.#failures.inc({ mirror, kind, retrying: String(retrying) });
  }

  stalled(mirror: string, stalled: boolean): void {
    this.#stalled.set({ mirror }, stalled ? 1 : 0);
  }

  replicationDelay(mirror: string, secondsAt: ((nowMs: number) => number) | undefined): void {
    if (secondsAt) this.#delays.set(mirror, secondsAt);
    else this.#delays.delete(mirror);
  }

  heartbeat(mirror: string, written: boolean): void {
    this.#heartbeats.inc({ mirror, outcome: written ? 'written' : 'failed' });
  }

  /**
   * Removes every series of a mirror that is gone (dropped), so the next scrape
   * no longer shows it; otherwise a process that runs many mirrors over time
   * would serve the last values of every mirror it ever ran.
   */
  async forgetMirror(mirror: string): Promise<void> {
    const byMirror = [
      this.#cdcRows,
      this.#batches,
      this.#serverWalEnd,
      this.#acknowledged,
      this.#lagBytes,
      this.#stalled,
      this.#lagSeconds,
    ];
    for (const metric of byMirror) metric.remove({ mirror });
    this.#delays.delete(mirror);
    // A histogram's series are removed by its own labels (its buckets add `le`).
    this.#batchSeconds.remove({ mirror });
    // Labels besides the mirror (table, error kind): remove each series found.
    for (const { labels } of (await this.#snapshotRows.get()).values) {
      if (labels.mirror === mirror) this.#snapshotRows.remove(labels);
    }
    for (const { labels } of (await this.#failures.get()).values) {
      if (labels.mirror === mirror) this.#failures.remove(labels);
    }
    for (const outcome of ['written', 'failed']) this.#heartbeats.remove({ mirror, outcome });
  }
}

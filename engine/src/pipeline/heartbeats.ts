// Heartbeats: while a mirror streams, a small transaction in its source
// database every interval. A server whose other databases write keeps WAL
// for an idle database's slot until something of that database is decoded
// and confirmed; the heartbeat is such a thing (pgoutput sends its begin and
// commit, or, where empty transactions are skipped, a keepalive past it), so
// the slot's confirmed position and restart point follow the server's WAL
// however idle the mapped tables are (docs/engine.md, "Heartbeats").
//
// A heartbeat that cannot be written is never the mirror's failure: the first
// one of a run of failures is said once in the mirror's log with the reason,
// the next ones are only counted, and a success after them is said too.

import { EngineError } from '../errors.ts';

export interface HeartbeatsOptions {
  /** Milliseconds between heartbeats; 0 writes none. */
  readonly intervalMs: number;
  /** Writes one heartbeat at the source (Source.emitHeartbeat). */
  readonly emit: () => Promise<unknown>;
  /** A line in the mirror's log. */
  readonly log: (level: 'INFO' | 'WARN', message: string) => unknown;
  /** Counts each heartbeat written or refused (metrics). */
  readonly counted?: ((written: boolean) => void) | undefined;
}

export class Heartbeats {
  readonly #options: HeartbeatsOptions;
  #timer: NodeJS.Timeout | undefined;
  /** The heartbeat in flight: one at a time, and `stop` waits for it. */
  #beating: Promise<void> | undefined;
  #failing = false;

  constructor(options: HeartbeatsOptions) {
    this.#options = options;
  }

  /** Starts the timer (no heartbeat at once: the stream has just started, which moves the slot). */
  start(): void {
    if (this.#options.intervalMs <= 0 || this.#timer) return;
    this.#timer = setInterval(() => {
      void this.beat();
    }, this.#options.intervalMs);
    this.#timer.unref();
  }

  /** Writes one heartbeat unless one is in flight; never throws. */
  beat(): Promise<void> {
    this.#beating ??= this.#write().finally(() => {
      this.#beating = undefined;
    });
    return this.#beating;
  }

  /** Stops the timer and waits for a heartbeat in flight, so the source can be closed under none. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#beating;
  }

  async #write(): Promise<void> {
    const { emit, log, counted } = this.#options;
    try {
      await emit();
    } catch (error) {
      counted?.(false);
      if (!this.#failing) {
        this.#failing = true;
        log('WARN', heartbeatRefused(error));
      }
      return;
    }
    counted?.(true);
    if (this.#failing) {
      this.#failing = false;
      log('INFO', 'heartbeats are written to the source again');
    }
  }
}

/** The one warning of a run of refused heartbeats: what it costs and the two ways out. */
export function heartbeatRefused(error: unknown): string {
  const reason = error instanceof Error ? error.message : String(error);
  const grant =
    error instanceof EngineError && (error.kind === 'permission' || error.kind === 'source_permission')
      ? "grant EXECUTE on the function pg_logical_emit_message to the source peer's role"
      : 'check the source (a standby cannot be written to)';
  return (
    `cannot write a heartbeat to the source (${reason}); the mirror goes on, but while its tables are ` +
    `idle its slot may keep other databases' WAL longer; ${grant}, or set heartbeatIntervalSeconds ` +
    'to 0 to write none'
  );
}

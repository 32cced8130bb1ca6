// A keyed work queue for reconcilers: a key is handled by at most one run at a
// time; adding a key that is queued or running coalesces into one more run;
// a failed run is retried with per-key exponential backoff, reset by a success.
export interface WorkQueueOptions {
  readonly baseBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /** Called when a run throws (the queue retries it). */
  readonly onError?: (key: string, error: unknown) => void;
}

export type Reconcile = (key: string) => Promise<{ requeueAfterMs?: number } | undefined>;

export class WorkQueue {
  readonly #reconcile: Reconcile;
  readonly #baseBackoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #onError: (key: string, error: unknown) => void;
  readonly #running = new Map<string, Promise<void>>();
  readonly #rerun = new Set<string>();
  readonly #timers = new Map<string, NodeJS.Timeout>();
  readonly #failures = new Map<string, number>();
  #stopped = false;

  constructor(reconcile: Reconcile, options: WorkQueueOptions = {}) {
    this.#reconcile = reconcile;
    this.#baseBackoffMs = options.baseBackoffMs ?? 500;
    this.#maxBackoffMs = options.maxBackoffMs ?? 60_000;
    this.#onError = options.onError ?? (() => {});
  }

  /** Schedules a run of `key`, now or after `delayMs` (an earlier schedule wins). */
  add(key: string, delayMs = 0): void {
    if (this.#stopped) return;
    if (delayMs > 0) {
      if (this.#timers.has(key)) return;
      const timer = setTimeout(() => {
        this.#timers.delete(key);
        this.add(key);
      }, delayMs);
      timer.unref();
      this.#timers.set(key, timer);
      return;
    }
    const timer = this.#timers.get(key);
    if (timer) {
      clearTimeout(timer);
      this.#timers.delete(key);
    }
    if (this.#running.has(key)) {
      this.#rerun.add(key);
      return;
    }
    const run = this.#run(key).finally(() => {
      this.#running.delete(key);
      if (this.#rerun.delete(key)) this.add(key);
    });
    this.#running.set(key, run);
  }

  async #run(key: string): Promise<void> {
    try {
      const result = await this.#reconcile(key);
      this.#failures.delete(key);
      if (result?.requeueAfterMs !== undefined) this.add(key, result.requeueAfterMs);
    } catch (error) {
      const failures = (this.#failures.get(key) ?? 0) + 1;
      this.#failures.set(key, failures);
      this.#onError(key, error);
      this.add(key, Math.min(this.#baseBackoffMs * 2 ** (failures - 1), this.#maxBackoffMs));
    }
  }

  /** Resolves when no run is in progress (scheduled ones may still be pending). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running.values());
  }

  /** Stops scheduling and waits for runs in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    await this.idle();
  }
}

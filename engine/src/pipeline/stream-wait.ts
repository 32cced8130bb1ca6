// The CDC loop's wait for what comes first: the stream's next read, the end
// of the batch being written, the wait's own deadline, or an abort.
//
// A read can outlive a wait (the deadline came first) and a write outlives
// many waits. Racing them with Promise.race leaves a reaction on them per
// wait, and each reaction keeps that race's result alive, a read's decoded
// events among them, until the long-lived promise settles: during one batch
// write that was every event read meanwhile (~55k changes measured), all
// surviving V8's young-generation collections and promoted. So each read
// and each write here gets one reaction, which wakes whichever wait is in
// progress, and an outcome no wait saw is kept for the next.

export type WaitOutcome<Read> = Read | 'written' | 'timeout' | 'aborted';

type ReadOutcome<Read> =
  | { readonly ok: true; readonly value: Read }
  | { readonly ok: false; readonly error: unknown };

export class StreamWait<Read> {
  readonly #read: () => Promise<Read>;
  readonly #signal: AbortSignal;
  #reading = false;
  #readOutcome: ReadOutcome<Read> | undefined;
  #watchedWrite: Promise<void> | undefined;
  #writeFailure: { readonly error: unknown } | undefined;
  /** Ends the wait in progress, if any. */
  #wake: ((reason: 'read' | 'written') => void) | undefined;

  /** `read`: the stream's next read; called again only once the one before has settled and been taken. */
  constructor(read: () => Promise<Read>, signal: AbortSignal) {
    this.#read = read;
    this.#signal = signal;
  }

  /**
   * The next read, or why none came first: `written` (the batch `writing`
   * ended), `timeout` (after `waitMs`), `aborted`. A read or write that failed
   * throws its error.
   */
  async next(waitMs: number, writing: Promise<void> | undefined): Promise<WaitOutcome<Read>> {
    if (this.#signal.aborted) return 'aborted';
    this.#watch(writing);
    if (this.#writeFailure) throw this.#writeFailure.error;
    if (!this.#readOutcome) {
      if (!this.#reading) this.#startRead();
      const reason = await this.#until(waitMs);
      const failure = this.#writeFailure as { readonly error: unknown } | undefined;
      if (reason === 'written' && failure) throw failure.error;
      if (reason !== 'read') return reason;
    }
    const outcome = this.#readOutcome as ReadOutcome<Read>;
    this.#readOutcome = undefined;
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  #startRead(): void {
    this.#reading = true;
    this.#read().then(
      (value) => this.#readSettled({ ok: true, value }),
      (error: unknown) => this.#readSettled({ ok: false, error }),
    );
  }

  #readSettled(outcome: ReadOutcome<Read>): void {
    this.#reading = false;
    this.#readOutcome = outcome;
    this.#wake?.('read');
  }

  #watch(writing: Promise<void> | undefined): void {
    if (!writing || writing === this.#watchedWrite) return;
    this.#watchedWrite = writing;
    writing.then(
      () => this.#wake?.('written'),
      (error: unknown) => {
        this.#writeFailure = { error };
        this.#wake?.('written');
      },
    );
  }

  async #until(waitMs: number): Promise<'read' | 'written' | 'timeout' | 'aborted'> {
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      return await new Promise((resolve) => {
        this.#wake = resolve;
        timer = setTimeout(resolve, waitMs, 'timeout');
        // A plain listener, removed after each wait: an AbortController or an
        // aborted timers/promises delay builds an error with a stack trace per wait.
        onAbort = () => resolve('aborted');
        this.#signal.addEventListener('abort', onAbort, { once: true });
      });
    } finally {
      this.#wake = undefined;
      clearTimeout(timer);
      if (onAbort) this.#signal.removeEventListener('abort', onAbort);
    }
  }
}

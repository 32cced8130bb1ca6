// print is for debugging: a script printing per record must not flood the
// mirror's logs. At most `burst` lines per window are kept; the next kept line
// says how many were dropped, and each line is cut at `maxLength` characters.
export interface PrintLimits {
  readonly burst: number;
  readonly windowMs: number;
  readonly maxLength: number;
}

export const defaultPrintLimits: PrintLimits = { burst: 20, windowMs: 10_000, maxLength: 2_000 };

export class PrintLimiter {
  readonly #limits: PrintLimits;
  #windowStart = Number.NEGATIVE_INFINITY;
  #keptInWindow = 0;
  #dropped = 0;

  constructor(limits: PrintLimits = defaultPrintLimits) {
    this.#limits = limits;
  }

  /** The text to log for `line` printed at `now` (ms), or undefined when the line is dropped. */
  admit(line: string, now: number): string | undefined {
    if (now - this.#windowStart >= this.#limits.windowMs) {
      this.#windowStart = now;
      this.#keptInWindow = 0;
    }
    if (this.#keptInWindow >= this.#limits.burst) {
      this.#dropped++;
      return undefined;
    }
    this.#keptInWindow++;
    const dropped = this.#dropped;
    this.#dropped = 0;
    const text = line.length > this.#limits.maxLength ? `${line.slice(0, this.#limits.maxLength)}…` : line;
    return dropped > 0 ? `${text} (${dropped} earlier print line(s) dropped)` : text;
  }
}

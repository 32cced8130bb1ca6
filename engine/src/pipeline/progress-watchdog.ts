// Notices a mirror that stands still without an error: a step that should move
// (a destination write, a COPY being read, a setup call) and has made no
// progress for longer than a bound. An error reaches the supervisor by itself;
// a server that accepted a request and never answers does not, so without
// this a stuck load or batch looks exactly like a slow one.
//
// Steps are armed only while the pipeline waits on something that must end:
// an idle mirror waiting for changes at the source arms nothing and never
// stalls.
import { z } from 'zod';
import { EngineError } from '../errors.ts';

/** Default bound: longer than any single step of a healthy mirror takes without progress. */
export const defaultStallAfterMs = 300_000;

/** What a stalled mirror waits on. */
export interface StallReport {
  /** The step, e.g. `initial load: destination: write public.orders partition 3 of 8`. */
  readonly step: string;
  /** When that step last moved (or began, if it never did). */
  readonly since: Date;
}

/** One armed step: report its progress, and end it (whatever its outcome). */
export interface WatchedStep {
  progressed(): void;
  end(): void;
}

export interface ProgressWatchdogOptions {
  /** A step without progress for this long is stalled. */
  readonly stallAfterMs: number;
  /** Called once when a step stalls. Must not throw. */
  readonly onStall: (report: StallReport) => void;
  /** Called once when the stalled step moves again or ends. Must not throw. */
  readonly onResume: (report: StallReport, stalledMs: number) => void;
  readonly now?: () => number;
}

interface ArmedStep {
  readonly step: string;
  lastProgressMs: number;
  ended: boolean;
}

export class ProgressWatchdog {
  readonly #options: ProgressWatchdogOptions;
  readonly #now: () => number;
  readonly #armed = new Set<ArmedStep>();
  #timer: NodeJS.Timeout | undefined;
  /** The stall being reported, with the progress time it was reported at. */
  #stalled:
    | { readonly armed: ArmedStep; readonly report: StallReport; readonly atProgressMs: number }
    | undefined;

  constructor(options: ProgressWatchdogOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** How often steps are looked at: a small fraction of the bound, so a stall shows soon after it passes. */
  get checkEveryMs(): number {
    return Math.min(5_000, Math.max(50, Math.floor(this.#options.stallAfterMs / 4)));
  }

  begin(step: string): WatchedStep {
    const armed: ArmedStep = { step, lastProgressMs: this.#now(), ended: false };
    this.#armed.add(armed);
    if (!this.#timer) {
      this.#timer = setInterval(() => this.check(), this.checkEveryMs);
      // A stall report never keeps a process alive.
      this.#timer.unref();
    }
    return {
      progressed: () => {
        armed.lastProgressMs = this.#now();
      },
      end: () => {
        armed.ended = true;
        this.#armed.delete(armed);
        // Reported at once rather than at the next look: the step is over.
        if (this.#stalled?.armed === armed) this.check();
        if (this.#armed.size === 0) this.#stopTimer();
      },
    };
  }

  /** Runs `work` as an armed step: a single call that either answers or does not. */
  async watch<T>(step: string, work: () => Promise<T>): Promise<T> {
    const watched = this.begin(step);
    try {
      return await work();
    } finally {
      watched.end();
    }
  }

  /** Looks at the armed steps now (the timer calls it; tests may too). */
  check(): void {
    const now = this.#now();
    const stalled = this.#stalled;
    if (stalled && (stalled.armed.ended || stalled.armed.lastProgressMs !== stalled.atProgressMs)) {
      this.#stalled = undefined;
      this.#options.onResume(stalled.report, now - stalled.report.since.getTime());
    }
    if (this.#stalled) return;
    let oldest: ArmedStep | undefined;
    for (const armed of this.#armed) {
      if (!oldest || armed.lastProgressMs < oldest.lastProgressMs) oldest = armed;
    }
    if (!oldest || now - oldest.lastProgressMs < this.#options.stallAfterMs) return;
    const report: StallReport = { step: oldest.step, since: new Date(oldest.lastProgressMs) };
    this.#stalled = { armed: oldest, report, atProgressMs: oldest.lastProgressMs };
    this.#options.onStall(report);
  }

  /** Ends watching: a stall being reported is resumed (the run is over), and the timer stops. */
  stop(): void {
    for (const armed of this.#armed) armed.ended = true;
    this.check();
    this.#armed.clear();
    this.#stopTimer();
  }

  #stopTimer(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}

const stallSecondsSchema = z.coerce.number().positive().optional();

/**
 * The stall bound from the environment (`TRIBUTARY_STALL_SECONDS`, default
 * 300), read once at start-up by each role that runs engines. Throws a
 * `config` error naming the variable (never its value) when it is not a
 * positive number.
 */
export function stallAfterMsFromEnvironment(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.TRIBUTARY_STALL_SECONDS;
  const parsed = stallSecondsSchema.safeParse(raw === '' ? undefined : raw);
  if (!parsed.success) {
    throw new EngineError('config', 'TRIBUTARY_STALL_SECONDS must be a positive number of seconds');
  }
  return parsed.data === undefined ? defaultStallAfterMs : Math.round(parsed.data * 1000);
}

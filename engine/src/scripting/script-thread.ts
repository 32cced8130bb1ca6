// The engine's side of one script's worker thread (script-worker.ts): starts
// it, sends it one request at a time, and terminates it when a call into Lua
// overruns its time limit — from outside the Lua VM, so no call, however it
// spends its time, can hold the engine's thread or outlive its limit by much.
//
// The VM's own count hook (lua-vm.ts) still stops ordinary Lua loops at the
// limit with the script's line in the message; the watchdog gives it a quarter
// of the limit more before terminating, so it only acts on what the hook cannot
// see: one long library call (a pathological pattern in string.find…).
import { type ResourceLimits, Worker } from 'node:worker_threads';
import type { LuaInput, SandboxLimits } from './lua-vm.ts';
import {
  clockBytes,
  clockNow,
  clockSlot,
  type FromWorker,
  type ScriptFailure,
  type ScriptForm,
  type ScriptResult,
  type ToWorker,
  type WorkerSetup,
} from './script-protocol.ts';
import { threadCpuMicros } from './thread-cpu.ts';

const workerUrl = new URL('./script-worker.ts', import.meta.url);

/**
 * The worker's JavaScript heap: what crosses to and from Lua. The script's own
 * data lives in the Lua state's WebAssembly memory, capped by memoryLimitBytes.
 */
export const scriptThreadResourceLimits: ResourceLimits = {
  maxOldGenerationSizeMb: 256,
  maxYoungGenerationSizeMb: 32,
  stackSizeMb: 4,
};

/** Text of messages one reply of the worker carries at most (plus one record's). */
const replyBudgetBytes = 8 * 1024 * 1024;

/** How long a call may run, in ms, before its thread is terminated. */
export function watchdogLimitMs(limits: SandboxLimits): number {
  return limits.timeLimitMs * 1.25;
}

/** Why the thread could not give an answer; the thread is unusable after any failure but 'script'. */
export class ScriptThreadError extends Error {
  readonly failure: ScriptFailure;

  constructor(failure: ScriptFailure, options?: { cause?: unknown }) {
    super(failure.message, options);
    this.name = 'ScriptThreadError';
    this.failure = failure;
  }
}

interface Pending {
  readonly id: number;
  readonly during: ScriptFailure['during'];
  resolve(results: ScriptResult[]): void;
  reject(error: ScriptThreadError): void;
}

export interface ScriptThreadOptions {
  readonly name: string;
  readonly source: string;
  readonly limits: SandboxLimits;
  readonly form: ScriptForm;
  /** A kept print line of the script. */
  readonly print: (text: string) => void;
}

export class ScriptThread {
  readonly #worker: Worker;
  readonly #clock: BigInt64Array;
  readonly #options: ScriptThreadOptions;
  readonly #killAfterUs: bigint;
  #pending: Pending | undefined;
  /** Requests wait their turn: the worker takes one at a time (snapshot partitions may ask at once). */
  #queue: Promise<unknown> = Promise.resolve();
  #watchdog: NodeJS.Timeout | undefined;
  #nextId = 1;
  /** Why the thread is being stopped, reported once it has exited. */
  #stopReason: Omit<ScriptFailure, 'during'> | undefined;
  /** Set once the thread is gone: every later request fails with it. */
  #ended: ScriptThreadError | undefined;

  private constructor(options: ScriptThreadOptions) {
    this.#options = options;
    this.#killAfterUs = BigInt(Math.round(watchdogLimitMs(options.limits) * 1000));
    const clock = new SharedArrayBuffer(clockBytes);
    this.#clock = new BigInt64Array(clock);
    const setup: WorkerSetup = {
      name: options.name,
      source: options.source,
      limits: options.limits,
      form: options.form,
      clock,
      replyBudgetBytes,
    };
    this.#worker = new Worker(workerUrl, {
      name: `script ${options.name}`,
      workerData: setup,
      resourceLimits: scriptThreadResourceLimits,
    });
    // An idle script must not keep the process alive; a pending request's watchdog timer does.
    this.#worker.unref();
    this.#worker.on('message', (message: FromWorker) => this.#received(message));
    this.#worker.on('error', (error: Error & { code?: string }) => {
      const heap = scriptThreadResourceLimits.maxOldGenerationSizeMb;
      this.#end(
        error.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? {
              reason: 'memory',
              message: `not enough memory: the script's thread may hold at most ${heap} MiB`,
            }
          : { reason: 'crashed', message: `the script's thread failed: ${error.message}` },
      );
    });
    this.#worker.on('exit', () =>
      this.#end(this.#stopReason ?? { reason: 'crashed', message: "the script's thread exited" }),
    );
  }

  /** Starts a thread, loads the script in it and checks it defines onRecord. Throws ScriptThreadError. */
  static async start(options: ScriptThreadOptions): Promise<ScriptThread> {
    const thread = new ScriptThread(options);
    try {
      await thread.#request(0, 'loading', undefined);
    } catch (error) {
      await thread.terminate();
      throw error;
    }
    return thread;
  }

  /** Whether the thread can still take requests. */
  get alive(): boolean {
    return this.#ended === undefined && this.#stopReason === undefined;
  }

  /**
   * Runs onRecord on the records in order and resolves with the results of the
   * first n ≥ 1 of them (fewer than all when their text passed the reply budget).
   */
  transform(records: readonly LuaInput[]): Promise<ScriptResult[]> {
    const turn = this.#queue.then(() => this.#request(this.#nextId++, 'onRecord', records));
    this.#queue = turn.catch(() => {});
    return turn;
  }

  async terminate(): Promise<void> {
    this.#stopReason ??= { reason: 'crashed', message: "the script's thread was stopped" };
    await this.#worker.terminate();
    this.#end(this.#stopReason);
  }

  #request(id: number, during: Pending['during'], records: readonly LuaInput[] | undefined) {
    return new Promise<ScriptResult[]>((resolve, reject) => {
      const gone = this.#ended?.failure ?? this.#stopReason;
      if (gone) {
        reject(new ScriptThreadError({ ...gone, during }));
        return;
      }
      if (records) {
        try {
          this.#worker.postMessage({ type: 'transform', id, records } satisfies ToWorker);
        } catch (error) {
          reject(
            new ScriptThreadError(
              { reason: 'crashed', during, message: 'records not sent' },
              { cause: error },
            ),
          );
          return;
        }
      }
      this.#pending = { id, during, resolve, reject };
      this.#armWatchdog(watchdogLimitMs(this.#options.limits));
    });
  }

  #received(message: FromWorker): void {
    if (message.type === 'print') {
      this.#options.print(message.text);
      return;
    }
    const pending = this.#pending;
    const id = message.type === 'loaded' ? 0 : message.id;
    if (!pending || pending.id !== id) return;
    this.#settled();
    if (message.type === 'failed') {
      const { cause, ...failure } = message.failure;
      const error = new ScriptThreadError(failure, cause === undefined ? undefined : { cause });
      // A crashed Lua state cannot be trusted again; the others are intact.
      if (message.failure.reason === 'crashed') void this.terminate();
      pending.reject(error);
    } else pending.resolve(message.type === 'transformed' ? message.results : []);
  }

  /** Checks the running call's start in `waitMs` and terminates the thread once it has run too long. */
  #armWatchdog(waitMs: number): void {
    clearTimeout(this.#watchdog);
    this.#watchdog = setTimeout(() => {
      if (!this.#pending) return;
      const started = Atomics.load(this.#clock, clockSlot.callStartedAt);
      const cpuStarted = Atomics.load(this.#clock, clockSlot.callCpuStartedAt);
      // 0: between two calls (converting results), or not started yet: not the script's time.
      const ran = started === 0n ? 0n : clockNow() - started;
      if (ran < this.#killAfterUs) {
        this.#armWatchdog(Math.max(1, Number(this.#killAfterUs - ran) / 1000));
        return;
      }
      // Overdue by the wall clock; on a busy machine the thread may not have had
      // the CPU for all that time. Like the VM's own limit (lua-vm.ts), the
      // watchdog counts the CPU time the call used, where the system tells it.
      const cpuNow = threadCpuMicros(Number(Atomics.load(this.#clock, clockSlot.threadId)));
      const cpuRan = cpuNow === undefined ? undefined : cpuNow - cpuStarted;
      if (cpuRan !== undefined && cpuRan < this.#killAfterUs) {
        // /proc counts in 10 ms ticks: look again no sooner than one tick.
        this.#armWatchdog(Math.max(10, Number(this.#killAfterUs - cpuRan) / 1000));
        return;
      }
      const limit = this.#options.limits.timeLimitMs;
      this.#stopReason = {
        reason: 'timeout',
        message: `script exceeded its time limit of ${limit} ms (its thread was terminated)`,
        ...(cpuRan === undefined ? {} : { cpuMs: Number(cpuRan) / 1000 }),
      };
      // The failure is reported on exit, once no script code can run any more.
      void this.terminate();
    }, waitMs);
  }

  #settled(): void {
    clearTimeout(this.#watchdog);
    this.#watchdog = undefined;
    this.#pending = undefined;
  }

  #end(failure: Omit<ScriptFailure, 'during'>): void {
    const pending = this.#pending;
    this.#settled();
    this.#ended ??= new ScriptThreadError({ ...failure, during: pending?.during ?? 'onRecord' });
    pending?.reject(new ScriptThreadError({ ...failure, during: pending.during }));
  }
}

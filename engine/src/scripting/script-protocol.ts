// The messages between a RecordScript (the engine's thread) and the worker
// thread that holds its Lua state (script-worker.ts), and the clock they share.
//
// The worker writes into the shared clock when each call into Lua (loading
// the script, or one onRecord) starts, and clears it when the call returns;
// the engine's watchdog reads it to stop a call that overran its time limit,
// however that call is spending its time.
import type { LuaInput, SandboxLimits } from './lua-vm.ts';
import type { ScriptMessage } from './script-messages.ts';
import type { RowEdit } from './script-rows.ts';

/**
 * How return values are read: as the messages a change becomes (a Kafka
 * destination, script-messages.ts) or as what happens to its row (a table
 * destination, script-rows.ts).
 */
export type ScriptForm = 'messages' | 'rows';

/** One record's result: its messages, or its row's edit, by the script's form. */
export type ScriptResult = ScriptMessage[] | RowEdit;

/** Data the worker is started with (workerData). */
export interface WorkerSetup {
  readonly name: string;
  readonly source: string;
  readonly limits: SandboxLimits;
  readonly form: ScriptForm;
  /** BigInt64 slots, see clockSlot. */
  readonly clock: SharedArrayBuffer;
  /** Text bytes of results after which a reply is sent with the records done so far. */
  readonly replyBudgetBytes: number;
}

export type ToWorker = {
  readonly type: 'transform';
  readonly id: number;
  readonly records: readonly LuaInput[];
};

/**
 * loaded: the script ran and defines onRecord.
 * transformed: the results of the first results.length records of request `id`.
 * failed: loading (id 0) or request `id` failed; nothing of it counts.
 * print: a kept print line (already limited and cut).
 */
export type FromWorker =
  | { readonly type: 'loaded' }
  | { readonly type: 'transformed'; readonly id: number; readonly results: ScriptResult[] }
  | { readonly type: 'failed'; readonly id: number; readonly failure: ScriptFailure }
  | { readonly type: 'print'; readonly text: string };

/**
 * error, timeout, memory, crashed: as LuaScriptError's reasons (with Lua's message);
 * invalid: a return value that is not a message; undefined: the script defines no onRecord.
 */
export interface ScriptFailure {
  readonly reason: 'error' | 'timeout' | 'memory' | 'crashed' | 'invalid' | 'undefined';
  readonly during: 'loading' | 'onRecord';
  readonly message: string;
  /** Terminated by the watchdog: the CPU time the call had used, in ms, where the system tells it. */
  readonly cpuMs?: number;
  /** What the worker caught when it was not an Error (a copy, since it crosses threads); for logs, not messages. */
  readonly cause?: unknown;
}

/** The shared clock's BigInt64 slots, written by the worker, read by the watchdog. */
export const clockSlot = {
  /** The start of the running call in µs on the shared time line; 0 when idle. */
  callStartedAt: 0,
  /** The worker thread's CPU time (thread-cpu.ts) when the running call started, in µs. */
  callCpuStartedAt: 1,
  /** The worker's kernel thread id (0: unknown), so the watchdog can read its CPU time. */
  threadId: 2,
} as const;
export const clockBytes = 3 * 8;

/** Now, in µs on the shared time line (both threads' timeOrigin + now). */
export function clockNow(): bigint {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000));
}

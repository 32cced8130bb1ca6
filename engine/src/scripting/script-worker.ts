// The worker thread that holds one script's Lua state (started by
// record-script.ts). It loads the script, then runs onRecord on each batch of
// records it receives, in order, and answers with their messages. It keeps
// the Lua VM's own time and memory limits; the engine's watchdog terminates
// this thread when a call overruns them anyway (a long C call such as a
// pathological string.find does not execute Lua instructions, so the VM's
// count hook never runs during it).
import { parentPort, workerData } from 'node:worker_threads';
import { type LuaInput, LuaSandbox, LuaScriptError, type LuaValue } from './lua-vm.ts';
import { PrintLimiter } from './print-limiter.ts';
import { InvalidScriptResult, messageTextLength, scriptMessages } from './script-messages.ts';
import {
  clockNow,
  clockSlot,
  type FromWorker,
  type ScriptFailure,
  type ScriptResult,
  type ToWorker,
  type WorkerSetup,
} from './script-protocol.ts';
import { rowEdit, rowEditTextLength } from './script-rows.ts';
import { currentThreadId, threadCpuMicros } from './thread-cpu.ts';

const setup = workerData as WorkerSetup;
const port = parentPort;
if (!port) throw new Error('script-worker.ts runs as a worker thread only');
const clock = new BigInt64Array(setup.clock);
const prints = new PrintLimiter();
const post = (message: FromWorker) => port.postMessage(message);

function failure(error: unknown, during: ScriptFailure['during']): ScriptFailure {
  if (error instanceof LuaScriptError) return { reason: error.reason, during, message: error.message };
  if (error instanceof InvalidScriptResult) return { reason: 'invalid', during, message: error.message };
  if (error instanceof Error) return { reason: 'crashed', during, message: error.message };
  // A thrown non-Error says nothing fit for a message; it travels as the cause,
  // if it can be copied to the other thread at all.
  let cause: unknown;
  try {
    cause = structuredClone(error);
  } catch {
    cause = undefined;
  }
  return {
    reason: 'crashed',
    during,
    message: 'the script runtime threw a value that is not an Error',
    cause,
  };
}

const threadId = currentThreadId();
Atomics.store(clock, clockSlot.threadId, BigInt(threadId));

/** Runs `work` as one timed call: the shared clock says when it started, in wall and CPU time. */
function timed<T>(work: () => T): T {
  // CPU first: the watchdog reads the start time first, then the CPU start that goes with it.
  Atomics.store(clock, clockSlot.callCpuStartedAt, threadCpuMicros(threadId) ?? 0n);
  Atomics.store(clock, clockSlot.callStartedAt, clockNow());
  try {
    return work();
  } finally {
    Atomics.store(clock, clockSlot.callStartedAt, 0n);
  }
}

async function load(): Promise<LuaSandbox | undefined> {
  let sandbox: LuaSandbox;
  try {
    sandbox = await LuaSandbox.create(setup.limits, {
      print: (line) => {
        const text = prints.admit(line, Date.now());
        if (text !== undefined) post({ type: 'print', text });
      },
    });
    timed(() => sandbox.run(setup.source, setup.name));
  } catch (error) {
    post({ type: 'failed', id: 0, failure: failure(error, 'loading') });
    return undefined;
  }
  if (!sandbox.hasFunction('onRecord')) {
    post({
      type: 'failed',
      id: 0,
      failure: { reason: 'undefined', during: 'loading', message: 'defines no onRecord function' },
    });
    return undefined;
  }
  return sandbox;
}

/** One record's result in the script's form, and the characters of text it carries. */
function resultOf(record: LuaInput, values: LuaValue[]): { result: ScriptResult; length: number } {
  if (setup.form === 'rows') {
    const edit = rowEdit(values, (record as { row?: Record<string, unknown> }).row);
    return { result: edit, length: rowEditTextLength(edit) };
  }
  const messages = scriptMessages(values);
  let length = 0;
  for (const message of messages) length += messageTextLength(message);
  return { result: messages, length };
}

function transform(sandbox: LuaSandbox, id: number, records: readonly LuaInput[]): void {
  const results: ScriptResult[] = [];
  let bytes = 0;
  try {
    for (const record of records) {
      const { result, length } = resultOf(
        record,
        timed(() => sandbox.call('onRecord', [record])),
      );
      results.push(result);
      bytes += length;
      if (bytes >= setup.replyBudgetBytes) break;
    }
  } catch (error) {
    post({ type: 'failed', id, failure: failure(error, 'onRecord') });
    return;
  }
  post({ type: 'transformed', id, results });
}

const sandbox = await load();
if (sandbox) {
  port.on('message', (request: ToWorker) => transform(sandbox, request.id, request.records));
  post({ type: 'loaded' });
}

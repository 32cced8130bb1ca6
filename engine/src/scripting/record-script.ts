// A mirror's record-transforming script: `onRecord(record)` decides the
// messages a change becomes (the messages form, Kafka: script-messages.ts) or
// what happens to its row (the rows form, table destinations: script-rows.ts,
// applied by pipeline/script-stage.ts). docs/scripts.md is the user's reference.
//
// The Lua state lives in a worker thread of its own (script-thread.ts), so a
// script never runs on the engine's thread: a call that overruns its time
// limit has its thread terminated, and the next `ready()` starts a fresh one.
// Records go to the thread in batches, so the cost of crossing threads is paid
// per batch, not per record.
//
// Failures (errors, time-outs, memory) become EngineError 'script', whose
// policy stops the mirror until the script is fixed.
import type { Logger } from 'pino';
import type { LogLevel } from '../catalog/catalog.ts';
import { EngineError } from '../errors.ts';
import type { ScriptSource } from '../resources/script.ts';
import type { LuaInput, SandboxLimits } from './lua-vm.ts';
import type { ScriptMessage } from './script-messages.ts';
import type { ScriptForm, ScriptResult } from './script-protocol.ts';
import type { RowEdit } from './script-rows.ts';
import { ScriptThread, ScriptThreadError } from './script-thread.ts';

export type { ScriptMessage } from './script-messages.ts';
export type { ScriptForm } from './script-protocol.ts';
export type { RowEdit } from './script-rows.ts';

export const defaultScriptLimits: SandboxLimits = {
  timeLimitMs: 1_000,
  memoryLimitBytes: 64 * 1024 * 1024,
};

/** Records a caller should hand to `transform` at once: enough to make the thread crossing cheap. */
export const scriptBatchRecords = 256;

export interface RecordScriptOptions {
  readonly logger: Logger;
  /** Where `print` lines go (the mirror's logs); the process log when absent. */
  readonly log?: ((level: LogLevel, message: string) => void) | undefined;
  readonly limits?: SandboxLimits | undefined;
  /** How return values are read; messages (Kafka) when absent. */
  readonly form?: ScriptForm | undefined;
}

export class RecordScript {
  readonly name: string;
  readonly #source: ScriptSource;
  readonly #options: RecordScriptOptions;
  #thread: ScriptThread | undefined;
  #starting: Promise<void> | undefined;

  constructor(source: ScriptSource, options: RecordScriptOptions) {
    this.name = source.name;
    this.#source = source;
    this.#options = options;
  }

  /**
   * Starts the script's thread, compiles and runs the script in it (again after
   * a time-out or a crash ended the previous one) and checks it defines onRecord.
   * Throws EngineError 'script'.
   */
  async ready(): Promise<void> {
    if (this.#thread?.alive) return;
    // Callers that ask at once (snapshot partitions) share one start.
    this.#starting ??= this.#start().finally(() => {
      this.#starting = undefined;
    });
    return this.#starting;
  }

  async #start(): Promise<void> {
    this.#thread = undefined;
    try {
      this.#thread = await ScriptThread.start({
        name: this.name,
        source: this.#source.source,
        limits: this.#options.limits ?? defaultScriptLimits,
        form: this.#options.form ?? 'messages',
        print: (text) => this.#print(text),
      });
    } catch (error) {
      throw this.#failure(error);
    }
  }

  /**
   * Runs onRecord on each record, in order, and resolves with each record's
   * messages; `ready()` must have resolved. Throws EngineError 'script'.
   */
  async transform(records: readonly LuaInput[]): Promise<ScriptMessage[][]> {
    return (await this.#run(records, 'messages')) as ScriptMessage[][];
  }

  /**
   * Runs onRecord on each record, in order, and resolves with what each does
   * to its row (the rows form); `ready()` must have resolved. Throws EngineError 'script'.
   */
  async transformRows(records: readonly LuaInput[]): Promise<RowEdit[]> {
    return (await this.#run(records, 'rows')) as RowEdit[];
  }

  async #run(records: readonly LuaInput[], form: ScriptForm): Promise<ScriptResult[]> {
    const thread = this.#thread;
    if (!thread) throw new EngineError('internal', `script ${this.name} used before it was loaded`);
    if (form !== (this.#options.form ?? 'messages')) {
      throw new EngineError(
        'internal',
        `script ${this.name} was loaded for the ${this.#options.form ?? 'messages'} form`,
      );
    }
    const results: ScriptResult[] = [];
    while (results.length < records.length) {
      const rest = results.length === 0 ? records : records.slice(results.length);
      try {
        for (const messages of await thread.transform(rest)) results.push(messages);
      } catch (error) {
        throw this.#failure(error);
      }
    }
    return results;
  }

  /** Stops the script's thread; a later `ready()` starts a new one. */
  async close(): Promise<void> {
    const thread = this.#thread;
    this.#thread = undefined;
    await thread?.terminate();
  }

  #failure(error: unknown): EngineError {
    if (!(error instanceof ScriptThreadError)) {
      return new EngineError('script', `script ${this.name} failed`, { cause: error });
    }
    const { reason, during, message } = error.failure;
    if (reason === 'undefined') return new EngineError('script', `script ${this.name} ${message}`);
    if (reason === 'invalid') return new EngineError('script', `script ${this.name}: ${message}`);
    const what = reason === 'error' ? 'failed' : reason === 'crashed' ? 'crashed' : 'stopped';
    return new EngineError('script', `script ${this.name} ${what} in ${during}: ${message}`, {
      cause: error,
    });
  }

  #print(text: string): void {
    const message = `script ${this.name}: ${text}`;
    if (this.#options.log) this.#options.log('INFO', message);
    else this.#options.logger.info({ script: this.name }, message);
  }
}

// A mirror's record-transforming script: `onRecord(record)` decides the
// messages a change becomes (docs/scripts.md is the user's reference).
//
// Return values, each one message (several values: several messages):
//   nil     no message for this value (returning only nil drops the record)
//   string  the message value; topic and key are the defaults
//   table   { topic, key, value, partition, headers }: a field left out takes
//           its default, json.null means "none" (no key; a null value, i.e. a
//           tombstone), and a table key or value is JSON-encoded
//
// Failures (errors, time-outs, memory) become EngineError 'script', whose
// policy stops the mirror until the script is fixed.
import type { Logger } from 'pino';
import type { LogLevel } from '../catalog/catalog.ts';
import { EngineError } from '../errors.ts';
import type { ScriptSource } from '../resources/script.ts';
import {
  encodeLuaJson,
  type LuaInput,
  LuaSandbox,
  LuaScriptError,
  LuaTable,
  type LuaValue,
  type SandboxLimits,
} from './lua-vm.ts';

export const defaultScriptLimits: SandboxLimits = {
  timeLimitMs: 1_000,
  memoryLimitBytes: 64 * 1024 * 1024,
};

/** One message a script asked for. An absent field takes the destination's default. */
export interface ScriptMessage {
  readonly topic?: string;
  /** null: no key. */
  readonly key?: string | null;
  /** null: a null value (tombstone). */
  readonly value?: string | null;
  readonly partition?: number;
  readonly headers?: Readonly<Record<string, string | readonly string[]>>;
}

export interface RecordScriptOptions {
  readonly logger: Logger;
  /** Where `print` lines go (the mirror's logs); the process log when absent. */
  readonly log?: ((level: LogLevel, message: string) => void) | undefined;
  readonly limits?: SandboxLimits | undefined;
}

// print is for debugging: a script printing per record must not flood the mirror's logs.
const printBurst = 20;
const printWindowMs = 10_000;
const maxPrintLength = 2_000;

export class RecordScript {
  readonly name: string;
  readonly #source: ScriptSource;
  readonly #options: RecordScriptOptions;
  #sandbox: LuaSandbox | undefined;
  #printWindowStart = 0;
  #printsInWindow = 0;
  #printsDropped = 0;

  constructor(source: ScriptSource, options: RecordScriptOptions) {
    this.name = source.name;
    this.#source = source;
    this.#options = options;
  }

  /**
   * Compiles and runs the script (again after a failure broke its sandbox) and
   * checks it defines onRecord. Throws EngineError 'script'.
   */
  async ready(): Promise<void> {
    if (this.#sandbox) return;
    const sandbox = await LuaSandbox.create(this.#options.limits ?? defaultScriptLimits, {
      print: (line) => this.#print(line),
    });
    try {
      sandbox.run(this.#source.source, this.name);
    } catch (error) {
      throw this.#failure(error, 'loading');
    }
    if (!sandbox.hasFunction('onRecord')) {
      throw new EngineError('script', `script ${this.name} defines no onRecord function`);
    }
    this.#sandbox = sandbox;
  }

  /** Runs onRecord on one record; `ready()` must have resolved. */
  transform(record: LuaInput): ScriptMessage[] {
    const sandbox = this.#sandbox;
    if (!sandbox) throw new EngineError('internal', `script ${this.name} used before it was loaded`);
    let results: LuaValue[];
    try {
      results = sandbox.call('onRecord', [record]);
    } catch (error) {
      throw this.#failure(error, 'onRecord');
    }
    const messages: ScriptMessage[] = [];
    for (const result of results) {
      const message = this.#message(result);
      if (message) messages.push(message);
    }
    return messages;
  }

  #message(result: LuaValue): ScriptMessage | undefined {
    if (result === undefined) return undefined;
    if (typeof result === 'string') return { value: result };
    if (typeof result === 'number' || typeof result === 'bigint') return { value: String(result) };
    if (!(result instanceof LuaTable)) {
      throw this.#invalid(`onRecord returned a ${describe(result)}; return a string, a table or nil`);
    }
    const message: {
      topic?: string;
      key?: string | null;
      value?: string | null;
      partition?: number;
      headers?: Record<string, string | readonly string[]>;
    } = {};
    const topic = result.get('topic');
    if (topic !== undefined) {
      if (typeof topic !== 'string') throw this.#invalid(`topic is a ${describe(topic)}; expected a string`);
      message.topic = topic;
    }
    const key = this.#payload(result.get('key'), 'key');
    if (key !== undefined) message.key = key;
    const value = this.#payload(result.get('value'), 'value');
    if (value !== undefined) message.value = value;
    const partition = result.get('partition');
    if (partition !== undefined) {
      if (typeof partition !== 'number' || !Number.isInteger(partition) || partition < 0) {
        throw this.#invalid('partition must be a non-negative integer');
      }
      message.partition = partition;
    }
    const headers = result.get('headers');
    if (headers !== undefined) message.headers = this.#headers(headers);
    return message;
  }

  #payload(field: LuaValue, name: string): string | null | undefined {
    if (field === undefined || field === null) return field;
    if (typeof field === 'string') return field;
    if (typeof field === 'number' || typeof field === 'bigint') return String(field);
    if (field instanceof LuaTable) {
      try {
        return encodeLuaJson(field);
      } catch (error) {
        throw this.#invalid(`${name} cannot be JSON-encoded: ${(error as Error).message}`);
      }
    }
    throw this.#invalid(`${name} is a ${describe(field)}; expected a string, a table or json.null`);
  }

  #headers(field: LuaValue): Record<string, string | readonly string[]> {
    if (!(field instanceof LuaTable)) throw this.#invalid('headers must be a table of name = value');
    const headers: Record<string, string | readonly string[]> = {};
    for (const [name, value] of field.entries) {
      if (typeof name !== 'string') throw this.#invalid('header names must be strings');
      if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') {
        headers[name] = String(value);
      } else if (value instanceof LuaTable) {
        const values = value.sequence() ?? [];
        if (values.length === 0 || values.some((item) => typeof item !== 'string')) {
          throw this.#invalid(`header ${name} must be a string or a list of strings`);
        }
        headers[name] = values as string[];
      } else throw this.#invalid(`header ${name} must be a string or a list of strings`);
    }
    return headers;
  }

  #invalid(problem: string): EngineError {
    return new EngineError('script', `script ${this.name}: ${problem}`);
  }

  #failure(error: unknown, during: string): EngineError {
    if (error instanceof EngineError) return error;
    if (error instanceof LuaScriptError) {
      if (error.reason === 'crashed') this.#sandbox = undefined;
      const what = error.reason === 'error' ? 'failed' : error.reason === 'crashed' ? 'crashed' : 'stopped';
      return new EngineError('script', `script ${this.name} ${what} in ${during}: ${error.message}`, {
        cause: error,
      });
    }
    return new EngineError('script', `script ${this.name} failed in ${during}`, { cause: error });
  }

  #print(line: string): void {
    const now = Date.now();
    if (now - this.#printWindowStart >= printWindowMs) {
      this.#printWindowStart = now;
      this.#printsInWindow = 0;
    }
    if (this.#printsInWindow >= printBurst) {
      this.#printsDropped++;
      return;
    }
    this.#printsInWindow++;
    const dropped = this.#printsDropped;
    this.#printsDropped = 0;
    const text = line.length > maxPrintLength ? `${line.slice(0, maxPrintLength)}…` : line;
    const message = `script ${this.name}: ${text}${dropped > 0 ? ` (${dropped} earlier print line(s) dropped)` : ''}`;
    if (this.#options.log) this.#options.log('INFO', message);
    else this.#options.logger.info({ script: this.name }, message);
  }
}

function describe(value: LuaValue): string {
  if (value === null) return 'json.null';
  if (value === undefined) return 'nil';
  if (value instanceof LuaTable) return 'table';
  if (typeof value === 'object') return value.opaque;
  return typeof value === 'bigint' ? 'number' : typeof value;
}

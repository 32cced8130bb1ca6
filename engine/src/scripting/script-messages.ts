// What onRecord's return values mean (docs/scripts.md is the user's reference):
// each value is one message.
//   nil     no message for this value (returning only nil drops the record)
//   string  the message value; topic and key are the defaults
//   table   { topic, key, value, partition, headers }: a field left out takes
//           its default, json.null means "none" (no key; a null value, i.e. a
//           tombstone), and a table key or value is JSON-encoded
// Runs where the Lua state lives (the script's worker thread), so only plain
// data crosses back to the engine.
import { encodeLuaJson, LuaTable, type LuaValue } from './lua-vm.ts';

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

/** A return value that is not a message; `message` says what is wrong, for the script's author. */
export class InvalidScriptResult extends Error {
  constructor(problem: string) {
    super(problem);
    this.name = 'InvalidScriptResult';
  }
}

/** The messages one call's return values ask for. Throws InvalidScriptResult. */
export function scriptMessages(results: readonly LuaValue[]): ScriptMessage[] {
  const messages: ScriptMessage[] = [];
  for (const result of results) {
    const message = toMessage(result);
    if (message) messages.push(message);
  }
  return messages;
}

/** Bytes of text a message holds, to bound what one reply of the worker carries. */
export function messageTextLength(message: ScriptMessage): number {
  let length = (message.topic?.length ?? 0) + (message.key?.length ?? 0) + (message.value?.length ?? 0);
  if (message.headers) {
    for (const [name, value] of Object.entries(message.headers)) {
      length += name.length;
      length += typeof value === 'string' ? value.length : value.join('').length;
    }
  }
  return length;
}

function toMessage(result: LuaValue): ScriptMessage | undefined {
  if (result === undefined) return undefined;
  if (typeof result === 'string') return { value: result };
  if (typeof result === 'number' || typeof result === 'bigint') return { value: String(result) };
  if (!(result instanceof LuaTable)) {
    throw new InvalidScriptResult(`onRecord returned a ${describe(result)}; return a string, a table or nil`);
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
    if (typeof topic !== 'string')
      throw new InvalidScriptResult(`topic is a ${describe(topic)}; expected a string`);
    message.topic = topic;
  }
  const key = payload(result.get('key'), 'key');
  if (key !== undefined) message.key = key;
  const value = payload(result.get('value'), 'value');
  if (value !== undefined) message.value = value;
  const partition = result.get('partition');
  if (partition !== undefined) {
    if (typeof partition !== 'number' || !Number.isInteger(partition) || partition < 0) {
      throw new InvalidScriptResult('partition must be a non-negative integer');
    }
    message.partition = partition;
  }
  const headers = result.get('headers');
  if (headers !== undefined) message.headers = headersOf(headers);
  return message;
}

function payload(field: LuaValue, name: string): string | null | undefined {
  if (field === undefined || field === null) return field;
  if (typeof field === 'string') return field;
  if (typeof field === 'number' || typeof field === 'bigint') return String(field);
  if (field instanceof LuaTable) {
    try {
      return encodeLuaJson(field);
    } catch (error) {
      throw new InvalidScriptResult(`${name} cannot be JSON-encoded: ${(error as Error).message}`);
    }
  }
  throw new InvalidScriptResult(`${name} is a ${describe(field)}; expected a string, a table or json.null`);
}

function headersOf(field: LuaValue): Record<string, string | readonly string[]> {
  if (!(field instanceof LuaTable)) throw new InvalidScriptResult('headers must be a table of name = value');
  const headers: Record<string, string | readonly string[]> = {};
  for (const [name, value] of field.entries) {
    if (typeof name !== 'string') throw new InvalidScriptResult('header names must be strings');
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') {
      headers[name] = String(value);
    } else if (value instanceof LuaTable) {
      const values = value.sequence() ?? [];
      if (values.length === 0 || values.some((item) => typeof item !== 'string')) {
        throw new InvalidScriptResult(`header ${name} must be a string or a list of strings`);
      }
      headers[name] = values as string[];
    } else throw new InvalidScriptResult(`header ${name} must be a string or a list of strings`);
  }
  return headers;
}

/** A Lua value's type as a script's author reads it in an error message. */
export function describe(value: LuaValue): string {
  if (value === null) return 'json.null';
  if (value === undefined) return 'nil';
  if (value instanceof LuaTable) return 'table';
  if (typeof value === 'object') return value.opaque;
  return typeof value === 'bigint' ? 'number' : typeof value;
}

// A sandboxed Lua 5.4 state in WebAssembly (wasmoon's build of the reference
// interpreter), driven through the raw C API that the module exports rather
// than wasmoon's object bridge: that bridge converts values generically and
// costs about four times as much per call (docs/scripts.md has the numbers).
//
// Each sandbox owns its own WebAssembly instance, so nothing is shared between
// mirrors and a broken instance is simply dropped. What a script can reach is
// decided by the prelude (sandbox-prelude.ts); this module enforces the limits:
//
// - time: a count hook runs every `hookInstructionCount` VM instructions and
//   raises an error once the call's deadline has passed (it cannot interrupt
//   one long library call: the engine runs each sandbox on a worker thread
//   that it terminates when a call overruns, see script-thread.ts);
// - memory: the state's allocator refuses to grow past `memoryLimitBytes`
//   while script code runs (host code building arguments is not limited);
// - stability: the host never runs Lua code outside a protected call, reads
//   results with raw accessors only (no metamethods), and a panic or a trap in
//   the WebAssembly code poisons the sandbox instead of crashing the process.
//
// C API reference: https://www.lua.org/manual/5.4/manual.html#4
import { LuaWasm } from 'wasmoon';
import { sandboxPrelude } from './sandbox-prelude.ts';

type Pointer = number;
type LuaState = number;

/** The parts of the Emscripten module and of the Lua C API this file calls. */
interface RawLua {
  readonly HEAPU8: Uint8Array;
  readonly HEAPU32: Uint32Array;
  readonly HEAP32: Int32Array;
  _malloc(size: number): Pointer;
  _free(pointer: Pointer): void;
  _realloc(pointer: Pointer, size: number): Pointer;
  addFunction(fn: (...args: number[]) => number | undefined, signature: string): Pointer;
  _lua_newstate(allocator: Pointer, userData: Pointer): LuaState;
  _lua_atpanic(L: LuaState, panic: Pointer): Pointer;
  _lua_sethook(L: LuaState, hook: Pointer, mask: number, count: number): void;
  _lua_gettop(L: LuaState): number;
  _lua_settop(L: LuaState, index: number): void;
  _lua_absindex(L: LuaState, index: number): number;
  _lua_checkstack(L: LuaState, extra: number): number;
  _lua_type(L: LuaState, index: number): number;
  _lua_pushnil(L: LuaState): void;
  _lua_pushboolean(L: LuaState, value: number): void;
  _lua_pushinteger(L: LuaState, value: bigint): void;
  _lua_pushnumber(L: LuaState, value: number): void;
  _lua_pushlstring(L: LuaState, bytes: Pointer, length: number): Pointer;
  _lua_pushlightuserdata(L: LuaState, pointer: Pointer): void;
  _lua_pushcclosure(L: LuaState, fn: Pointer, upvalueCount: number): void;
  _lua_pushvalue(L: LuaState, index: number): void;
  _lua_rotate(L: LuaState, index: number, n: number): void;
  _lua_createtable(L: LuaState, arrayCount: number, recordCount: number): void;
  _lua_setfield(L: LuaState, index: number, name: Pointer): void;
  _lua_rawset(L: LuaState, index: number): void;
  _lua_rawseti(L: LuaState, index: number, n: bigint): void;
  _lua_rawget(L: LuaState, index: number): number;
  _lua_rawgeti(L: LuaState, index: number, n: bigint): number;
  _lua_next(L: LuaState, index: number): number;
  _lua_tolstring(L: LuaState, index: number, length: Pointer): Pointer;
  _lua_toboolean(L: LuaState, index: number): number;
  _lua_tointegerx(L: LuaState, index: number, isNumber: Pointer): bigint;
  _lua_tonumberx(L: LuaState, index: number, isNumber: Pointer): number;
  _lua_isinteger(L: LuaState, index: number): number;
  _lua_touserdata(L: LuaState, index: number): Pointer;
  _lua_setglobal(L: LuaState, name: Pointer): void;
  _lua_pcallk(
    L: LuaState,
    argCount: number,
    resultCount: number,
    handler: number,
    context: number,
    k: Pointer,
  ): number;
  _luaL_loadbufferx(L: LuaState, buffer: Pointer, size: number, name: Pointer, mode: Pointer): number;
  _lua_error(L: LuaState): number;
  _luaL_where(L: LuaState, level: number): void;
  _lua_concat(L: LuaState, count: number): void;
  _luaopen_base(L: LuaState): number;
  _luaopen_coroutine(L: LuaState): number;
  _luaopen_table(L: LuaState): number;
  _luaopen_string(L: LuaState): number;
  _luaopen_utf8(L: LuaState): number;
  _luaopen_math(L: LuaState): number;
  _luaopen_os(L: LuaState): number;
}

// lua.h constants (Lua 5.4).
const luaTypes = [
  'nil',
  'boolean',
  'lightuserdata',
  'number',
  'string',
  'table',
  'function',
  'userdata',
  'thread',
];
const typeNil = 0;
const typeBoolean = 1;
const typeLightUserdata = 2;
const typeNumber = 3;
const typeString = 4;
const typeTable = 5;
const statusOk = 0;
const statusMemory = 4;
const multipleResults = -1;
const hookMaskCount = 8;
const registryIndex = -1_001_000; // -LUAI_MAXSTACK - 1000
const registryGlobals = 2n; // LUA_RIDX_GLOBALS

const maxSafeInteger = BigInt(Number.MAX_SAFE_INTEGER);
/** Nesting limit for values crossing the boundary either way. */
const maxDepth = 100;
/**
 * Table entries read back from Lua in one call (all its results, or one
 * json.encode argument). A table is read once for each place it is reached
 * from, so a table of n levels each holding the one below twice is 2^n
 * entries to read in a few bytes of Lua memory: the read held the thread and
 * grew the heap until the watchdog stopped it. A record's result is far
 * smaller; no honest one comes near this.
 */
const maxTableEntriesRead = 1_000_000;

/** A Lua table read back into JavaScript: its entries in traversal order, keys converted like values. */
export class LuaTable {
  readonly entries: readonly (readonly [LuaValue, LuaValue])[];

  constructor(entries: readonly (readonly [LuaValue, LuaValue])[]) {
    this.entries = entries;
  }

  /** The value under a string key, or undefined (nil). */
  get(name: string): LuaValue {
    for (const [key, value] of this.entries) {
      if (typeof key === 'string' && key === name) return value;
    }
    return undefined;
  }

  /** The values under keys 1..n when those are the only keys (n ≥ 1), else undefined. */
  sequence(): LuaValue[] | undefined {
    if (this.entries.length === 0) return undefined;
    const items: LuaValue[] = new Array(this.entries.length);
    for (const [key, value] of this.entries) {
      if (typeof key !== 'number' || !Number.isInteger(key) || key < 1 || key > this.entries.length) {
        return undefined;
      }
      items[key - 1] = value;
    }
    return items;
  }
}

/** A Lua value that has no JavaScript counterpart (function, userdata, thread). */
export interface LuaOpaque {
  readonly opaque: string;
}

/**
 * A Lua value in JavaScript: undefined is nil, null is `json.null`, strings
 * are UTF-8 decoded, integers beyond 2^53 are bigints.
 */
export type LuaValue = undefined | null | boolean | number | bigint | string | LuaTable | LuaOpaque;

/**
 * A JavaScript value to hand to Lua: null becomes `json.null`, undefined nil
 * (an object property holding undefined is left out), a bigint an integer,
 * a number without fraction an integer, Buffers (any Uint8Array) byte strings.
 */
export type LuaInput =
  | undefined
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | readonly LuaInput[]
  | { readonly [key: string]: LuaInput };

export interface SandboxLimits {
  /** CPU time one call into the script may use, host conversions included (at least as long in wall-clock time). */
  readonly timeLimitMs: number;
  /** Bytes the Lua state may hold while script code runs. */
  readonly memoryLimitBytes: number;
  /** VM instructions between two checks of the deadline. */
  readonly hookInstructionCount?: number;
}

/** Why a call into the sandbox failed. `message` is Lua's, with the chunk name and line when Lua gives them. */
export class LuaScriptError extends Error {
  readonly reason: 'error' | 'timeout' | 'memory' | 'crashed';

  constructor(reason: LuaScriptError['reason'], message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LuaScriptError';
    this.reason = reason;
  }
}

export interface SandboxHost {
  /** Receives what the script's `print` wrote (one call per print). */
  print(line: string): void;
}

/**
 * CPU time of the calling thread in ms; of the whole process on a Node without
 * process.threadCpuUsage (before 23.9), which only ends a call sooner, never later.
 * A call's time limit is counted in it: on a busy machine a call waiting for a
 * core does not spend its budget, so a script that fits its limit is not failed
 * because of the load around it.
 */
function cpuTimeMs(): number {
  const usage = typeof process.threadCpuUsage === 'function' ? process.threadCpuUsage() : process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class LuaSandbox {
  readonly #raw: RawLua;
  readonly #L: LuaState;
  readonly #limits: SandboxLimits;
  readonly #names = new Map<string, Pointer>();
  readonly #lengthSlot: Pointer;
  #scratch: Pointer;
  #scratchSize: number;
  #memoryUsed = 0;
  #memoryLimit: number | undefined;
  /** When the call's time is up, first in wall-clock time (cheap to read), then in CPU time. */
  #wallDeadline = Number.POSITIVE_INFINITY;
  #cpuDeadline = Number.POSITIVE_INFINITY;
  #timeoutMessage: string | undefined;
  #poisoned: LuaScriptError | undefined;
  /** What the value being read back may still hold (maxTableEntriesRead). */
  #tableEntriesLeft = 0;

  private constructor(raw: RawLua, limits: SandboxLimits) {
    this.#raw = raw;
    this.#limits = limits;
    this.#lengthSlot = raw._malloc(8);
    this.#scratchSize = 64 * 1024;
    this.#scratch = raw._malloc(this.#scratchSize);
    const allocator = raw.addFunction((_userData, pointer = 0, oldSize = 0, newSize = 0) => {
      if (newSize === 0) {
        if (pointer) {
          this.#memoryUsed -= oldSize;
          raw._free(pointer);
        }
        return 0;
      }
      // With a null pointer, oldSize is the kind of object being made, not a size.
      const delta = pointer ? newSize - oldSize : newSize;
      if (delta > 0 && this.#memoryLimit !== undefined && this.#memoryUsed + delta > this.#memoryLimit)
        return 0;
      const moved = raw._realloc(pointer, newSize);
      if (moved) this.#memoryUsed += delta;
      return moved;
    }, 'iiiii');
    const L = raw._lua_newstate(allocator, 0);
    if (!L) throw new LuaScriptError('crashed', 'could not create a Lua state');
    this.#L = L;
    // A panic is an error outside any protected call; the host never allows one, so
    // reaching this is a bug: stop using this state rather than let Lua abort().
    raw._lua_atpanic(
      L,
      raw.addFunction(() => {
        throw new LuaScriptError('crashed', 'the Lua state panicked');
      }, 'ii'),
    );
    const hook = raw.addFunction((state = 0) => {
      if (!this.#timeIsUp()) return undefined;
      // Level 0 in a hook is the function that was running: its name and line.
      raw._luaL_where(state, 0);
      this.#pushText(state, `script exceeded its time limit of ${this.#limits.timeLimitMs} ms`);
      raw._lua_concat(state, 2);
      this.#timeoutMessage ??= this.#textAt(state, -1);
      return raw._lua_error(state);
    }, 'vii');
    raw._lua_sethook(L, hook, hookMaskCount, limits.hookInstructionCount ?? 1000);
  }

  /** Creates a sandbox and runs the prelude that shapes its globals. */
  static async create(limits: SandboxLimits, host: SandboxHost): Promise<LuaSandbox> {
    const wasm = await LuaWasm.initialize();
    const sandbox = new LuaSandbox(wasm.module as unknown as RawLua, limits);
    sandbox.#open(host);
    return sandbox;
  }

  /** Bytes the Lua state holds now. */
  get memoryUsed(): number {
    return this.#memoryUsed;
  }

  /** Compiles and runs a chunk of Lua source (never bytecode) under the limits. */
  run(source: string, chunkName: string): void {
    this.#guarded(() => {
      const top = this.#raw._lua_gettop(this.#L);
      try {
        this.#startCall();
        this.#load(source, chunkName);
        this.#protectedCall(0, 0);
      } finally {
        this.#endCall();
        this.#raw._lua_settop(this.#L, top);
      }
    });
  }

  /**
   * Compiles a chunk without running it: throws LuaScriptError with Lua's
   * message (chunk name and line) when the source does not parse. Parsing runs
   * no script code, so it needs no thread of its own; the memory limit holds.
   */
  compile(source: string, chunkName: string): void {
    this.#guarded(() => {
      const top = this.#raw._lua_gettop(this.#L);
      try {
        this.#startCall();
        this.#memoryLimit = this.#limits.memoryLimitBytes;
        this.#load(source, chunkName);
      } finally {
        this.#endCall();
        this.#raw._lua_settop(this.#L, top);
      }
    });
  }

  /** Pushes the compiled chunk of `source` (text mode only), or throws its syntax error. */
  #load(source: string, chunkName: string): void {
    const bytes = encoder.encode(source);
    const buffer = this.#raw._malloc(bytes.length + 1);
    try {
      this.#raw.HEAPU8.set(bytes, buffer);
      const status = this.#raw._luaL_loadbufferx(
        this.#L,
        buffer,
        bytes.length,
        this.#name(`=${chunkName}`),
        this.#name('t'),
      );
      if (status !== statusOk) throw this.#errorAt(status, -1);
    } finally {
      this.#raw._free(buffer);
    }
  }

  /** Whether the global `name` holds a function. */
  hasFunction(name: string): boolean {
    return this.#guarded(() => {
      const L = this.#L;
      const top = this.#raw._lua_gettop(L);
      try {
        this.#pushGlobal(name);
        return this.#raw._lua_type(L, -1) === 6;
      } finally {
        this.#raw._lua_settop(L, top);
      }
    });
  }

  /**
   * Calls the global function `name` with `args` under the limits and returns
   * every value it returned. Throws LuaScriptError when the call fails.
   */
  call(name: string, args: readonly LuaInput[] = []): LuaValue[] {
    return this.#guarded(() => {
      const L = this.#L;
      const raw = this.#raw;
      const top = raw._lua_gettop(L);
      this.#startCall();
      try {
        this.#pushGlobal(name);
        if (raw._lua_type(L, -1) !== 6) {
          throw new LuaScriptError('error', `the script defines no function ${name}`);
        }
        for (const arg of args) this.#push(L, arg, 0);
        this.#protectedCall(args.length, multipleResults);
        this.#tableEntriesLeft = maxTableEntriesRead;
        const results: LuaValue[] = [];
        for (let index = top + 1; index <= raw._lua_gettop(L); index++) results.push(this.#read(L, index, 0));
        return results;
      } finally {
        this.#endCall();
        raw._lua_settop(L, top);
      }
    });
  }

  #startCall(): void {
    this.#timeoutMessage = undefined;
    this.#wallDeadline = performance.now() + this.#limits.timeLimitMs;
    this.#cpuDeadline = cpuTimeMs() + this.#limits.timeLimitMs;
  }

  /**
   * A thread uses no more CPU time than wall-clock time passes, so until the
   * wall-clock deadline the (costlier) CPU clock need not be read at all.
   */
  #timeIsUp(): boolean {
    return performance.now() > this.#wallDeadline && cpuTimeMs() > this.#cpuDeadline;
  }

  #endCall(): void {
    this.#wallDeadline = Number.POSITIVE_INFINITY;
    this.#cpuDeadline = Number.POSITIVE_INFINITY;
    this.#memoryLimit = undefined;
  }

  /** Runs the function below `argCount` arguments on the stack, with the memory limit on. */
  #protectedCall(argCount: number, resultCount: number): void {
    this.#memoryLimit = this.#limits.memoryLimitBytes;
    const status = this.#raw._lua_pcallk(this.#L, argCount, resultCount, 0, 0, 0);
    this.#memoryLimit = undefined;
    if (status !== statusOk) throw this.#errorAt(status, -1);
  }

  #errorAt(status: number, index: number): LuaScriptError {
    if (this.#timeoutMessage !== undefined) return new LuaScriptError('timeout', this.#timeoutMessage);
    if (status === statusMemory) {
      return new LuaScriptError(
        'memory',
        `not enough memory: the script may hold at most ${Math.round(this.#limits.memoryLimitBytes / 2 ** 20)} MiB`,
      );
    }
    // Only strings and numbers are read: converting anything else could run a __tostring metamethod.
    const type = this.#raw._lua_type(this.#L, index);
    const message =
      type === typeString || type === typeNumber
        ? this.#textAt(this.#L, index)
        : `(error object is a ${luaTypes[type] ?? 'strange'} value)`;
    return new LuaScriptError('error', message);
  }

  /** Runs host work on the state, turning a trap or a panic into a poisoned sandbox. */
  #guarded<T>(work: () => T): T {
    if (this.#poisoned) throw this.#poisoned;
    try {
      return work();
    } catch (error) {
      if (error instanceof LuaScriptError && error.reason !== 'crashed') throw error;
      this.#poisoned = new LuaScriptError(
        'crashed',
        'the Lua sandbox stopped working and must be recreated',
        {
          cause: error,
        },
      );
      throw this.#poisoned;
    }
  }

  #open(host: SandboxHost): void {
    this.#guarded(() => {
      const L = this.#L;
      const raw = this.#raw;
      raw._luaopen_base(L);
      raw._lua_settop(L, 0);
      const libraries: readonly [string, (L: LuaState) => number][] = [
        ['coroutine', raw._luaopen_coroutine],
        ['table', raw._luaopen_table],
        ['string', raw._luaopen_string],
        ['utf8', raw._luaopen_utf8],
        ['math', raw._luaopen_math],
        ['os', raw._luaopen_os],
      ];
      for (const [name, open] of libraries) {
        open.call(raw, L);
        raw._lua_setglobal(L, this.#name(name));
      }
      const status = (() => {
        const bytes = encoder.encode(sandboxPrelude);
        const buffer = raw._malloc(bytes.length);
        try {
          raw.HEAPU8.set(bytes, buffer);
          return raw._luaL_loadbufferx(L, buffer, bytes.length, this.#name('=prelude'), this.#name('t'));
        } finally {
          raw._free(buffer);
        }
      })();
      if (status !== statusOk) throw this.#errorAt(status, -1);
      this.#pushFunction((state) => {
        host.print(this.#textAt(state, 1));
        return 0;
      });
      this.#pushFunction((state) => {
        let text: string;
        try {
          this.#tableEntriesLeft = maxTableEntriesRead;
          text = encodeLuaJson(this.#read(state, 1, 0));
        } catch (error) {
          return this.#raiseError(state, `json.encode: ${(error as Error).message}`);
        }
        this.#pushText(state, text);
        return 1;
      });
      this.#pushFunction((state) => {
        if (raw._lua_type(state, 1) !== typeString)
          return this.#raiseError(state, 'json.decode: expected a string');
        let parsed: unknown;
        try {
          parsed = parseJsonExactly(this.#textAt(state, 1));
        } catch (error) {
          return this.#raiseError(state, `json.decode: ${(error as Error).message}`);
        }
        try {
          this.#push(state, parsed as LuaInput, 0);
        } catch (error) {
          return this.#raiseError(state, `json.decode: ${(error as Error).message}`);
        }
        return 1;
      });
      this.#pushFunction((state) => {
        raw._lua_pushboolean(state, this.#timeIsUp() ? 1 : 0);
        return 1;
      });
      raw._lua_pushlightuserdata(L, 0);
      this.#protectedCall(5, 0);
    });
  }

  #pushFunction(fn: (state: LuaState) => number): void {
    this.#raw._lua_pushcclosure(
      this.#L,
      this.#raw.addFunction((state = 0) => fn(state), 'ii'),
      0,
    );
  }

  /** Raises a Lua error from a host function; never returns normally. */
  #raiseError(state: LuaState, message: string): number {
    this.#pushText(state, message);
    return this.#raw._lua_error(state);
  }

  /** Pushes a global by raw lookup, so a metatable on _G runs nothing. */
  #pushGlobal(name: string): void {
    const L = this.#L;
    this.#raw._lua_rawgeti(L, registryIndex, registryGlobals);
    this.#pushText(L, name);
    this.#raw._lua_rawget(L, -2);
    // lua_remove(L, -2): rotate the globals table to the top, then pop it.
    this.#raw._lua_rotate(L, -2, -1);
    this.#raw._lua_settop(L, -2);
  }

  /** A NUL-terminated copy of `text` in module memory, kept for the sandbox's life. */
  #name(text: string): Pointer {
    let pointer = this.#names.get(text);
    if (pointer === undefined) {
      const bytes = encoder.encode(text);
      pointer = this.#raw._malloc(bytes.length + 1);
      this.#raw.HEAPU8.set(bytes, pointer);
      this.#raw.HEAPU8[pointer + bytes.length] = 0;
      this.#names.set(text, pointer);
    }
    return pointer;
  }

  #pushText(L: LuaState, text: string): void {
    this.#pushBytes(L, text.length, (target) => encoder.encodeInto(text, target).written);
  }

  #pushBytes(L: LuaState, maxLength: number, write: (target: Uint8Array) => number): void {
    const needed = maxLength * 3;
    if (needed > this.#scratchSize) {
      this.#raw._free(this.#scratch);
      this.#scratchSize = Math.max(needed, this.#scratchSize * 2);
      this.#scratch = this.#raw._malloc(this.#scratchSize);
      if (!this.#scratch) throw new LuaScriptError('crashed', 'out of module memory');
    }
    const written = write(this.#raw.HEAPU8.subarray(this.#scratch, this.#scratch + needed));
    this.#raw._lua_pushlstring(L, this.#scratch, written);
  }

  #textAt(L: LuaState, index: number): string {
    const pointer = this.#raw._lua_tolstring(L, index, this.#lengthSlot);
    if (!pointer) return '';
    const length = this.#raw.HEAPU32[this.#lengthSlot >> 2] ?? 0;
    return decoder.decode(this.#raw.HEAPU8.subarray(pointer, pointer + length));
  }

  #push(L: LuaState, value: LuaInput, depth: number): void {
    const raw = this.#raw;
    switch (typeof value) {
      case 'undefined':
        raw._lua_pushnil(L);
        return;
      case 'boolean':
        raw._lua_pushboolean(L, value ? 1 : 0);
        return;
      case 'number':
        if (Number.isSafeInteger(value)) raw._lua_pushinteger(L, BigInt(value));
        else raw._lua_pushnumber(L, value);
        return;
      case 'bigint':
        raw._lua_pushinteger(L, BigInt.asIntN(64, value));
        return;
      case 'string':
        this.#pushText(L, value);
        return;
    }
    if (value === null) {
      raw._lua_pushlightuserdata(L, 0);
      return;
    }
    // A LuaScriptError ('error'), not a plain Error: the state is intact (the
    // caller resets the stack), and a plain Error poisoned the sandbox as crashed.
    if (depth >= maxDepth) throw new LuaScriptError('error', `value nested more than ${maxDepth} deep`);
    if (!raw._lua_checkstack(L, 3)) throw new LuaScriptError('error', 'Lua stack overflow');
    // A Buffer that crossed to the script's worker thread arrives as a plain Uint8Array.
    if (value instanceof Uint8Array) {
      this.#pushBytes(L, Math.ceil(value.length / 3), (target) => {
        target.set(value);
        return value.length;
      });
      return;
    }
    if (Array.isArray(value)) {
      const items = value as readonly LuaInput[];
      raw._lua_createtable(L, items.length, 0);
      for (let index = 0; index < items.length; index++) {
        this.#push(L, items[index], depth + 1);
        raw._lua_rawseti(L, -2, BigInt(index + 1));
      }
      return;
    }
    const object = value as { readonly [key: string]: LuaInput };
    raw._lua_createtable(L, 0, 8);
    for (const key in object) {
      const item = object[key];
      if (item === undefined) continue;
      this.#pushText(L, key);
      this.#push(L, item, depth + 1);
      raw._lua_rawset(L, -3);
    }
  }

  #read(L: LuaState, index: number, depth: number): LuaValue {
    const raw = this.#raw;
    const type = raw._lua_type(L, index);
    switch (type) {
      case typeNil:
        return undefined;
      case typeBoolean:
        return raw._lua_toboolean(L, index) !== 0;
      case typeNumber: {
        if (raw._lua_isinteger(L, index)) {
          const integer = raw._lua_tointegerx(L, index, 0);
          return integer >= -maxSafeInteger && integer <= maxSafeInteger ? Number(integer) : integer;
        }
        return raw._lua_tonumberx(L, index, 0);
      }
      case typeString:
        return this.#textAt(L, index);
      case typeLightUserdata:
        if (raw._lua_touserdata(L, index) === 0) return null;
        return { opaque: 'lightuserdata' };
      case typeTable: {
        // Script errors, as in #push: a table reached from itself ends here.
        if (depth >= maxDepth) throw new LuaScriptError('error', `table nested more than ${maxDepth} deep`);
        if (!raw._lua_checkstack(L, 3)) throw new LuaScriptError('error', 'Lua stack overflow');
        const table = raw._lua_absindex(L, index);
        const entries: (readonly [LuaValue, LuaValue])[] = [];
        raw._lua_pushnil(L);
        while (raw._lua_next(L, table) !== 0) {
          // Read the key from a copy: lua_tolstring on the key itself would confuse lua_next.
          raw._lua_pushvalue(L, -2);
          const key = this.#read(L, -1, depth + 1);
          const item = this.#read(L, -2, depth + 1);
          raw._lua_settop(L, -3);
          if (--this.#tableEntriesLeft < 0) {
            throw new LuaScriptError(
              'error',
              `the values returned hold more than ${maxTableEntriesRead} table entries (a table reached from many places is counted at each)`,
            );
          }
          entries.push([key, item]);
        }
        return new LuaTable(entries);
      }
      default:
        return { opaque: luaTypes[type] ?? 'value' };
    }
  }
}

/**
 * JSON text of a Lua value, as the scripts' `json.encode` writes it: a table
 * whose keys are exactly 1..n is an array, any other table an object (an empty
 * table is `{}`); `json.null` is null; NaN and infinities, which JSON cannot
 * hold, are written as the strings "NaN", "Infinity" and "-Infinity", as in
 * the default message format.
 */
export function encodeLuaJson(value: LuaValue): string {
  return JSON.stringify(toJson(value, 0));
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function toJson(value: LuaValue, depth: number): Json {
  if (value === undefined || value === null) return null;
  switch (typeof value) {
    case 'boolean':
    case 'string':
      return value;
    case 'number':
      if (Number.isFinite(value)) return value;
      return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
    case 'bigint':
      // JSON numbers have any precision; JSON.stringify refuses bigints, so a raw marker is used.
      return rawNumber(value);
  }
  if (!(value instanceof LuaTable)) throw new Error(`cannot encode a ${value.opaque} as JSON`);
  if (depth >= maxDepth) throw new Error(`table nested more than ${maxDepth} deep`);
  const items = value.sequence();
  if (items) return items.map((item) => toJson(item, depth + 1));
  const object: { [key: string]: Json } = {};
  for (const [key, item] of value.entries) {
    if (typeof key !== 'string' && typeof key !== 'number' && typeof key !== 'bigint') {
      throw new Error('object keys must be strings or numbers');
    }
    object[String(key)] = toJson(item, depth + 1);
  }
  return object;
}

// Integers beyond 2^53 are written exactly: JSON.rawJSON where the runtime has it (Node ≥ 21).
const rawJson = (JSON as unknown as { rawJSON?: (text: string) => Json }).rawJSON;

function rawNumber(value: bigint): Json {
  return rawJson ? rawJson(value.toString()) : value.toString();
}

const int64Min = -(2n ** 63n);
const int64Max = 2n ** 63n - 1n;

/** JSON.parse, but integers beyond 2^53 that fit 64 bits become bigints (Lua integers), not rounded floats. */
function parseJsonExactly(text: string): unknown {
  const reviver = (_key: string, value: unknown, context?: { source?: string }) => {
    if (typeof value !== 'number' || Number.isSafeInteger(value) || !context?.source) return value;
    if (!/^-?\d+$/.test(context.source)) return value;
    const integer = BigInt(context.source);
    return integer >= int64Min && integer <= int64Max ? integer : value;
  };
  return JSON.parse(text, reviver as (key: string, value: unknown) => unknown);
}

// Properties of the Lua bridge's value conversion over generated values
// (docs/security.md, "Fuzzing"): a record's values go into Lua, and whatever a
// script builds comes back. Values round-trip as lua-vm.ts documents; any
// value a script returns is read as a LuaValue or refused with a
// LuaScriptError of reason 'error' (never 'crashed': the sandbox stays
// usable), and the readers of results (messages and rows forms) either give
// their result or an InvalidScriptResult.
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { fuzzParameters } from '../../../test/support/fuzz.ts';
import { type LuaInput, LuaSandbox, LuaScriptError, LuaTable, type LuaValue } from './lua-vm.ts';
import { InvalidScriptResult, scriptMessages } from './script-messages.ts';
import { rowEdit } from './script-rows.ts';

const limits = { timeLimitMs: 2_000, memoryLimitBytes: 16 * 1024 * 1024 };

let box: LuaSandbox;
beforeAll(async () => {
  box = await LuaSandbox.create(limits, { print: () => {} });
  box.run(
    `function echo(...) return ... end
     function ok() return 1 end
     function encode(v) return json.encode(v) end
     function decode(text) return json.decode(text) end
     function run(source) return load(source, 'generated', 't')() end
     function cyclic() local t = { a = 1 } t.self = t return t end
     function nested(depth) local t = {} for _ = 1, depth do t = { t } end return t end
     function shared(depth) local t = {} for _ = 1, depth do t = { t, t } end return t end`,
    'fuzz',
  );
}, 30_000);

const decoder = new TextDecoder();

/** A value compared regardless of the order Lua's `next` visits a table's entries in. */
function canonical(value: LuaValue): unknown {
  if (value instanceof LuaTable) {
    return {
      table: value.entries
        .map(([key, item]) => [canonical(key), canonical(item)] as const)
        .sort(([a], [b]) => (orderKey(a) < orderKey(b) ? -1 : 1)),
    };
  }
  return value;
}

function orderKey(value: unknown): string {
  return JSON.stringify(value, (_, item) => (typeof item === 'bigint' ? `${item}n` : item)) ?? 'undefined';
}

/** What lua-vm.ts says `input` becomes in Lua and comes back as (see LuaInput and LuaValue). */
function expectedBack(input: LuaInput): unknown {
  if (input === undefined || input === null || typeof input === 'boolean' || typeof input === 'string')
    return input;
  if (typeof input === 'number') return Number.isSafeInteger(input) ? input + 0 : input;
  if (typeof input === 'bigint') {
    const integer = BigInt.asIntN(64, input);
    return integer >= BigInt(Number.MIN_SAFE_INTEGER) && integer <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(integer)
      : integer;
  }
  if (input instanceof Uint8Array) return decoder.decode(input);
  const entries: (readonly [unknown, unknown])[] = [];
  if (Array.isArray(input)) {
    input.forEach((item, index) => {
      if (item !== undefined) entries.push([index + 1, expectedBack(item)]);
    });
  } else {
    for (const [key, item] of Object.entries(input as Record<string, LuaInput>)) {
      if (item !== undefined) entries.push([key, expectedBack(item)]);
    }
  }
  return { table: entries.sort(([a], [b]) => (orderKey(a) < orderKey(b) ? -1 : 1)) };
}

/** Values a record can hold: row text, NULLs, numbers of every width, bytes, nested tables. */
const luaInput: fc.Arbitrary<LuaInput> = fc.letrec<{ value: LuaInput }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom<LuaInput>(undefined, null, true, false, 0, -0, Number.NaN, Number.POSITIVE_INFINITY),
    fc.integer(),
    fc.maxSafeInteger(),
    fc.double(),
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
    fc.string({ unit: 'binary', maxLength: 20 }),
    fc.uint8Array({ maxLength: 12 }),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string({ unit: 'binary', maxLength: 6 }), tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** Whether `value` is a LuaValue as lua-vm.ts defines it, all the way down. */
function isLuaValue(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (['boolean', 'number', 'bigint', 'string'].includes(typeof value)) return true;
  if (value instanceof LuaTable)
    return value.entries.every(([key, item]) => isLuaValue(key) && isLuaValue(item));
  return typeof value === 'object' && typeof (value as { opaque?: unknown }).opaque === 'string';
}

/** Lua expressions of every kind a script can return, tables keyed by any value included. */
const luaExpression: fc.Arbitrary<string> = fc.letrec<{ expression: string }>((tie) => ({
  expression: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(
      'nil',
      'true',
      'false',
      'json.null',
      'math.maxinteger',
      'math.mininteger',
      '0/0',
      '1/0',
      '-1/0',
      '-0.0',
      '2^53 + 1',
      '1.5',
      'print',
      'coroutine.create(function() end)',
      "'\\xff\\xfe\\0tail'",
      "('x'):rep(100)",
      'cyclic()',
      'nested(5)',
      'shared(8)',
      '{}',
    ),
    fc.integer().map(String),
    // Any bytes, valid UTF-8 or not, as a literal of decimal escapes.
    fc.uint8Array({ maxLength: 10 }).map((bytes) => `'${[...bytes].map((byte) => `\\${byte}`).join('')}'`),
    fc.array(tie('expression'), { maxLength: 4 }).map((items) => `{ ${items.join(', ')} }`),
    fc
      .array(fc.tuple(tie('expression'), tie('expression')), { maxLength: 3 })
      // A nil or NaN key is a Lua error in a constructor: such keys are left out.
      .map(
        (pairs) =>
          `(function() local t = {} ${pairs.map(([key, item]) => `pcall(function() t[${key}] = ${item} end)`).join(' ')} return t end)()`,
      ),
  ),
})).expression;

/** Calls `name`; the values, or the LuaScriptError of reason 'error'. Anything else fails the property. */
function callOutcome(
  name: string,
  args: readonly LuaInput[],
): { values: LuaValue[] } | { error: LuaScriptError } {
  try {
    return { values: box.call(name, args) };
  } catch (error) {
    if (!(error instanceof LuaScriptError)) throw error;
    expect({ reason: error.reason, message: error.message }).toMatchObject({ reason: 'error' });
    return { error };
  } finally {
    // The sandbox is still usable, whatever happened.
    expect(box.call('ok')).toEqual([1]);
  }
}

describe('Lua bridge, generated values', () => {
  it('gives back every value it hands to Lua, as lua-vm.ts documents the conversion (1000 cases)', () => {
    fc.assert(
      fc.property(fc.array(luaInput, { maxLength: 3 }), (inputs) => {
        const outcome = callOutcome('echo', inputs);
        if ('error' in outcome) throw outcome.error;
        // Trailing nils are values too: a Lua function returns as many as it was given.
        expect(outcome.values.map(canonical)).toEqual(inputs.map(expectedBack));
      }),
      fuzzParameters(1000),
    );
  });

  it('reads whatever a script returns as LuaValues or refuses it as an error, and its readers too (1000 cases)', () => {
    fc.assert(
      fc.property(fc.array(luaExpression, { maxLength: 3 }), (expressions) => {
        const outcome = callOutcome('run', [`return ${expressions.join(', ') || 'nil'}`]);
        if ('error' in outcome) return;
        for (const value of outcome.values) expect(isLuaValue(value)).toBe(true);
        for (const read of [
          () => scriptMessages(outcome.values),
          () => rowEdit(outcome.values, { a: '1' }),
        ]) {
          try {
            read();
          } catch (error) {
            expect(error).toBeInstanceOf(InvalidScriptResult);
          }
        }
      }),
      fuzzParameters(1000, [[['cyclic()']], [['nested(101)']]]),
    );
  });

  it('json.encode gives JSON or a script error for any value a script holds; json.decode any text (1000 cases)', () => {
    fc.assert(
      fc.property(
        luaExpression,
        fc.oneof(fc.json(), fc.string({ unit: 'binary', maxLength: 30 })),
        (expression, text) => {
          const encoded = callOutcome('run', [`return json.encode(${expression})`]);
          if ('values' in encoded) expect(() => JSON.parse(encoded.values[0] as string)).not.toThrow();
          const decoded = callOutcome('decode', [text]);
          if ('values' in decoded) expect(decoded.values.every(isLuaValue)).toBe(true);
        },
      ),
      fuzzParameters(1000),
    );
  });

  it('refuses a table reached from itself, or nested past 100 levels, as the script error it is', () => {
    for (const [name, args] of [
      ['cyclic', []],
      ['nested', [101]],
      ['encode', [nestedInput(101)]],
      ['echo', [nestedInput(150)]],
    ] as const) {
      const outcome = callOutcome(name, args);
      expect('error' in outcome && outcome.error.message).toMatch(/nested more than 100 deep/);
    }
    expect(canonical(box.call('nested', [99])[0])).toBeTruthy();
  });

  it('refuses a table reached from many places before reading it once for each (2^21 paths)', () => {
    const outcome = callOutcome('shared', [21]);
    expect('error' in outcome && outcome.error.message).toMatch(/more than 1000000 table entries/);
    // Shared tables below the bound are read as often as they are reached.
    const [text] = box.call('run', ['return json.encode(shared(10))']);
    expect(JSON.parse(text as string)).toHaveLength(2);
  });
});

function nestedInput(depth: number): LuaInput {
  let value: LuaInput = [];
  for (let level = 0; level < depth; level++) value = [value];
  return value;
}

// Properties of parseTextValue over generated input (docs/security.md,
// "Fuzzing"): the text is a source column's value, any bytes a user stored
// turned into the type's text output. Every type either gives its typed value
// or throws the engine's decode error, whose message never holds the text;
// and the text PostgreSQL's output functions write for a value (written here
// as they write it, src/backend/utils/adt/) parses back to that value.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fuzzParameters } from '../../../test/support/fuzz.ts';
import { EngineError } from '../errors.ts';
import { civilFromDays, formatCivilDate } from './calendar.ts';
import { type Interval, isHstore, parseTextValue, type Value } from './parse-text.ts';
import { type ColumnType, type ScalarColumnType, type ScalarKind, scalarKinds } from './value-kind.ts';

const scalarTypes: readonly ScalarColumnType[] = scalarKinds.map((kind): ScalarColumnType => {
  switch (kind) {
    case 'numeric':
      return { kind };
    case 'enum':
      return { kind, name: 'mood' };
    case 'geometry':
      return { kind, name: 'point' };
    case 'unknown_text':
      return { kind, name: 'tsvector' };
    default:
      return { kind };
  }
});
const columnTypes: readonly ColumnType[] = [
  ...scalarTypes,
  ...scalarTypes.map((element): ColumnType => ({ kind: 'array', element })),
];

const int32Min = -(2 ** 31);
const int32Max = 2 ** 31 - 1;
const int64Min = -(2n ** 63n);
const int64Max = 2n ** 63n - 1n;
const microsPerDay = 86_400_000_000n;

/** Whether `value` has the JavaScript type parse-text.ts prescribes for `kind`, in its range. */
function isTypedScalar(kind: ScalarKind, value: unknown): boolean {
  switch (kind) {
    case 'int16':
      return Number.isInteger(value) && (value as number) >= -32_768 && (value as number) <= 32_767;
    case 'int32':
      return Number.isInteger(value) && (value as number) >= int32Min && (value as number) <= int32Max;
    case 'int64':
    case 'timestamp':
    case 'timestamptz':
      return typeof value === 'bigint' && value >= int64Min && value <= int64Max;
    case 'time':
      return typeof value === 'bigint' && value >= 0n && value <= microsPerDay;
    case 'float32':
    case 'float64':
      return typeof value === 'number';
    case 'boolean':
      return typeof value === 'boolean';
    case 'bytes':
      return Buffer.isBuffer(value);
    case 'interval': {
      const { months, days, microseconds } = value as Interval;
      return (
        Number.isInteger(months) &&
        months >= int32Min &&
        months <= int32Max &&
        Number.isInteger(days) &&
        days >= int32Min &&
        days <= int32Max &&
        typeof microseconds === 'bigint'
      );
    }
    case 'hstore':
      return (
        isHstore(value as Value) &&
        Object.values(value as object).every((item) => item === null || typeof item === 'string')
      );
    default:
      return typeof value === 'string';
  }
}

function isTypedValue(type: ColumnType, value: unknown): boolean {
  if (type.kind !== 'array') return isTypedScalar(type.kind, value);
  const element = type.element.kind;
  const leavesTyped = (items: unknown): boolean =>
    Array.isArray(items) &&
    items.every(
      (item) => item === null || (Array.isArray(item) ? leavesTyped(item) : isTypedScalar(element, item)),
    );
  return leavesTyped(value);
}

/**
 * Parses `text` as `type`: the value, which must be typed, or the decode
 * error, whose message is ASCII and so never holds what a text had beyond it.
 * Anything else thrown fails the property.
 */
function parseOutcome(type: ColumnType, text: string): { value: unknown } | { error: string } {
  let value: unknown;
  try {
    value = parseTextValue(type, text);
  } catch (error) {
    if (!(error instanceof EngineError)) throw error;
    // Checked without expect(): this runs for every type of every case.
    if (error.kind !== 'decode' || !decodeMessage.test(error.message))
      throw new Error(`not a decode error message: ${error.message}`);
    if ((/[^\x20-\x7e]/.test(text) || text.length > 30) && error.message.includes(text))
      throw new Error(`the message holds the text: ${error.message}`);
    return { error: error.message };
  }
  if (!isTypedValue(type, value)) throw new Error(`${JSON.stringify(type)} parsed to an untyped value`);
  return { value };
}

const decodeMessage = /^cannot decode [\x20-\x7e]+ text value: [\x20-\x7e]+$/;

// --- PostgreSQL's text output, written as its output functions write it ------

const pad = (value: number | bigint, width = 2) => String(value).padStart(width, '0');

/** float8out with extra_float_digits=3: the shortest exact decimal (JS writes the same digits). */
function floatText(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Number.POSITIVE_INFINITY) return 'Infinity';
  if (value === Number.NEGATIVE_INFINITY) return '-Infinity';
  return Object.is(value, -0) ? '-0' : String(value);
}

/** float4out: the fewest digits that read back as the same float4 (JS writes the exponent as PostgreSQL reads it). */
function float4Text(value: number): string {
  if (!Number.isFinite(value) || Object.is(value, -0)) return floatText(value);
  for (let digits = 1; ; digits++) {
    const text = String(Number(value.toPrecision(digits)));
    if (Math.fround(Number(text)) === value) return text;
  }
}

/** HH:MM:SS with the fraction's trailing zeros dropped (AppendSeconds); hours may pass 99. */
function clockText(micros: bigint): string {
  const seconds = micros / 1_000_000n;
  const fraction = micros % 1_000_000n;
  const text = `${pad(seconds / 3600n)}:${pad((seconds / 60n) % 60n)}:${pad(seconds % 60n)}`;
  return fraction === 0n ? text : `${text}.${pad(fraction, 6).replace(/0+$/, '')}`;
}

/** An ISO date as date_out writes it under DateStyle=ISO: BC years as their written number and ' BC'. */
function dateParts(days: number): { readonly text: string; readonly bc: boolean } {
  const { year, month, day } = civilFromDays(days);
  const bc = year <= 0;
  return { text: `${pad(bc ? 1 - year : year, 4)}-${pad(month)}-${pad(day)}`, bc };
}

/** timestamp_out / timestamptz_out (TimeZone=UTC unless an offset is given) of microseconds since 1970. */
function timestampText(micros: bigint, offsetSeconds: number | undefined): string {
  const local = micros + BigInt(offsetSeconds ?? 0) * 1_000_000n;
  const days = local >= 0n ? local / microsPerDay : -((-local + microsPerDay - 1n) / microsPerDay);
  const date = dateParts(Number(days));
  let offset = '';
  if (offsetSeconds !== undefined) {
    const magnitude = Math.abs(offsetSeconds);
    offset = `${offsetSeconds < 0 ? '-' : '+'}${pad(Math.floor(magnitude / 3600))}`;
    if (magnitude % 3600 !== 0) offset += `:${pad(Math.floor(magnitude / 60) % 60)}`;
    if (magnitude % 60 !== 0) offset += `:${pad(magnitude % 60)}`;
  }
  return `${date.text} ${clockText(local - days * microsPerDay)}${offset}${date.bc ? ' BC' : ''}`;
}

/** interval_out under IntervalStyle=postgres (EncodeInterval, datetime.c). */
function intervalText({ months, days, microseconds }: Interval): string {
  const parts: string[] = [];
  let negativeBefore = false;
  const field = (value: number, unit: string) => {
    if (value === 0) return;
    parts.push(`${negativeBefore && value > 0 ? '+' : ''}${value} ${unit}${value === 1 ? '' : 's'}`);
    negativeBefore = value < 0;
  };
  field(Math.trunc(months / 12), 'year');
  field(months % 12, 'mon');
  field(days, 'day');
  if (parts.length === 0 || microseconds !== 0n) {
    const sign = microseconds < 0n ? '-' : negativeBefore ? '+' : '';
    parts.push(`${sign}${clockText(microseconds < 0n ? -microseconds : microseconds)}`);
  }
  return parts.join(' ');
}

/** hstore_out: every key and value quoted, '"' and '\' escaped, NULL bare. */
function hstoreText(entries: readonly (readonly [string, string | null])[]): string {
  const quote = (text: string) => `"${text.replace(/["\\]/g, (char) => `\\${char}`)}"`;
  return entries.map(([key, value]) => `${quote(key)}=>${value === null ? 'NULL' : quote(value)}`).join(', ');
}

/** array_out: an element quoted when empty, NULL in any case, or holding a brace, comma, quote, backslash or space. */
function arrayElementText(text: string | null): string {
  if (text === null) return 'NULL';
  if (text !== '' && !/^null$/i.test(text) && !/[{}",\\ \t\n\r\v\f]/.test(text)) return text;
  return `"${text.replace(/["\\]/g, (char) => `\\${char}`)}"`;
}

type Nested<T> = readonly (T | Nested<T>)[];

function arrayText<T>(items: Nested<T>, elementText: (item: T) => string): string {
  return `{${items.map((item) => (Array.isArray(item) ? arrayText(item as Nested<T>, elementText) : elementText(item as T))).join(',')}}`;
}

// --- values and their text ---------------------------------------------------

interface Case {
  readonly type: ColumnType;
  readonly text: string;
  readonly value: unknown;
}

const int64 = fc.bigInt({ min: int64Min, max: int64Max });
/** 4713 BC, PostgreSQL's first day, to the last microsecond that fits int64 since 1970 (294247 AD). */
const timestampMicros = fc.bigInt({ min: -210_866_803_200_000_000n, max: int64Max - 1n });
const utcOffset = fc.oneof(
  fc.integer({ min: -15, max: 15 }).map((hours) => hours * 3600),
  fc.integer({ min: -15 * 3600, max: 15 * 3600 }),
);
const intervalValue = fc.record({
  months: fc.integer({ min: int32Min, max: int32Max }),
  days: fc.integer({ min: int32Min, max: int32Max }),
  microseconds: int64,
});
const anyText = fc.string({ unit: 'binary', maxLength: 16 });

const scalarCase: fc.Arbitrary<Case> = fc.oneof(
  fc
    .integer({ min: -32_768, max: 32_767 })
    .map((value): Case => ({ type: { kind: 'int16' }, text: String(value), value })),
  fc
    .integer({ min: int32Min, max: int32Max })
    .map((value): Case => ({ type: { kind: 'int32' }, text: String(value), value })),
  int64.map((value): Case => ({ type: { kind: 'int64' }, text: String(value), value })),
  fc.double().map((value): Case => ({ type: { kind: 'float64' }, text: floatText(value), value })),
  fc
    .tuple(fc.boolean(), fc.stringMatching(/^\d{1,30}$/), fc.option(fc.stringMatching(/^\d{1,20}$/)))
    .map(([negative, whole, fraction]): Case => {
      const text = `${negative ? '-' : ''}${whole}${fraction === null ? '' : `.${fraction}`}`;
      return { type: { kind: 'numeric' }, text, value: text };
    }),
  fc.boolean().map((value): Case => ({ type: { kind: 'boolean' }, text: value ? 't' : 'f', value })),
  fc.uint8Array({ maxLength: 24 }).map(
    (bytes): Case => ({
      type: { kind: 'bytes' },
      text: `\\x${Buffer.from(bytes).toString('hex')}`,
      value: Buffer.from(bytes),
    }),
  ),
  fc.tuple(fc.uuid(), fc.boolean()).map(
    ([value, upper]): Case => ({
      type: { kind: 'uuid' },
      text: upper ? value.toUpperCase() : value,
      value,
    }),
  ),
  fc.integer({ min: -2_440_588, max: 2_000_000_000 }).map(
    (days): Case => ({
      type: { kind: 'date' },
      text: `${dateParts(days).text}${dateParts(days).bc ? ' BC' : ''}`,
      value: formatCivilDate(civilFromDays(days)),
    }),
  ),
  fc
    .bigInt({ min: 0n, max: microsPerDay })
    .map((value): Case => ({ type: { kind: 'time' }, text: clockText(value), value })),
  timestampMicros.map(
    (value): Case => ({
      type: { kind: 'timestamp' },
      text: timestampText(value, undefined),
      value,
    }),
  ),
  fc
    .tuple(timestampMicros, fc.option(utcOffset, { freq: 2 }))
    .filter(([value, offset]) => {
      const local = value + BigInt(offset ?? 0) * 1_000_000n;
      return local >= -210_866_803_200_000_000n && local < int64Max - microsPerDay;
    })
    .map(
      ([value, offset]): Case => ({
        type: { kind: 'timestamptz' },
        text: timestampText(value, offset ?? 0),
        value,
      }),
    ),
  intervalValue.map((value): Case => ({ type: { kind: 'interval' }, text: intervalText(value), value })),
  fc
    .uniqueArray(
      fc.tuple(fc.oneof(anyText, fc.constantFrom('__proto__', 'constructor', 'NULL')), fc.option(anyText)),
      {
        selector: ([key]) => key,
        maxLength: 5,
      },
    )
    .map(
      (entries): Case => ({
        type: { kind: 'hstore' },
        text: hstoreText(entries),
        value: Object.assign(Object.create(null), Object.fromEntries(entries)),
      }),
    ),
  anyText.map((value): Case => ({ type: { kind: 'string' }, text: value, value })),
);

/** Element kinds of the array round trip, with their element text. */
const arrayElements = [
  { element: { kind: 'int32' }, item: fc.integer({ min: int32Min, max: int32Max }), text: String },
  {
    element: { kind: 'string' },
    item: fc.oneof(anyText, fc.constantFrom('NULL', 'null', '', ' a ', '{}', '"')),
    text: (item: string) => item,
  },
  { element: { kind: 'boolean' }, item: fc.boolean(), text: (item: boolean) => (item ? 't' : 'f') },
  {
    element: { kind: 'bytes' },
    item: fc.uint8Array({ maxLength: 4 }).map((bytes) => Buffer.from(bytes)),
    text: (item: Buffer) => `\\x${item.toString('hex')}`,
  },
  { element: { kind: 'float64' }, item: fc.double(), text: floatText },
] as const;

/** A rectangular array of up to 3 dimensions, NULLs among its elements, maybe with its bounds written. */
const arrayCase: fc.Arbitrary<Case> = fc
  .tuple(
    fc.nat(arrayElements.length - 1),
    fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 3 }),
    fc.option(fc.integer({ min: -5, max: 5 })),
  )
  .chain(([which, shape, lowerBound]) => {
    const { element, item, text } = arrayElements[which] as (typeof arrayElements)[number];
    const count = shape.reduce((product, size) => product * size, 1);
    return fc
      .array(fc.option(item as fc.Arbitrary<unknown>, { freq: 6 }), { minLength: count, maxLength: count })
      .map((flat) => {
        const nest = (level: number, at: number): [Nested<unknown>, number] => {
          const items: unknown[] = [];
          let next = at;
          for (let index = 0; index < (shape[level] as number); index++) {
            if (level === shape.length - 1) items.push(flat[next++]);
            else {
              const [inner, after] = nest(level + 1, next);
              items.push(inner);
              next = after;
            }
          }
          return [items, next];
        };
        const [value] = nest(0, 0);
        const bounds =
          lowerBound === null
            ? ''
            : `${shape.map((size) => `[${lowerBound}:${lowerBound + size - 1}]`).join('')}=`;
        const elementText = (value: unknown) =>
          arrayElementText(value === null ? null : (text as (item: unknown) => string)(value));
        return {
          type: { kind: 'array', element } as ColumnType,
          text: bounds + arrayText(value, elementText),
          value,
        };
      });
  });

/** Text shaped like some type's output, then edited: a character inserted, dropped or replaced. */
const nearlyValid = fc
  .tuple(
    fc.oneof(scalarCase, arrayCase),
    fc.array(
      fc.tuple(
        fc.nat(),
        fc.constantFrom('insert', 'delete', 'replace'),
        fc.constantFrom(...'0123456789-+:. {},"\\=>NULLBCxe\t'),
      ),
      { minLength: 1, maxLength: 3 },
    ),
  )
  .map(([{ text }, edits]) => {
    let edited = text;
    for (const [at, edit, char] of edits) {
      const position = edited.length === 0 ? 0 : at % edited.length;
      if (edit === 'insert') edited = edited.slice(0, position) + char + edited.slice(position);
      else if (edit === 'delete') edited = edited.slice(0, position) + edited.slice(position + 1);
      else edited = edited.slice(0, position) + char + edited.slice(position + 1);
    }
    return edited;
  });

/** Strings of the characters type outputs are made of, and any at all. */
const looseText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc
    .array(
      fc.constantFrom(
        '0',
        '9',
        '-',
        '+',
        ':',
        '.',
        ' ',
        'e',
        'E',
        ' BC',
        'infinity',
        '{',
        '}',
        ',',
        '"',
        '\\',
        '=>',
        'NULL',
        '\\x',
        'ab',
        '[1:2]=',
        'day',
        'days',
        'mon',
        'years',
        't',
        'f',
        '𝄞',
      ),
      { maxLength: 24 },
    )
    .map((parts) => parts.join('')),
);

describe('parseTextValue, generated text', () => {
  it('parses the text PostgreSQL writes for a value back to that value, every scalar kind (2000 cases)', () => {
    fc.assert(
      fc.property(scalarCase, ({ type, text, value }) => {
        expect(parseOutcome(type, text)).toEqual({ value });
      }),
      fuzzParameters(2000),
    );
  });

  it('parses the shortest float4 text to the double nearest it, which Math.fround makes the float4 again (1000 cases)', () => {
    fc.assert(
      fc.property(fc.float(), (value) => {
        const text = float4Text(value);
        const outcome = parseOutcome({ kind: 'float32' }, text);
        expect(outcome).toEqual({ value: Number(text) });
        expect(Math.fround(Number(text))).toBe(value);
      }),
      fuzzParameters(1000),
    );
  });

  it('parses the text array_out writes back to the array, quoting, NULLs, bounds and dimensions included (1000 cases)', () => {
    fc.assert(
      fc.property(arrayCase, ({ type, text, value }) => {
        expect(parseOutcome(type, text)).toEqual({ value });
      }),
      fuzzParameters(1000),
    );
  });

  it('gives every type a typed value or a decode error for any text (1000 cases × 54 types)', () => {
    fc.assert(
      fc.property(fc.oneof(looseText, nearlyValid), (text) => {
        for (const type of columnTypes) parseOutcome(type, text);
      }),
      fuzzParameters(1000),
    );
  });

  it('refuses an array nested deeper than PostgreSQL writes (6 dimensions) with a decode error, not a stack overflow', () => {
    fc.assert(
      fc.property(fc.integer({ min: 7, max: 200_000 }), fc.constantFrom('', '1', '}'), (depth, after) => {
        const outcome = parseOutcome(
          { kind: 'array', element: { kind: 'int32' } },
          '{'.repeat(depth) + after,
        );
        expect(outcome).toEqual({ error: expect.stringMatching(/more than 6 dimensions/) });
      }),
      fuzzParameters(50, [[100_000, '']]),
    );
    const sixDimensions = `${'{'.repeat(6)}1${'}'.repeat(6)}`;
    expect(parseTextValue({ kind: 'array', element: { kind: 'int32' } }, sixDimensions)).toEqual([
      [[[[[1]]]]],
    ]);
  });
});

import { describe, expect, expectTypeOf, it } from 'vitest';
import { EngineError } from '../errors.ts';
import {
  type ArrayValue,
  type Hstore,
  type Interval,
  isArrayValue,
  isHstore,
  isVerbatimText,
  parseTextValue,
  type ScalarVisitor,
  timestampInfinity,
  timestampMinusInfinity,
  visitArray,
  visitScalar,
} from './parse-text.ts';
import {
  type ColumnType,
  describeColumnType,
  type ScalarColumnType,
  type ScalarKind,
  scalarKinds,
} from './value-kind.ts';

const int16 = { kind: 'int16' } as const;
const int32 = { kind: 'int32' } as const;
const int64 = { kind: 'int64' } as const;
const float32 = { kind: 'float32' } as const;
const float64 = { kind: 'float64' } as const;
const numeric = { kind: 'numeric' } as const;
const boolean = { kind: 'boolean' } as const;
const bytes = { kind: 'bytes' } as const;
const uuid = { kind: 'uuid' } as const;
const json = { kind: 'json' } as const;
const date = { kind: 'date' } as const;
const time = { kind: 'time' } as const;
const timetz = { kind: 'timetz' } as const;
const timestamp = { kind: 'timestamp' } as const;
const timestamptz = { kind: 'timestamptz' } as const;
const interval = { kind: 'interval' } as const;
const hstore = { kind: 'hstore' } as const;
const inet = { kind: 'inet' } as const;
const cidr = { kind: 'cidr' } as const;
const macaddr = { kind: 'macaddr' } as const;
const bit = { kind: 'bit' } as const;

function arrayOf<E extends ScalarColumnType>(element: E) {
  return { kind: 'array', element } as const;
}

/** Asserts a decode error that names the type and does not echo the input. */
function expectDecodeError(type: ColumnType, text: string): void {
  let thrown: unknown;
  try {
    parseTextValue(type, text);
  } catch (error) {
    thrown = error;
  }
  expect(thrown, `expected a decode error for ${describeColumnType(type)}`).toBeInstanceOf(EngineError);
  const error = thrown as EngineError;
  expect(error.kind).toBe('decode');
  expect(error.message).toContain(describeColumnType(type));
  if (text.length >= 4) expect(error.message).not.toContain(text);
  expect(error.cause).toBeUndefined();
}

const micros = (milliseconds: number): bigint => BigInt(milliseconds) * 1000n;

describe('integers', () => {
  it('parses int16 and int32 to numbers at their limits', () => {
    expect(parseTextValue(int16, '0')).toBe(0);
    expect(parseTextValue(int16, '32767')).toBe(32_767);
    expect(parseTextValue(int16, '-32768')).toBe(-32_768);
    expect(parseTextValue(int32, '2147483647')).toBe(2_147_483_647);
    expect(parseTextValue(int32, '-2147483648')).toBe(-2_147_483_648);
  });

  it('parses int64 to bigint at its limits, exactly', () => {
    expect(parseTextValue(int64, '9223372036854775807')).toBe(9_223_372_036_854_775_807n);
    expect(parseTextValue(int64, '-9223372036854775808')).toBe(-9_223_372_036_854_775_808n);
    expect(parseTextValue(int64, '9007199254740993')).toBe(9_007_199_254_740_993n);
    expect(parseTextValue(int64, '4294967295')).toBe(4_294_967_295n); // oid max
  });

  it.each([
    [int16, '32768'],
    [int16, '-32769'],
    [int32, '2147483648'],
    [int32, '-2147483649'],
    [int32, '99999999999999999999'],
    [int64, '9223372036854775808'],
    [int64, '-9223372036854775809'],
    [int64, '123456789012345678901'],
  ])('rejects %o out of range: %s', (type, text) => expectDecodeError(type, text));

  it.each(['', ' 1', '1 ', '1.0', '0x10', '1e3', '+1', '--1', 'one', '١'])('rejects %j', (text) => {
    expectDecodeError(int16, text);
    expectDecodeError(int32, text);
    expectDecodeError(int64, text);
  });
});

describe('floats', () => {
  it('parses shortest-exact decimal output', () => {
    expect(parseTextValue(float64, '1.5e+300')).toBe(1.5e300);
    expect(parseTextValue(float64, '1e-05')).toBe(1e-5);
    expect(parseTextValue(float64, '4.9406564584124654e-324')).toBe(5e-324);
    expect(parseTextValue(float64, '1.7976931348623157e+308')).toBe(Number.MAX_VALUE);
    expect(parseTextValue(float64, '0.30000000000000004')).toBe(0.1 + 0.2);
    expect(Object.is(parseTextValue(float64, '-0'), -0)).toBe(true);
    expect(parseTextValue(float32, '0.1')).toBe(0.1);
    expect(parseTextValue(float32, '3.4028235e+38')).toBe(3.4028235e38);
  });

  it('parses NaN and the infinities', () => {
    for (const type of [float32, float64]) {
      expect(parseTextValue(type, 'NaN')).toBeNaN();
      expect(parseTextValue(type, 'Infinity')).toBe(Number.POSITIVE_INFINITY);
      expect(parseTextValue(type, '-Infinity')).toBe(Number.NEGATIVE_INFINITY);
    }
  });

  it.each(['', 'nan', 'inf', '-inf', 'infinity', '1,5', '0x1F', ' 1', '1e', 'e5', '1.5.5', '0b1'])(
    'rejects %j',
    (text) => {
      expectDecodeError(float64, text);
      expectDecodeError(float32, text);
    },
  );
});

describe('numeric', () => {
  it('keeps the text with full precision and display scale', () => {
    const long = '123456789012345678901234567890123456789012345.678901234567890123456789';
    expect(parseTextValue(numeric, long)).toBe(long);
    expect(parseTextValue(numeric, `-${long}`)).toBe(`-${long}`);
    expect(parseTextValue(numeric, '1.50')).toBe('1.50');
    expect(parseTextValue(numeric, '0.00000000000000000001')).toBe('0.00000000000000000001');
    expect(parseTextValue(numeric, '0')).toBe('0');
    expect(parseTextValue({ kind: 'numeric', precision: 5, scale: -2 }, '12300')).toBe('12300');
  });

  it('keeps NaN and the infinities', () => {
    expect(parseTextValue(numeric, 'NaN')).toBe('NaN');
    expect(parseTextValue(numeric, 'Infinity')).toBe('Infinity');
    expect(parseTextValue(numeric, '-Infinity')).toBe('-Infinity');
  });

  it.each(['', '1e5', '.5', '1.', '+1', 'nan', 'infinity', '1 000', '1,5', '--1'])('rejects %j', (text) =>
    expectDecodeError(numeric, text),
  );

  it('names the constrained type in errors', () => {
    expectDecodeError({ kind: 'numeric', precision: 10, scale: 2 }, 'x.yz');
  });
});

describe('boolean', () => {
  it("parses 't' and 'f'", () => {
    expect(parseTextValue(boolean, 't')).toBe(true);
    expect(parseTextValue(boolean, 'f')).toBe(false);
  });

  it.each(['true', 'false', 'T', '1', '0', '', 'yes'])('rejects %j', (text) =>
    expectDecodeError(boolean, text),
  );
});

describe('bytes', () => {
  it('parses the hex format into a Buffer', () => {
    expect(parseTextValue(bytes, '\\x')).toEqual(Buffer.alloc(0));
    expect(parseTextValue(bytes, '\\x00ff10')).toEqual(Buffer.from([0, 255, 16]));
    expect(parseTextValue(bytes, '\\xDEADbeef')).toEqual(Buffer.from([0xde, 0xad, 0xbe, 0xef]));
  });

  it.each(['', '00ff', '\\x0', '\\xzz', '\\x00f', '\\000\\377', 'x00', '\\X00'])('rejects %j', (text) =>
    expectDecodeError(bytes, text),
  );
});

describe('uuid', () => {
  it('lower-cases', () => {
    expect(parseTextValue(uuid, 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11')).toBe(
      'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
    );
    expect(parseTextValue(uuid, '00000000-0000-0000-0000-000000000000')).toBe(
      '00000000-0000-0000-0000-000000000000',
    );
  });

  it.each([
    '',
    'a0eebc999c0b4ef8bb6d6bb9bd380a11',
    '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}',
    'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1',
    'g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
  ])('rejects %j', (text) => expectDecodeError(uuid, text));
});

describe('json', () => {
  it('keeps the raw text so big numbers stay exact', () => {
    const text = '{"big": 123456789012345678901234567890, "f": 0.1000000000000000000001, "s": "\\u00e9"}';
    expect(parseTextValue(json, text)).toBe(text);
    expect(parseTextValue(json, 'null')).toBe('null');
  });
});

describe('date', () => {
  it('parses ISO dates', () => {
    expect(parseTextValue(date, '2024-02-29')).toBe('2024-02-29');
    expect(parseTextValue(date, '1970-01-01')).toBe('1970-01-01');
    expect(parseTextValue(date, '0001-01-01')).toBe('0001-01-01');
    expect(parseTextValue(date, '5874897-12-31')).toBe('5874897-12-31');
    expect(parseTextValue(date, '2000-02-29')).toBe('2000-02-29');
  });

  it('writes BC dates with astronomical years', () => {
    expect(parseTextValue(date, '0001-12-31 BC')).toBe('0000-12-31');
    expect(parseTextValue(date, '0044-03-15 BC')).toBe('-0043-03-15');
    expect(parseTextValue(date, '4714-11-24 BC')).toBe('-4713-11-24');
    // 1 BC is a leap year in the proleptic Gregorian calendar; 2 BC is not.
    expect(parseTextValue(date, '0001-02-29 BC')).toBe('0000-02-29');
    expectDecodeError(date, '0002-02-29 BC');
  });

  it('keeps the infinities', () => {
    expect(parseTextValue(date, 'infinity')).toBe('infinity');
    expect(parseTextValue(date, '-infinity')).toBe('-infinity');
  });

  it.each([
    '',
    '2023-02-29',
    '1900-02-29',
    '2024-13-01',
    '2024-00-10',
    '2024-04-31',
    '2024-01-00',
    '0000-01-01',
    '24-01-01',
    '2024-1-01',
    '2024/01/01',
    '2024-01-01 AD',
    '2024-01-01 00:00:00',
    '01/02/2024',
    'Infinity',
  ])('rejects %j', (text) => expectDecodeError(date, text));
});

describe('time', () => {
  it('parses microseconds since midnight', () => {
    expect(parseTextValue(time, '00:00:00')).toBe(0n);
    expect(parseTextValue(time, '04:05:06.789')).toBe(14_706_789_000n);
    expect(parseTextValue(time, '23:59:59.999999')).toBe(86_399_999_999n);
    expect(parseTextValue(time, '12:00:00.000001')).toBe(43_200_000_001n);
    expect(parseTextValue(time, '24:00:00')).toBe(86_400_000_000n);
  });

  it.each([
    '',
    '24:00:00.000001',
    '24:00:01',
    '25:00:00',
    '12:60:00',
    '12:00:60',
    '1:00:00',
    '12:00',
    '12:00:00.1234567',
  ])('rejects %j', (text) => expectDecodeError(time, text));

  it('keeps timetz text', () => {
    expect(parseTextValue(timetz, '04:05:06.789+05:30')).toBe('04:05:06.789+05:30');
    expect(parseTextValue(timetz, '00:00:00+00')).toBe('00:00:00+00');
    expect(parseTextValue(timetz, '23:59:59.999999-15:59')).toBe('23:59:59.999999-15:59');
    expectDecodeError(timetz, '04:05:06');
    expectDecodeError(timetz, 'noon UTC');
  });
});

describe('timestamps', () => {
  it('parses microseconds since the Unix epoch', () => {
    expect(parseTextValue(timestamp, '1970-01-01 00:00:00')).toBe(0n);
    expect(parseTextValue(timestamp, '2024-02-29 12:34:56.789012')).toBe(
      micros(Date.UTC(2024, 1, 29, 12, 34, 56)) + 789_012n,
    );
    expect(parseTextValue(timestamp, '1969-12-31 23:59:59.999999')).toBe(-1n);
    expect(parseTextValue(timestamp, '2000-01-01 00:00:00')).toBe(946_684_800_000_000n);
    expect(parseTextValue(timestamp, '10000-01-01 00:00:00')).toBe(micros(Date.UTC(10_000, 0, 1)));
  });

  it('reads fractions of one to six digits', () => {
    const base = micros(Date.UTC(2024, 0, 1));
    expect(parseTextValue(timestamp, '2024-01-01 00:00:00.5')).toBe(base + 500_000n);
    expect(parseTextValue(timestamp, '2024-01-01 00:00:00.12')).toBe(base + 120_000n);
    expect(parseTextValue(timestamp, '2024-01-01 00:00:00.123')).toBe(base + 123_000n);
    expect(parseTextValue(timestamp, '2024-01-01 00:00:00.1234')).toBe(base + 123_400n);
    expect(parseTextValue(timestamp, '2024-01-01 00:00:00.12345')).toBe(base + 123_450n);
    expect(parseTextValue(timestamp, '2024-01-01 00:00:00.000001')).toBe(base + 1n);
  });

  it('reads the common shape by position exactly as the full grammar does', () => {
    // Random dates of years 1–9999, fractions of 0–6 digits, with and without
    // an offset; the expected value comes from Date's own calendar.
    let seed = 42;
    const random = (below: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % below;
    };
    const pad = (value: number, width: number) => String(value).padStart(width, '0');
    for (let index = 0; index < 2000; index++) {
      const year = 1 + random(9999);
      const month = 1 + random(12);
      const day = 1 + random(28);
      const [hour, minute, second] = [random(24), random(60), random(60)];
      const digits = random(7);
      const fraction = digits === 0 ? '' : `.${pad(random(10 ** digits), digits)}`;
      const offsetHours = random(3) === 0 ? random(15) : 0;
      const sign = random(2) === 0 ? '+' : '-';
      const date = new Date(0);
      date.setUTCFullYear(year, month - 1, day);
      date.setUTCHours(hour, minute, second, 0);
      const fractionMicros = digits === 0 ? 0n : BigInt(fraction.slice(1).padEnd(6, '0'));
      const local = micros(date.getTime()) + fractionMicros;
      const text = `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)} ${pad(hour, 2)}:${pad(minute, 2)}:${pad(second, 2)}${fraction}`;
      expect(parseTextValue(timestamp, text)).toBe(local);
      const offsetMicros = BigInt(offsetHours * 3600) * 1_000_000n;
      const utc = sign === '+' ? local - offsetMicros : local + offsetMicros;
      expect(parseTextValue(timestamptz, `${text}${sign}${pad(offsetHours, 2)}`)).toBe(utc);
    }
  });

  it('refuses what the positional reading does not take the same way as the grammar', () => {
    for (const text of [
      '2024-02-30 00:00:00',
      '2023-02-29 00:00:00',
      '2024-13-01 00:00:00',
      '2024-00-01 00:00:00',
      '0000-01-01 00:00:00',
      '2024-01-01 24:00:00',
      '2024-01-01 00:60:00',
      '2024-01-01 00:00:60',
      '2024-01-01 00:00:00.',
      '2024-01-01 00:00:00.1234567',
      '2024-01-01 00:00:00+00',
      '2024-01-01T00:00:00',
      '2024-01-01 0a:00:00',
    ]) {
      expect(() => parseTextValue(timestamp, text), text).toThrow(EngineError);
    }
    for (const text of ['2024-01-01 00:00:00', '2024-01-01 00:00:00+0', '2024-01-01 00:00:00.5+00x']) {
      expect(() => parseTextValue(timestamptz, text), text).toThrow(EngineError);
    }
    expect(parseTextValue(timestamptz, '2024-01-01 00:00:00+05:30')).toBe(
      micros(Date.UTC(2024, 0, 1)) - 19_800_000_000n,
    );
  });

  it('parses BC timestamps', () => {
    const idesOfMarch = new Date(0);
    idesOfMarch.setUTCFullYear(-43, 2, 15);
    idesOfMarch.setUTCHours(12, 0, 0, 0);
    expect(parseTextValue(timestamp, '0044-03-15 12:00:00 BC')).toBe(micros(idesOfMarch.getTime()));
    expect(parseTextValue(timestamptz, '0044-03-15 12:00:00+00 BC')).toBe(micros(idesOfMarch.getTime()));
    expect(parseTextValue(timestamp, '0044-03-15 12:00:00.5 BC')).toBe(
      micros(idesOfMarch.getTime()) + 500_000n,
    );
    // Julian day 0, PostgreSQL's earliest timestamp.
    expect(parseTextValue(timestamptz, '4714-11-24 00:00:00+00 BC')).toBe(-2_440_588n * 86_400_000_000n);
    // One microsecond before 0001-01-01 00:00:00, which is -62135596800 s.
    expect(parseTextValue(timestamp, '0001-12-31 23:59:59.999999 BC')).toBe(-62_135_596_800_000_001n);
  });

  it('subtracts the UTC offset of timestamptz', () => {
    const midnight = micros(Date.UTC(2024, 0, 1));
    expect(parseTextValue(timestamptz, '2024-01-01 00:00:00+00')).toBe(midnight);
    expect(parseTextValue(timestamptz, '2024-01-01 05:30:00+05:30')).toBe(midnight);
    expect(parseTextValue(timestamptz, '2023-12-31 14:00:00-10')).toBe(midnight);
    // Local mean time offsets have seconds: Amsterdam in 1900.
    expect(parseTextValue(timestamptz, '1900-01-01 00:19:32+00:19:32')).toBe(micros(Date.UTC(1900, 0, 1)));
  });

  it('maps the infinities to the int64 sentinels', () => {
    for (const type of [timestamp, timestamptz]) {
      expect(parseTextValue(type, 'infinity')).toBe(timestampInfinity);
      expect(parseTextValue(type, '-infinity')).toBe(timestampMinusInfinity);
    }
    expect(timestampInfinity).toBe(9_223_372_036_854_775_807n);
    expect(timestampMinusInfinity).toBe(-9_223_372_036_854_775_808n);
  });

  it('refuses finite values the sentinels would shadow or int64 cannot hold', () => {
    expect(parseTextValue(timestamp, '294247-01-10 04:00:54.775806')).toBe(timestampInfinity - 1n);
    expectDecodeError(timestamp, '294247-01-10 04:00:54.775807');
    expectDecodeError(timestamp, '294276-12-31 23:59:59.999999');
    expectDecodeError(timestamptz, '294276-12-31 23:59:59.999999+00');
  });

  it('requires an offset on timestamptz and none on timestamp', () => {
    expectDecodeError(timestamptz, '2024-01-01 00:00:00');
    expectDecodeError(timestamp, '2024-01-01 00:00:00+00');
  });

  it.each([
    '',
    '2024-01-01',
    '2024-01-01T00:00:00',
    '2024-01-01 24:00:00',
    '2024-01-01 00:60:00',
    '2024-02-30 00:00:00',
    '2024-01-01 00:00:00.1234567',
    '2024-01-01 00:00:00.',
    '2024-01-01 0:00:00',
    'Mon Jan 01 00:00:00 2024',
    '0000-01-01 00:00:00',
    'Infinity',
  ])('rejects %j', (text) => {
    expectDecodeError(timestamp, text);
    expectDecodeError(timestamptz, text.length > 10 ? `${text}+00` : text);
  });
});

describe('interval', () => {
  const cases: ReadonlyArray<readonly [string, Interval]> = [
    ['00:00:00', { months: 0, days: 0, microseconds: 0n }],
    ['1 year 2 mons 3 days 04:05:06.789', { months: 14, days: 3, microseconds: 14_706_789_000n }],
    ['-1 days +02:03:00', { months: 0, days: -1, microseconds: 7_380_000_000n }],
    ['-00:00:01.5', { months: 0, days: 0, microseconds: -1_500_000n }],
    ['-1 years -2 mons +3 days -04:05:06', { months: -14, days: 3, microseconds: -14_706_000_000n }],
    ['1 day', { months: 0, days: 1, microseconds: 0n }],
    ['-1 mons', { months: -1, days: 0, microseconds: 0n }],
    ['11 mons', { months: 11, days: 0, microseconds: 0n }],
    ['1 year -1 mons', { months: 11, days: 0, microseconds: 0n }],
    ['-1 days +00:00:01', { months: 0, days: -1, microseconds: 1_000_000n }],
    ['00:00:00.000001', { months: 0, days: 0, microseconds: 1n }],
    ['2562047788:00:54.775807', { months: 0, days: 0, microseconds: 9_223_372_036_854_775_807n }],
    ['-2562047788:00:54.775808', { months: 0, days: 0, microseconds: -9_223_372_036_854_775_808n }],
    ['178956970 years 7 mons', { months: 2_147_483_647, days: 0, microseconds: 0n }],
    ['-178956970 years -8 mons', { months: -2_147_483_648, days: 0, microseconds: 0n }],
    ['2147483647 days', { months: 0, days: 2_147_483_647, microseconds: 0n }],
    ['3 days 100:00:00', { months: 0, days: 3, microseconds: 360_000_000_000n }],
  ];

  it.each(cases)('parses %j', (text, expected) => {
    expect(parseTextValue(interval, text)).toEqual(expected);
  });

  it('parses the PostgreSQL 17 infinities into the limits PostgreSQL stores', () => {
    expect(parseTextValue(interval, 'infinity')).toEqual({
      months: 2_147_483_647,
      days: 2_147_483_647,
      microseconds: 9_223_372_036_854_775_807n,
    });
    expect(parseTextValue(interval, '-infinity')).toEqual({
      months: -2_147_483_648,
      days: -2_147_483_648,
      microseconds: -9_223_372_036_854_775_808n,
    });
  });

  it.each([
    '',
    ' ',
    '1',
    '1 week',
    '1 mon 1 year',
    '1 day 1 mon',
    '1 year 1 year',
    '00:00:00 1 day',
    '00:00:00 00:00:00',
    '1 day  00:00:00',
    '@ 1 year',
    '1 year ago',
    'P1Y2M3DT4H5M6S',
    '1-2',
    '00:60:00',
    '00:00:60',
    '0:00:00',
    '00:00:00.1234567',
    '178956971 years',
    '2147483648 days',
    '2562047788:00:54.775808',
    'Infinity',
  ])('rejects %j', (text) => expectDecodeError(interval, text));
});

describe('hstore', () => {
  it('parses hstore_out text', () => {
    expect(parseTextValue(hstore, '')).toEqual({});
    expect(parseTextValue(hstore, '"a"=>"1", "b"=>NULL')).toEqual({ a: '1', b: null });
    expect(parseTextValue(hstore, '"n"=>"NULL"')).toEqual({ n: 'NULL' });
    expect(parseTextValue(hstore, '""=>""')).toEqual({ '': '' });
  });

  it('undoes backslash escapes inside quotes', () => {
    expect(parseTextValue(hstore, '"a\\"b"=>"x", "c\\\\d"=>"y=>z", "e,f"=>" , "')).toEqual({
      'a"b': 'x',
      'c\\d': 'y=>z',
      'e,f': ' , ',
    });
    expect(parseTextValue(hstore, '"ключ"=>"значение 🎉"')).toEqual({ ключ: 'значение 🎉' });
  });

  it("takes hstore_in's unquoted forms and whitespace", () => {
    expect(parseTextValue(hstore, 'a=>1,b => null ,  c=>NuLl, d=>x\\ y')).toEqual({
      a: '1',
      b: null,
      c: null,
      d: 'x y',
    });
    expect(parseTextValue(hstore, '  ')).toEqual({});
  });

  it('keeps the first of duplicate keys, as hstore_in does', () => {
    expect(parseTextValue(hstore, '"a"=>"1", "a"=>"2"')).toEqual({ a: '1' });
  });

  it('returns a null-prototype object, safe for any key', () => {
    const value = parseTextValue(hstore, '"__proto__"=>"x", "constructor"=>NULL');
    expect(Object.getPrototypeOf(value)).toBeNull();
    expect(Object.keys(value)).toEqual(['__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(value, '__proto__')?.value).toBe('x');
    expect(value.constructor).toBeNull();
  });

  it.each([
    '"a"',
    '"a"=>',
    '"a"=>"b",',
    '"a=>"b"',
    '"a"=>"b" "c"=>"d"',
    '"a"->"b"',
    '=>"b"',
    '"a"=>"b\\',
    '"a"=>"b"x',
    ',',
  ])('rejects %j', (text) => expectDecodeError(hstore, text));
});

describe('string-like kinds', () => {
  it('keeps the text unchanged', () => {
    expect(parseTextValue({ kind: 'string' }, '')).toBe('');
    expect(parseTextValue({ kind: 'string' }, 'a\tb\nc \\ "d" {e}')).toBe('a\tb\nc \\ "d" {e}');
    expect(parseTextValue({ kind: 'string' }, 'abc  ')).toBe('abc  ');
    expect(parseTextValue({ kind: 'money' }, '-$1,234.56')).toBe('-$1,234.56');
    expect(parseTextValue({ kind: 'xml' }, '<a b="c">d</a>')).toBe('<a b="c">d</a>');
    expect(parseTextValue({ kind: 'geometry', name: 'polygon' }, '((0,0),(1,1),(1,0))')).toBe(
      '((0,0),(1,1),(1,0))',
    );
    expect(parseTextValue({ kind: 'enum', name: 'mood' }, 'happy')).toBe('happy');
    expect(parseTextValue({ kind: 'unknown_text', name: 'tsvector' }, "'a':1 'b':2")).toBe("'a':1 'b':2");
  });

  it('checks network addresses and bit strings', () => {
    expect(parseTextValue(inet, '192.168.0.1')).toBe('192.168.0.1');
    expect(parseTextValue(inet, '::1')).toBe('::1');
    expect(parseTextValue(inet, '::ffff:1.2.3.4/128')).toBe('::ffff:1.2.3.4/128');
    expect(parseTextValue(cidr, '10.0.0.0/8')).toBe('10.0.0.0/8');
    expect(parseTextValue(macaddr, '08:00:2b:01:02:03')).toBe('08:00:2b:01:02:03');
    expect(parseTextValue(macaddr, '08:00:2b:01:02:03:04:05')).toBe('08:00:2b:01:02:03:04:05');
    expect(parseTextValue(bit, '10100')).toBe('10100');
    expect(parseTextValue(bit, '')).toBe('');
    expectDecodeError(inet, 'localhost');
    expectDecodeError(cidr, '');
    expectDecodeError(macaddr, '08-00-2b-01-02-03');
    expectDecodeError(macaddr, '08:00:2b:01:02:03:04');
    expectDecodeError(bit, '1012');
  });
});

describe('arrays', () => {
  it('parses one-dimensional arrays with NULLs', () => {
    expect(parseTextValue(arrayOf(int32), '{}')).toEqual([]);
    expect(parseTextValue(arrayOf(int32), '{1,2,NULL}')).toEqual([1, 2, null]);
    expect(parseTextValue(arrayOf(int32), '{null,NuLl}')).toEqual([null, null]);
    expect(parseTextValue(arrayOf(int64), '{9223372036854775807,-9223372036854775808}')).toEqual([
      9_223_372_036_854_775_807n,
      -9_223_372_036_854_775_808n,
    ]);
    expect(parseTextValue(arrayOf(boolean), '{t,f,NULL}')).toEqual([true, false, null]);
  });

  it('parses multi-dimensional arrays', () => {
    expect(parseTextValue(arrayOf(int32), '{{1,2},{3,4}}')).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(parseTextValue(arrayOf(int32), '{{{1},{2}},{{3},{NULL}}}')).toEqual([
      [[1], [2]],
      [[3], [null]],
    ]);
  });

  it('undoes quoting and backslash escapes, telling NULL from "NULL"', () => {
    expect(
      parseTextValue(arrayOf({ kind: 'string' }), '{"a b",NULL,"NULL","x\\\\y","q\\"",""," ","{,}"}'),
    ).toEqual(['a b', null, 'NULL', 'x\\y', 'q"', '', ' ', '{,}']);
    expect(parseTextValue(arrayOf({ kind: 'string' }), '{{"a,b","c\\\\"},{NULL,"}"}}')).toEqual([
      ['a,b', 'c\\'],
      [null, '}'],
    ]);
  });

  it("takes array_in's whitespace and unquoted escapes", () => {
    expect(parseTextValue(arrayOf(int32), ' { 1 , 2 } ')).toEqual([1, 2]);
    expect(parseTextValue(arrayOf({ kind: 'string' }), '{a\\,b,\\NULL,c\\ ,d e}')).toEqual([
      'a,b',
      'NULL',
      'c ',
      'd e',
    ]);
    expect(parseTextValue(arrayOf({ kind: 'string' }), '{ "x" , y }')).toEqual(['x', 'y']);
  });

  it('drops a lower-bound decoration', () => {
    expect(parseTextValue(arrayOf(int32), '[0:1]={1,2}')).toEqual([1, 2]);
    expect(parseTextValue(arrayOf(int32), '[-2:-1][1:2]={{1,2},{3,4}}')).toEqual([
      [1, 2],
      [3, 4],
    ]);
  });

  it('parses elements of every kind', () => {
    expect(
      parseTextValue(arrayOf(numeric), '{NaN,-Infinity,1.50,123456789012345678901234567890123456789012}'),
    ).toEqual(['NaN', '-Infinity', '1.50', '123456789012345678901234567890123456789012']);
    expect(parseTextValue(arrayOf(float64), '{NaN,Infinity,-1.5e-10}')).toEqual([
      Number.NaN,
      Number.POSITIVE_INFINITY,
      -1.5e-10,
    ]);
    expect(parseTextValue(arrayOf(bytes), '{"\\\\x0102",NULL,"\\\\x"}')).toEqual([
      Buffer.from([1, 2]),
      null,
      Buffer.alloc(0),
    ]);
    expect(parseTextValue(arrayOf(hstore), '{"\\"a\\"=>\\"b\\", \\"c\\"=>NULL",NULL,""}')).toEqual([
      { a: 'b', c: null },
      null,
      {},
    ]);
    expect(parseTextValue(arrayOf(timestamptz), '{"2024-01-01 00:00:00+00",infinity,-infinity}')).toEqual([
      micros(Date.UTC(2024, 0, 1)),
      timestampInfinity,
      timestampMinusInfinity,
    ]);
    expect(parseTextValue(arrayOf(date), '{2024-01-01,"0044-03-15 BC"}')).toEqual([
      '2024-01-01',
      '-0043-03-15',
    ]);
    expect(parseTextValue(arrayOf(uuid), '{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11}')).toEqual([
      'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
    ]);
    expect(parseTextValue(arrayOf(json), '{"{\\"a\\": 1}","[1, 2]",null,"\\"NULL\\""}')).toEqual([
      '{"a": 1}',
      '[1, 2]',
      null,
      '"NULL"',
    ]);
    expect(parseTextValue(arrayOf(interval), '{"1 day","-00:00:01"}')).toEqual([
      { months: 0, days: 1, microseconds: 0n },
      { months: 0, days: 0, microseconds: -1_000_000n },
    ]);
    expect(parseTextValue(arrayOf({ kind: 'enum', name: 'mood' }), '{happy,"very sad"}')).toEqual([
      'happy',
      'very sad',
    ]);
    expect(parseTextValue(arrayOf({ kind: 'geometry', name: 'point' }), '{"(1,2)","(3.5,-4)"}')).toEqual([
      '(1,2)',
      '(3.5,-4)',
    ]);
  });

  it.each([
    '',
    '1,2',
    '{1,2',
    '{1,2}}',
    '{1,,2}',
    '{,1}',
    '{1,}',
    '{{1,2},3}',
    '{1,{2,3}}',
    '{{1,2},{3}}',
    '{{1},{2,3}}',
    '{{{1}},{2}}',
    '{"1}',
    '{1"2"}',
    '{1}x',
    '{1}{2}',
    '{1 2 {3}}',
    '[0:1]{1,2}',
    '{1\\',
    '{"\\',
    '{x}',
    '{1.5}',
  ])('rejects %j', (text) => expectDecodeError(arrayOf(int32), text));

  it('names the array and element type when an element is malformed', () => {
    expect(() => parseTextValue(arrayOf(int16), '{1,99999}')).toThrow('array<int16> element');
    expect(() => parseTextValue(arrayOf(hstore), '{"a=>"}')).toThrow('array<hstore> element');
  });
});

describe('errors', () => {
  const secret = 'hunter2-SECRET-9f8e7d';
  const validating: readonly ColumnType[] = [
    int16,
    int32,
    int64,
    float32,
    float64,
    numeric,
    boolean,
    bytes,
    uuid,
    date,
    time,
    timetz,
    timestamp,
    timestamptz,
    interval,
    hstore,
    inet,
    cidr,
    macaddr,
    bit,
    arrayOf(int32),
    arrayOf({ kind: 'string' }),
  ];

  it.each(validating)('never echo the value: %o', (type) => {
    for (const text of [secret, `{${secret}`, `"${secret}"=>`, `{{"${secret}"},{1,2}}`, `\\x${secret}`]) {
      expectDecodeError(type, text);
    }
  });
});

describe('value types', () => {
  it('follow the column type', () => {
    expectTypeOf(parseTextValue(int64, '1')).toEqualTypeOf<bigint>();
    expectTypeOf(parseTextValue(int32, '1')).toEqualTypeOf<number>();
    expectTypeOf(parseTextValue(bytes, '\\x')).toEqualTypeOf<Buffer>();
    expectTypeOf(parseTextValue(interval, '00:00:00')).toEqualTypeOf<Interval>();
    expectTypeOf(parseTextValue(hstore, '')).toEqualTypeOf<Hstore>();
    expectTypeOf(parseTextValue(arrayOf(timestamptz), '{}')).toEqualTypeOf<ArrayValue<bigint>>();
    expectTypeOf(parseTextValue({ kind: 'numeric', precision: 3, scale: 1 }, '1.0')).toEqualTypeOf<string>();
  });
});

describe('visiting values by kind', () => {
  // Every kind answers its name, but for the few whose typed values the test uses.
  const describeValue: ScalarVisitor<string> = {
    ...(Object.fromEntries(scalarKinds.map((kind) => [kind, () => kind])) as Record<
      ScalarKind,
      () => string
    >),
    int16: (value) => `int16 ${value + 1}`,
    int64: (value) => `int64 ${value + 1n}`,
    bytes: (value) => `bytes ${value.length}`,
    interval: (value) => `interval ${value.months}`,
    hstore: (value) => `hstore ${Object.keys(value).join(',')}`,
  };

  it('hands each value to the handler of its kind, typed', () => {
    expect(visitScalar(int16, parseTextValue(int16, '41'), describeValue)).toBe('int16 42');
    expect(visitScalar(int64, parseTextValue(int64, '9007199254740993'), describeValue)).toBe(
      'int64 9007199254740994',
    );
    expect(visitScalar(bytes, parseTextValue(bytes, '\\x0102'), describeValue)).toBe('bytes 2');
    expect(visitScalar(interval, parseTextValue(interval, '1 mon'), describeValue)).toBe('interval 1');
    expect(visitScalar(hstore, parseTextValue(hstore, '"a"=>"1"'), describeValue)).toBe('hstore a');
  });

  it('visits array elements in their nesting, NULLs kept', () => {
    expect(visitArray(int16, parseTextValue(arrayOf(int16), '{{1,NULL},{3,4}}'), describeValue)).toEqual([
      ['int16 2', null],
      ['int16 4', 'int16 5'],
    ]);
  });

  it('tells arrays and hstores from other values', () => {
    expect(isArrayValue(parseTextValue(arrayOf(int16), '{1}'))).toBe(true);
    expect(isArrayValue(parseTextValue(int16, '1'))).toBe(false);
    expect(isHstore(parseTextValue(hstore, '"a"=>NULL'))).toBe(true);
    expect(isHstore(parseTextValue(interval, '1 day'))).toBe(false);
    expect(isHstore(parseTextValue(bytes, '\\x00'))).toBe(false);
  });
});

describe('isVerbatimText', () => {
  it('names exactly the kinds whose parse returns any text unchanged', () => {
    // Text no type with a syntax of its own accepts.
    const odd = '\u0001 not {a} value "\\';
    const named = (kind: ScalarKind): ScalarColumnType =>
      (kind === 'enum' || kind === 'geometry' ? { kind, name: 't' } : { kind }) as ScalarColumnType;
    for (const kind of scalarKinds) {
      let unchanged = false;
      try {
        unchanged = parseTextValue(named(kind), odd) === odd;
      } catch (error) {
        expect(error).toBeInstanceOf(EngineError);
      }
      expect(isVerbatimText(kind), kind).toBe(unchanged);
    }
    expect(isVerbatimText('array')).toBe(false);
  });
});

// Parses PostgreSQL's text output of one non-NULL value into the typed value
// its ColumnType prescribes. The text is what COPY ... TO STDOUT (text format,
// after COPY's own backslash escaping is undone) and pgoutput text tuple data
// carry, produced by each type's output function under the session settings
// the source connector sets:
//
//   DateStyle=ISO, TimeZone=UTC, IntervalStyle=postgres,
//   extra_float_digits=3, bytea_output=hex
//
// Other settings produce other text and are rejected as malformed.
// SQL NULL never reaches this module (COPY's \N and pgoutput's 'n' are handled
// by their decoders); NULL array elements and hstore values do, as `null`.
//
// Value representation, by kind:
//
//   kind           JavaScript value   notes
//   -------------  -----------------  --------------------------------------------------
//   int16, int32   number
//   int64          bigint             also oid (unsigned 32-bit)
//   float32        number             'NaN', 'Infinity', '-Infinity' → NaN, ±Infinity;
//   float64        number             float32 is the double nearest the shortest decimal
//                                      text (Math.fround gives the exact float4)
//   numeric        string             PostgreSQL's text, full precision and display
//                                      scale ('1.50'); also 'NaN', 'Infinity', '-Infinity'
//   boolean        boolean            't' / 'f'
//   string         string             text, varchar, bpchar (padding kept), name, "char"
//   bytes          Buffer             from the '\x…' hex form
//   uuid           string             lower case
//   json           string             raw JSON text, unparsed, so big numbers stay exact
//   date           string             'YYYY-MM-DD'; BC dates in ISO 8601 astronomical
//                                      years ('0044-03-15 BC' → '-0043-03-15', 1 BC →
//                                      '0000'); years past 9999 have more digits;
//                                      'infinity' / '-infinity' kept as those strings
//   time           bigint             microseconds since midnight, 0 … 86 400 000 000
//                                      ('24:00:00' is a legal time)
//   timetz         string             PostgreSQL's text, e.g. '04:05:06.789+05:30'
//   timestamp      bigint             microseconds since 1970-01-01 00:00:00 (the wall
//                                      clock read as UTC); 'infinity' → timestampInfinity
//                                      (2^63-1), '-infinity' → timestampMinusInfinity
//                                      (-2^63); finite values after
//                                      294247-01-10 04:00:54.775806 do not fit int64
//                                      and are a decode error
//   timestamptz    bigint             as timestamp, the instant in UTC
//   interval       Interval           { months, days, microseconds: bigint }, the three
//                                      fields PostgreSQL stores; a PostgreSQL 17
//                                      'infinity' / '-infinity' interval is all fields
//                                      at their max / min, as PostgreSQL stores it
//   hstore         Hstore             null-prototype object, key → string | null
//   array          ArrayValue         nested arrays of element values, null for NULL;
//                                      a '[lb:ub]=' lower-bound decoration is dropped
//   inet, cidr, macaddr, money, bit, xml, geometry, enum, unknown_text
//                  string             PostgreSQL's text output unchanged
//
// Malformed text throws an EngineError of kind 'decode' naming the column type.
// Messages never contain the value: row data may be secret.

import { EngineError } from '../errors.ts';
import { type CivilDate, daysFromCivil } from './calendar.ts';
import {
  type ArrayColumnType,
  type ColumnType,
  describeColumnType,
  type ScalarColumnType,
  type ScalarKind,
} from './value-kind.ts';

/** An interval as PostgreSQL stores it: the three fields are independent and not normalised. */
export interface Interval {
  readonly months: number;
  readonly days: number;
  readonly microseconds: bigint;
}

/** hstore: keys map to a string or to NULL. The object has no prototype, so any key is safe. */
export type Hstore = Readonly<Record<string, string | null>>;

export interface ScalarValueByKind {
  int16: number;
  int32: number;
  int64: bigint;
  float32: number;
  float64: number;
  numeric: string;
  boolean: boolean;
  string: string;
  bytes: Buffer;
  uuid: string;
  json: string;
  date: string;
  time: bigint;
  timetz: string;
  timestamp: bigint;
  timestamptz: bigint;
  interval: Interval;
  inet: string;
  cidr: string;
  macaddr: string;
  hstore: Hstore;
  geometry: string;
  money: string;
  bit: string;
  xml: string;
  enum: string;
  unknown_text: string;
}

export type ScalarValue = ScalarValueByKind[ScalarKind];

/** An array value: elements, NULLs, or (for a multi-dimensional array) sub-arrays of equal shape. */
export type ArrayValue<E extends ScalarValue = ScalarValue> = ReadonlyArray<E | null | ArrayValue<E>>;

/** The value type parseTextValue returns for a column type. */
export type ValueOf<T extends ColumnType> = T extends ArrayColumnType
  ? ArrayValue<ScalarValueByKind[T['element']['kind']]>
  : T extends ScalarColumnType
    ? ScalarValueByKind[T['kind']]
    : never;

export type Value = ValueOf<ColumnType>;

/**
 * One handler per scalar kind, each taking the value type of its kind. Handing
 * a parsed value to `visitScalar` with such a table lets a consumer treat every
 * kind without casting the untagged `Value`.
 */
export type ScalarVisitor<R> = { readonly [K in ScalarKind]: (value: ScalarValueByKind[K]) => R };

/** What a visitor made of an array value, in the array's shape. */
export type VisitedArray<R> = ReadonlyArray<R | null | VisitedArray<R>>;

/**
 * Calls the visitor's handler for `type.kind` with `value`, which must be what
 * parseTextValue returned for `type` (or one element of an array of `type`).
 */
export function visitScalar<R>(type: ScalarColumnType, value: ScalarValue, visitor: ScalarVisitor<R>): R {
  // The one place the pairing of kind and value is asserted: parseTextValue makes it.
  return (visitor[type.kind] as (value: ScalarValue) => R)(value);
}

/** Visits every element of an array value parsed for `element`, keeping NULLs and the nesting. */
export function visitArray<R>(
  element: ScalarColumnType,
  value: ArrayValue,
  visitor: ScalarVisitor<R>,
): VisitedArray<R> {
  return value.map((item) => {
    if (item === null) return null;
    if (isArrayValue(item)) return visitArray(element, item, visitor);
    return visitScalar(element, item, visitor);
  });
}

/** Tells an array value (or sub-array) from a scalar value. */
export function isArrayValue(value: ScalarValue | ArrayValue): value is ArrayValue {
  return Array.isArray(value);
}

/** Tells an hstore value from the other scalar values. */
export function isHstore(value: ScalarValue | ArrayValue): value is Hstore {
  return (
    typeof value === 'object' &&
    !Array.isArray(value) &&
    !Buffer.isBuffer(value) &&
    Object.getPrototypeOf(value) === null
  );
}

/** timestamp and timestamptz 'infinity': int64 max. */
export const timestampInfinity = 2n ** 63n - 1n;
/** timestamp and timestamptz '-infinity': int64 min. */
export const timestampMinusInfinity = -(2n ** 63n);

const int32Max = 0x7fff_ffff;
const int32Min = -0x8000_0000;
const int64Max = 2n ** 63n - 1n;
const int64Min = -(2n ** 63n);

const microsPerSecond = 1_000_000n;
const microsPerDay = 86_400_000_000n;

/** Parses the text output of one non-NULL value of `type`. */
export function parseTextValue<T extends ColumnType>(type: T, text: string): ValueOf<T> {
  const value: Value =
    type.kind === 'array' ? parseArray(type, text) : parseScalar(type, text, describeColumnType(type));
  return value as ValueOf<T>;
}

function decodeError(subject: string, reason: string): EngineError {
  return new EngineError('decode', `cannot decode ${subject} text value: ${reason}`);
}

function parseScalar(type: ScalarColumnType, text: string, subject: string): ScalarValue {
  switch (type.kind) {
    case 'int16':
      return parseSmallInteger(text, -0x8000, 0x7fff, subject);
    case 'int32':
      return parseSmallInteger(text, int32Min, int32Max, subject);
    case 'int64':
      return parseInt64(text, subject);
    case 'float32':
    case 'float64':
      return parseFloatText(text, subject);
    case 'numeric':
      return parseNumeric(text, subject);
    case 'boolean':
      return parseBoolean(text, subject);
    case 'bytes':
      return parseBytes(text, subject);
    case 'uuid':
      return parseUuid(text, subject);
    case 'date':
      return parseDate(text, subject);
    case 'time':
      return parseTime(text, subject);
    case 'timetz':
      return checkTimetz(text, subject);
    case 'timestamp':
      return parseTimestamp(text, false, subject);
    case 'timestamptz':
      return parseTimestamp(text, true, subject);
    case 'interval':
      return parseInterval(text, subject);
    case 'hstore':
      return parseHstore(text, subject);
    case 'inet':
    case 'cidr':
      return checkPattern(text, inetPattern, 'not an address', subject);
    case 'macaddr':
      return checkPattern(text, macaddrPattern, 'not a MAC address', subject);
    case 'bit':
      return checkPattern(text, bitPattern, 'not a bit string', subject);
    case 'string':
    case 'json':
    case 'money':
    case 'xml':
    case 'geometry':
    case 'enum':
    case 'unknown_text':
      return text;
  }
}

/** The kinds whose value is their text output as it is, unchecked (see the table above). */
export type VerbatimTextKind = 'string' | 'json' | 'money' | 'xml' | 'geometry' | 'enum' | 'unknown_text';

const verbatimTextKinds: ReadonlySet<ScalarKind> = new Set<VerbatimTextKind>([
  'string',
  'json',
  'money',
  'xml',
  'geometry',
  'enum',
  'unknown_text',
]);

/** Whether a value of `kind` is its text output as it is: a consumer may skip the parse. */
export function isVerbatimText(kind: ColumnType['kind']): kind is VerbatimTextKind {
  return verbatimTextKinds.has(kind as ScalarKind);
}

function checkPattern(text: string, pattern: RegExp, reason: string, subject: string): string {
  if (!pattern.test(text)) throw decodeError(subject, reason);
  return text;
}

// inet/cidr output: IPv4 dotted quad or IPv6 (possibly with an embedded IPv4), optional /bits.
const inetPattern = /^[0-9a-fA-F:.]+(?:\/\d{1,3})?$/;
// macaddr is 6 octets, macaddr8 8, both as lower-case hex joined by ':'.
const macaddrPattern = /^[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}(?:(?::[0-9a-fA-F]{2}){2})?$/;
const bitPattern = /^[01]*$/;

const integerPattern = /^-?\d+$/;

function parseSmallInteger(text: string, min: number, max: number, subject: string): number {
  // Length first: a long digit string would not be exact as a double.
  if (!integerPattern.test(text) || text.length > 11) throw decodeError(subject, 'not an integer');
  const value = Number(text);
  if (value < min || value > max) throw decodeError(subject, 'out of range');
  return value;
}

function parseInt64(text: string, subject: string): bigint {
  if (!integerPattern.test(text) || text.length > 20) throw decodeError(subject, 'not an integer');
  const value = BigInt(text);
  if (value < int64Min || value > int64Max) throw decodeError(subject, 'out of range');
  return value;
}

// float4out/float8out: shortest exact decimal, exponent form such as '1.5e+300' or '1e-05'.
const floatPattern = /^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

function parseFloatText(text: string, subject: string): number {
  switch (text) {
    case 'NaN':
      return Number.NaN;
    case 'Infinity':
      return Number.POSITIVE_INFINITY;
    case '-Infinity':
      return Number.NEGATIVE_INFINITY;
  }
  if (!floatPattern.test(text)) throw decodeError(subject, 'not a floating-point number');
  return Number(text);
}

// numeric_out never uses an exponent.
const numericPattern = /^-?\d+(?:\.\d+)?$/;

function parseNumeric(text: string, subject: string): string {
  if (text === 'NaN' || text === 'Infinity' || text === '-Infinity') return text;
  if (!numericPattern.test(text)) throw decodeError(subject, 'not a decimal number');
  return text;
}

function parseBoolean(text: string, subject: string): boolean {
  if (text === 't') return true;
  if (text === 'f') return false;
  throw decodeError(subject, "not 't' or 'f'");
}

// https://www.postgresql.org/docs/current/datatype-binary.html#DATATYPE-BINARY-BYTEA-HEX-FORMAT
const byteaHexPattern = /^\\x(?:[0-9a-fA-F]{2})*$/;

function parseBytes(text: string, subject: string): Buffer {
  // Buffer.from silently stops at the first bad digit, so the form is checked first.
  if (!byteaHexPattern.test(text)) throw decodeError(subject, 'not in bytea hex format');
  return Buffer.from(text.slice(2), 'hex');
}

const uuidPattern = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

function parseUuid(text: string, subject: string): string {
  if (!uuidPattern.test(text)) throw decodeError(subject, 'not a UUID');
  return text.toLowerCase();
}

// --- dates and times --------------------------------------------------------
// https://www.postgresql.org/docs/current/datatype-datetime.html#DATATYPE-DATETIME-OUTPUT
// PostgreSQL uses the proleptic Gregorian calendar and writes BC years with a
// ' BC' suffix (1 BC is the year before 1 AD; there is no year 0).

const datePattern = /^(\d{4,})-(\d{2})-(\d{2})( BC)?$/;

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

const daysInMonth = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const;

function civilDate(yearText: string, monthText: string, dayText: string, bc: boolean, subject: string) {
  const written = Number(yearText);
  const month = Number(monthText);
  const day = Number(dayText);
  if (yearText.length > 7 || written === 0) throw decodeError(subject, 'year out of range');
  const year = bc ? 1 - written : written;
  const monthLength = month === 2 && isLeapYear(year) ? 29 : daysInMonth[month - 1];
  if (monthLength === undefined || day < 1 || day > monthLength) {
    throw decodeError(subject, 'not a valid date');
  }
  return { year, month, day } satisfies CivilDate;
}

function parseDate(text: string, subject: string): string {
  if (text === 'infinity' || text === '-infinity') return text;
  const match = datePattern.exec(text);
  if (match === null) throw decodeError(subject, 'not an ISO date');
  const [, yearText = '', monthText = '', dayText = '', bc] = match;
  const date = civilDate(yearText, monthText, dayText, bc !== undefined, subject);
  if (bc === undefined) return `${yearText}-${monthText}-${dayText}`;
  const yearDigits = String(Math.abs(date.year)).padStart(4, '0');
  return `${date.year < 0 ? '-' : ''}${yearDigits}-${monthText}-${dayText}`;
}

/** Microseconds from a fraction of 1–6 digits: '5' is 500000, '000001' is 1. */
function fractionMicros(fraction: string | undefined): bigint {
  return fraction === undefined ? 0n : BigInt(fraction.padEnd(6, '0'));
}

const timePattern = /^(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$/;

function parseTime(text: string, subject: string): bigint {
  const match = timePattern.exec(text);
  if (match === null) throw decodeError(subject, 'not an ISO time');
  const [, hourText = '', minuteText = '', secondText = '', fraction] = match;
  const micros = timeOfDayMicros(hourText, minuteText, secondText, fraction, subject);
  if (micros > microsPerDay) throw decodeError(subject, 'time out of range');
  return micros;
}

function timeOfDayMicros(
  hourText: string,
  minuteText: string,
  secondText: string,
  fraction: string | undefined,
  subject: string,
): bigint {
  const hour = Number(hourText);
  const minute = Number(minuteText);
  const second = Number(secondText);
  if (hour > 24 || minute > 59 || second > 59) throw decodeError(subject, 'time out of range');
  return BigInt(hour * 3600 + minute * 60 + second) * microsPerSecond + fractionMicros(fraction);
}

// A UTC offset as timetz_out and timestamptz_out write it: +HH, +HH:MM or +HH:MM:SS.
const offsetSource = '[+-]\\d{2}(?::\\d{2}){0,2}';
const timetzPattern = new RegExp(`^\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?${offsetSource}$`);

function checkTimetz(text: string, subject: string): string {
  if (!timetzPattern.test(text)) throw decodeError(subject, 'not an ISO time with time zone');
  return text;
}

const timestampPattern = new RegExp(
  `^(\\d{4,})-(\\d{2})-(\\d{2}) (\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d{1,6}))?(${offsetSource})?( BC)?$`,
);

function offsetSeconds(offset: string): number {
  const sign = offset.startsWith('-') ? -1 : 1;
  const [hours = 0, minutes = 0, seconds = 0] = offset.slice(1).split(':').map(Number);
  return sign * (hours * 3600 + minutes * 60 + seconds);
}

/** The value of two ASCII digits at `at`, or -1 when either is not a digit. */
function twoDigits(text: string, at: number): number {
  const tens = text.charCodeAt(at) - 48;
  const ones = text.charCodeAt(at + 1) - 48;
  return tens >= 0 && tens <= 9 && ones >= 0 && ones <= 9 ? tens * 10 + ones : -1;
}

/**
 * The shape nearly every timestamp has (`YYYY-MM-DD HH:MM:SS[.f…][±HH]`, a
 * year of four digits, AD), read by position: a snapshot or CDC run into a
 * typed destination parses one per row and column, and the pattern below cost
 * twice as much. Anything else, valid or not, returns undefined and goes
 * through the full parser, which also words the errors.
 */
function parseCommonTimestamp(text: string, withTimeZone: boolean): bigint | undefined {
  const length = text.length;
  if (length < 19 || text[4] !== '-' || text[7] !== '-' || text[10] !== ' ') return undefined;
  if (text[13] !== ':' || text[16] !== ':') return undefined;
  const century = twoDigits(text, 0);
  const yearInCentury = twoDigits(text, 2);
  const month = twoDigits(text, 5);
  const day = twoDigits(text, 8);
  const hour = twoDigits(text, 11);
  const minute = twoDigits(text, 14);
  const second = twoDigits(text, 17);
  if ((century | yearInCentury | month | day | hour | minute | second) < 0) return undefined;
  const year = century * 100 + yearInCentury;
  if (year === 0 || hour > 23 || minute > 59 || second > 59) return undefined;
  const monthLength = month === 2 && isLeapYear(year) ? 29 : daysInMonth[month - 1];
  if (monthLength === undefined || day < 1 || day > monthLength) return undefined;
  let at = 19;
  let micros = 0;
  if (text[at] === '.') {
    at++;
    let digits = 0;
    while (digits < 6 && at < length) {
      const digit = text.charCodeAt(at) - 48;
      if (digit < 0 || digit > 9) break;
      micros = micros * 10 + digit;
      digits++;
      at++;
    }
    if (digits === 0) return undefined;
    for (let scale = digits; scale < 6; scale++) micros *= 10;
  }
  let offset = 0;
  if (withTimeZone) {
    // timestamptz_out under TimeZone=UTC writes +00; other offsets take the full path.
    const sign = text[at];
    const hours = twoDigits(text, at + 1);
    if ((sign !== '+' && sign !== '-') || hours < 0 || at + 3 !== length) return undefined;
    offset = (sign === '-' ? -hours : hours) * 3600;
  } else if (at !== length) {
    return undefined;
  }
  const seconds = daysFromCivil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
  return BigInt(seconds) * microsPerSecond + BigInt(micros);
}

function parseTimestamp(text: string, withTimeZone: boolean, subject: string): bigint {
  const common = parseCommonTimestamp(text, withTimeZone);
  if (common !== undefined) return common;
  if (text === 'infinity') return timestampInfinity;
  if (text === '-infinity') return timestampMinusInfinity;
  const match = timestampPattern.exec(text);
  if (match === null) throw decodeError(subject, 'not an ISO timestamp');
  const [, yearText = '', monthText = '', dayText = '', hourText = '', minuteText = '', secondText = ''] =
    match;
  const [, , , , , , , fraction, offset, bc] = match;
  if ((offset !== undefined) !== withTimeZone) {
    throw decodeError(subject, withTimeZone ? 'no UTC offset' : 'unexpected UTC offset');
  }
  const date = civilDate(yearText, monthText, dayText, bc !== undefined, subject);
  const timeOfDay = timeOfDayMicros(hourText, minuteText, secondText, fraction, subject);
  if (timeOfDay >= microsPerDay) throw decodeError(subject, 'time out of range');
  const local = BigInt(daysFromCivil(date.year, date.month, date.day)) * microsPerDay + timeOfDay;
  const utc = offset === undefined ? local : local - BigInt(offsetSeconds(offset)) * microsPerSecond;
  // The sentinels must stay unambiguous: a finite value never equals them.
  if (utc >= timestampInfinity || utc <= timestampMinusInfinity) {
    throw decodeError(subject, 'beyond the int64 microsecond range');
  }
  return utc;
}

// --- interval ---------------------------------------------------------------
// IntervalStyle=postgres (EncodeInterval in src/backend/utils/adt/datetime.c):
// '[±N year[s]] [±N mon[s]] [±N day[s]] [±]HH:MM:SS[.ffffff]', the time part
// present when non-zero or when everything is zero ('00:00:00'); a '+' marks
// a positive field that follows a negative one ('-1 days +02:03:00').

const intervalUnits: Readonly<Record<string, 0 | 1 | 2>> = {
  year: 0,
  years: 0,
  mon: 1,
  mons: 1,
  day: 2,
  days: 2,
};
const intervalCountPattern = /^[+-]?\d{1,10}$/;
const intervalTimePattern = /^([+-])?(\d{2,10}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$/;

function parseInterval(text: string, subject: string): Interval {
  // PostgreSQL 17 infinite intervals: every field at its limit (INTERVAL_NOEND / NOBEGIN).
  if (text === 'infinity') return { months: int32Max, days: int32Max, microseconds: int64Max };
  if (text === '-infinity') return { months: int32Min, days: int32Min, microseconds: int64Min };
  const tokens = text.split(' ');
  const counts = [0, 0, 0];
  let microseconds = 0n;
  let nextUnit = 0;
  let index = 0;
  while (index < tokens.length) {
    const token = tokens[index] ?? '';
    const time = intervalTimePattern.exec(token);
    if (time !== null) {
      if (index !== tokens.length - 1) throw decodeError(subject, 'time part is not last');
      const [, sign, hourText = '', minuteText = '', secondText = '', fraction] = time;
      if (Number(minuteText) > 59 || Number(secondText) > 59) throw decodeError(subject, 'time out of range');
      const magnitude =
        (BigInt(hourText) * 3600n + BigInt(Number(minuteText) * 60 + Number(secondText))) * microsPerSecond +
        fractionMicros(fraction);
      microseconds = sign === '-' ? -magnitude : magnitude;
      index += 1;
      continue;
    }
    const unit = intervalUnits[tokens[index + 1] ?? ''];
    if (!intervalCountPattern.test(token) || unit === undefined || unit < nextUnit) {
      throw decodeError(subject, 'not an interval in IntervalStyle postgres');
    }
    counts[unit] = Number(token);
    nextUnit = unit + 1;
    index += 2;
  }
  const [years = 0, mons = 0, days = 0] = counts;
  const months = years * 12 + mons;
  if (months < int32Min || months > int32Max || days < int32Min || days > int32Max) {
    throw decodeError(subject, 'out of range');
  }
  if (microseconds < int64Min || microseconds > int64Max) throw decodeError(subject, 'out of range');
  return { months, days, microseconds };
}

// --- hstore -----------------------------------------------------------------
// hstore_out writes '"key"=>"value", "key"=>NULL', every key and value quoted
// with '"' and '\' backslash-escaped. The parser also takes hstore_in's other
// forms (unquoted words, any whitespace) and, like hstore_in, keeps the first
// of duplicate keys. https://www.postgresql.org/docs/current/hstore.html

function isWhitespace(char: string | undefined): boolean {
  return char === ' ' || char === '\t' || char === '\n' || char === '\r' || char === '\v' || char === '\f';
}

class HstoreReader {
  private position = 0;
  readonly text: string;
  readonly subject: string;

  constructor(text: string, subject: string) {
    this.text = text;
    this.subject = subject;
  }

  atEnd(): boolean {
    return this.position >= this.text.length;
  }

  skipWhitespace(): void {
    while (isWhitespace(this.text[this.position])) this.position += 1;
  }

  expect(literal: string): void {
    if (!this.text.startsWith(literal, this.position)) {
      throw decodeError(this.subject, `expected '${literal}'`);
    }
    this.position += literal.length;
  }

  /** A quoted or unquoted token; `quoted` tells the value NULL from the string "NULL". */
  token(stops: string): { readonly text: string; readonly quoted: boolean } {
    const quoted = this.text[this.position] === '"';
    if (quoted) this.position += 1;
    let token = '';
    for (;;) {
      const char = this.text[this.position];
      if (char === undefined) {
        if (quoted) throw decodeError(this.subject, 'unterminated quoted string');
        break;
      }
      if (quoted ? char === '"' : isWhitespace(char) || stops.includes(char)) break;
      if (char === '\\') {
        const escaped = this.text[this.position + 1];
        if (escaped === undefined) throw decodeError(this.subject, 'backslash at end of input');
        token += escaped;
        this.position += 2;
        continue;
      }
      token += char;
      this.position += 1;
    }
    if (quoted) this.position += 1;
    else if (token === '') throw decodeError(this.subject, 'empty unquoted key or value');
    return { text: token, quoted };
  }
}

function parseHstore(text: string, subject: string): Hstore {
  const hstore: Record<string, string | null> = Object.create(null);
  const reader = new HstoreReader(text, subject);
  reader.skipWhitespace();
  while (!reader.atEnd()) {
    const key = reader.token('=,');
    reader.skipWhitespace();
    reader.expect('=>');
    reader.skipWhitespace();
    const value = reader.token(',');
    if (!Object.hasOwn(hstore, key.text)) {
      hstore[key.text] = !value.quoted && value.text.toUpperCase() === 'NULL' ? null : value.text;
    }
    reader.skipWhitespace();
    if (reader.atEnd()) break;
    reader.expect(',');
    reader.skipWhitespace();
    if (reader.atEnd()) throw decodeError(subject, 'trailing comma');
  }
  return hstore;
}

// --- arrays -----------------------------------------------------------------
// array_out writes '{e1,e2}' ('{{1,2},{3,4}}' for more dimensions), prefixed
// with '[lb:ub]=' per dimension when a lower bound is not 1. It double-quotes
// an element that is empty, equals NULL, or contains '{', '}', ',', '"', '\'
// or whitespace, backslash-escaping '"' and '\' inside the quotes; an unquoted
// NULL is SQL NULL. https://www.postgresql.org/docs/current/arrays.html#ARRAYS-IO

type RawArray = Array<string | null | RawArray>;

const dimensionsPattern = /^(?:\[[+-]?\d+:[+-]?\d+\])+=/;

/**
 * PostgreSQL's MAXDIM: array_out never writes more. Deeper nesting is refused
 * before it is read: each level is a recursive call, and a text of many
 * thousand '{' overflowed the stack (a RangeError, not a decode error).
 */
const maxDimensions = 6;

class ArrayReader {
  private position: number;
  readonly text: string;
  readonly subject: string;

  constructor(text: string, subject: string) {
    this.text = text;
    this.subject = subject;
    this.position = dimensionsPattern.exec(text)?.[0].length ?? 0;
  }

  fail(reason: string): EngineError {
    return decodeError(this.subject, reason);
  }

  skipWhitespace(): void {
    while (isWhitespace(this.text[this.position])) this.position += 1;
  }

  /** The whole literal: one brace-enclosed array and nothing after it. */
  readAll(): RawArray {
    this.skipWhitespace();
    const array = this.readArray(1);
    this.skipWhitespace();
    if (this.position !== this.text.length) throw this.fail('text after the closing brace');
    return array;
  }

  /** The array whose '{' is at the position, `depth` levels deep (1 for the outermost). */
  private readArray(depth: number): RawArray {
    if (this.text[this.position] !== '{') throw this.fail("expected '{'");
    if (depth > maxDimensions) throw this.fail(`more than ${maxDimensions} dimensions`);
    this.position += 1;
    const items: RawArray = [];
    this.skipWhitespace();
    if (this.text[this.position] === '}') {
      this.position += 1;
      return items;
    }
    for (;;) {
      this.skipWhitespace();
      items.push(this.text[this.position] === '{' ? this.readArray(depth + 1) : this.readElement());
      this.skipWhitespace();
      const separator = this.text[this.position];
      this.position += 1;
      if (separator === '}') return items;
      if (separator !== ',') throw this.fail("expected ',' or '}'");
    }
  }

  private readElement(): string | null {
    if (this.text[this.position] === '"') return this.readQuoted();
    let element = '';
    // Whitespace after an unquoted element is not part of it, unless escaped.
    let keptLength = 0;
    let escaped = false;
    for (;;) {
      const char = this.text[this.position];
      if (char === undefined) throw this.fail('unterminated array');
      if (char === ',' || char === '}') break;
      if (char === '{' || char === '"') throw this.fail('unexpected character in an unquoted element');
      this.position += 1;
      if (char === '\\') {
        const next = this.text[this.position];
        if (next === undefined) throw this.fail('backslash at end of input');
        element += next;
        this.position += 1;
        escaped = true;
        keptLength = element.length;
        continue;
      }
      element += char;
      if (!isWhitespace(char)) keptLength = element.length;
    }
    element = element.slice(0, keptLength);
    if (element === '') throw this.fail('empty unquoted element');
    return !escaped && element.toUpperCase() === 'NULL' ? null : element;
  }

  private readQuoted(): string {
    this.position += 1;
    let element = '';
    for (;;) {
      const char = this.text[this.position];
      if (char === undefined) throw this.fail('unterminated quoted element');
      this.position += 1;
      if (char === '"') return element;
      if (char === '\\') {
        const next = this.text[this.position];
        if (next === undefined) throw this.fail('backslash at end of input');
        element += next;
        this.position += 1;
        continue;
      }
      element += char;
    }
  }
}

/** The shape of a raw array, or undefined when it is not rectangular. */
function arrayShape(array: RawArray): readonly number[] | undefined {
  const first = array[0];
  if (first === undefined || !Array.isArray(first)) {
    return array.some((item) => Array.isArray(item)) ? undefined : [array.length];
  }
  const inner = arrayShape(first);
  if (inner === undefined) return undefined;
  for (const item of array) {
    if (!Array.isArray(item)) return undefined;
    const shape = arrayShape(item);
    if (
      shape === undefined ||
      shape.length !== inner.length ||
      shape.some((size, at) => size !== inner[at])
    ) {
      return undefined;
    }
  }
  return [array.length, ...inner];
}

function parseArray(type: ArrayColumnType, text: string): ArrayValue {
  const subject = describeColumnType(type);
  const raw = new ArrayReader(text, subject).readAll();
  if (arrayShape(raw) === undefined) throw decodeError(subject, 'sub-arrays of different shapes');
  const elementSubject = `${subject} element`;
  const convert = (items: RawArray): ArrayValue =>
    items.map((item) => {
      if (item === null) return null;
      if (typeof item === 'string') return parseScalar(type.element, item, elementSubject);
      return convert(item);
    });
  return convert(raw);
}

// What the Kafka destination knows of a table's default message (docs/kafka.md),
// and the one rendering of a typed value for it: the JSON of a value the
// message encoder (message-json.ts) cannot copy from its text as it is
// (cellJson), and the value a script's record document holds (renderText,
// script-records.ts). cellJson is JSON.stringify of renderText, so the message
// and the document agree (unit test).
//
// Values are parsed with the typed value model (model/parse-text.ts) and
// written so that nothing is lost in JSON: 64-bit integers and numerics as
// strings, bytes as base64, timestamps as ISO 8601 with microseconds, NaN and
// infinities as strings.

import { EngineError } from '../../errors.ts';
import { civilFromDays, formatCivilDate } from '../../model/calendar.ts';
import { formatLsn } from '../../model/lsn.ts';
import {
  isVerbatimText,
  parseTextValue,
  type ScalarVisitor,
  timestampInfinity,
  timestampMinusInfinity,
  visitArray,
  visitScalar,
} from '../../model/parse-text.ts';
import { pgColumnType } from '../../model/pg-type-map.ts';
import type { ColumnType } from '../../model/value-kind.ts';
import { type DestinationTable, keyIndexes, type SourceTransaction, type TupleCell } from '../records.ts';
import { defaultTopicName } from './topics.ts';

export type Rendered =
  | null
  | boolean
  | number
  | string
  | readonly Rendered[]
  | { readonly [key: string]: Rendered };

/** A row image as the document holds it: its columns' rendered values by name. */
export type RenderedRow = { readonly [column: string]: Rendered };

export type RecordKind = 'snapshot' | 'insert' | 'update' | 'delete' | 'truncate';

/** The default message value, as an object (a script reads it; message-json.ts writes it as JSON). */
export interface RecordDocument {
  readonly kind: RecordKind;
  readonly source: { readonly schema: string; readonly table: string };
  /** The default topic: the mapping's destination (see topics.ts). */
  readonly target: string;
  /** Commit LSN of the source transaction, `X/Y`; null for snapshot rows. */
  readonly lsn: string | null;
  /** Commit time, ISO 8601 UTC with microseconds; null for snapshot rows. */
  readonly commit_time: string | null;
  readonly xid: number | null;
  readonly old: RenderedRow | null;
  readonly new: RenderedRow | null;
  /** Columns of `new` whose TOASTed value did not change and was not sent. */
  readonly unchanged_columns: readonly string[];
}

/** What the destination needs about a table, computed once per DestinationTable. */
export interface TableFormat {
  readonly table: DestinationTable;
  /** The document's `source`: one object for every record of the table. */
  readonly source: RecordDocument['source'];
  readonly topic: string;
  readonly types: readonly ColumnType[];
  readonly keyIndexes: readonly number[];
  /** Per column: whether it is a key column. */
  readonly isKey: readonly boolean[];
  /** Per column: whether its value is its text (isVerbatimText), written as a JSON string as it is. */
  readonly isVerbatim: readonly boolean[];
  /** Per column: its name as a JSON object member's start, `"name":`. */
  readonly memberNames: readonly string[];
  /** The document's members after `kind`: `,"source":{…},"target":"…",`. */
  readonly tableJson: string;
}

const formats = new WeakMap<DestinationTable, TableFormat>();

export function tableFormat(table: DestinationTable): TableFormat {
  let format = formats.get(table);
  if (!format) {
    const source = { schema: table.source.schema, table: table.source.table };
    const topic = defaultTopicName(table.destination);
    const indexes = keyIndexes(table);
    // No catalog here: enums, domains and extension types become unknown_text (their text).
    const types = table.columns.map((column) => pgColumnType(column.typeOid, column.typeModifier));
    format = {
      table,
      source,
      topic,
      types,
      keyIndexes: indexes,
      isKey: table.columns.map((_, index) => indexes.includes(index)),
      isVerbatim: types.map((type) => isVerbatimText(type.kind)),
      memberNames: table.columns.map((column) => `${JSON.stringify(column.name)}:`),
      tableJson: `,"source":${JSON.stringify(source)},"target":${JSON.stringify(topic)},`,
    };
    formats.set(table, format);
  }
  return format;
}

/**
 * An old image holds only the key columns unless the source sent the whole
 * row (REPLICA IDENTITY FULL): pgoutput sends non-key columns of a key-only
 * image as nulls, so an old image whose non-key columns are all null (`isNull`
 * of a column's position) is written with its key columns only.
 */
export function isKeyOnly(format: TableFormat, isNull: (index: number) => boolean): boolean {
  if (format.keyIndexes.length === 0) return false;
  for (let index = 0; index < format.isKey.length; index++) {
    if (!format.isKey[index] && !isNull(index)) return false;
  }
  return true;
}

/** The members of a snapshot row's document where a change has its transaction's. */
export const snapshotFieldsJson = '"lsn":null,"commit_time":null,"xid":null';

/**
 * The last transaction's LSN and commit time as the document writes them:
 * every change of a transaction shares them, so they are rendered once per
 * transaction rather than for each of its changes.
 */
let renderedTransaction:
  | { transaction: SourceTransaction; lsn: string; commitTime: string; json: string }
  | undefined;

/** A transaction's `lsn` and `commit_time` as rendered, and its three members as JSON. */
export function transactionFields(transaction: SourceTransaction): {
  lsn: string;
  commitTime: string;
  json: string;
} {
  if (renderedTransaction?.transaction !== transaction) {
    const lsn = formatLsn(transaction.commitLsn);
    const commitTime = isoTimestamp(transaction.commitTimeMicros, 'Z');
    renderedTransaction = {
      transaction,
      lsn,
      commitTime,
      json: `"lsn":${JSON.stringify(lsn)},"commit_time":${JSON.stringify(commitTime)},"xid":${JSON.stringify(transaction.xid)}`,
    };
  }
  return renderedTransaction;
}

/**
 * One non-NULL cell's rendering as JSON text: JSON.stringify(renderText(…)),
 * the text of a verbatim kind as a JSON string. A binary cell has none.
 */
export function cellJson(format: TableFormat, index: number, cell: Exclude<TupleCell, null>): string {
  if (typeof cell !== 'string') throw binaryValue(format);
  if (format.isVerbatim[index]) return stringJson(cell);
  return JSON.stringify(renderCell(format, index, cell));
}

/** The rendering of column `index`'s text: what the document holds for it. */
export function renderCell(format: TableFormat, index: number, text: string): Rendered {
  return renderText(format.types[index] ?? textType, text);
}

// Characters JSON.stringify escapes in a string: the quote, the backslash,
// controls, and UTF-16 surrogates (a lone one is written as \uXXXX).
// biome-ignore lint/suspicious/noControlCharactersInRegex: the controls are what JSON escapes
const escapedInJson = /["\\\u0000-\u001f\ud800-\udfff]/;

function stringJson(text: string): string {
  return escapedInJson.test(text) ? JSON.stringify(text) : `"${text}"`;
}

export function binaryValue(format: TableFormat): EngineError {
  return new EngineError(
    'decode',
    `binary tuple value in ${format.table.source.schema}.${format.table.source.table}; text format expected`,
  );
}

const textType: ColumnType = { kind: 'unknown_text' };

// The usual shape of a timestamp's text output under the engine's session
// settings (DateStyle=ISO, TimeZone=UTC): rewritten to ISO 8601 as text, the
// same result the parse below gives, at a fraction of its cost.
const plainTimestamp = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(\.\d*[1-9])?0*(\+00)?$/;

/** A usual timestamp's text rewritten to ISO 8601; undefined for any other shape. */
function usualTimestamp(kind: 'timestamp' | 'timestamptz', text: string): string | undefined {
  const match = plainTimestamp.exec(text);
  if (match && (match[4] !== undefined) === (kind === 'timestamptz')) {
    return `${match[1]}T${match[2]}${match[3] ?? ''}${match[4] ? 'Z' : ''}`;
  }
  return undefined;
}

/** PostgreSQL's text output of one value, rendered for JSON. */
export function renderText(type: ColumnType, text: string): Rendered {
  if (type.kind === 'timestamptz' || type.kind === 'timestamp') {
    const rendered = usualTimestamp(type.kind, text);
    if (rendered !== undefined) return rendered;
  }
  // PostgreSQL prints a bigint canonically, and JSON carries it as a string: its text is its rendering.
  if (type.kind === 'int64') return text;
  if (type.kind === 'array') return visitArray(type.element, parseTextValue(type, text), renderers);
  return visitScalar(type, parseTextValue(type, text), renderers);
}

const same = <T extends Rendered>(value: T): T => value;

function renderFloat(number: number): Rendered {
  if (Number.isFinite(number)) return number;
  return Number.isNaN(number) ? 'NaN' : number > 0 ? 'Infinity' : '-Infinity';
}

/** How each kind's value is written in JSON (docs/kafka.md, "Values"). */
const renderers: ScalarVisitor<Rendered> = {
  int16: same,
  int32: same,
  int64: (value) => value.toString(),
  float32: renderFloat,
  float64: renderFloat,
  numeric: same,
  boolean: same,
  string: same,
  bytes: (value) => value.toString('base64'),
  uuid: same,
  json: same,
  date: same,
  time: (value) => timeOfDay(value),
  timetz: same,
  timestamp: (value) => isoTimestamp(value, ''),
  timestamptz: (value) => isoTimestamp(value, 'Z'),
  interval: (value) => ({
    months: value.months,
    days: value.days,
    microseconds: value.microseconds.toString(),
  }),
  inet: same,
  cidr: same,
  macaddr: same,
  hstore: (value) => ({ ...value }),
  geometry: same,
  money: same,
  bit: same,
  xml: same,
  enum: same,
  unknown_text: same,
};

const microsPerDay = 86_400_000_000n;

/** `HH:MM:SS` with the fraction PostgreSQL would print (trailing zeros dropped). */
function timeOfDay(micros: bigint): string {
  const seconds = Number(micros / 1_000_000n);
  const fraction = Number(micros % 1_000_000n);
  const clock = [Math.floor(seconds / 3600), Math.floor(seconds / 60) % 60, seconds % 60]
    .map((part) => String(part).padStart(2, '0'))
    .join(':');
  return fraction === 0 ? clock : `${clock}.${String(fraction).padStart(6, '0').replace(/0+$/, '')}`;
}

/**
 * Microseconds since the epoch as ISO 8601 (`Z` for timestamptz, nothing for
 * timestamp). Years before 1 are astronomical (1 BC is 0000, 44 BC is -0043)
 * and years past 9999 have more digits, as the model writes dates.
 */
export function isoTimestamp(micros: bigint, zone: 'Z' | ''): string {
  if (micros === timestampInfinity) return 'infinity';
  if (micros === timestampMinusInfinity) return '-infinity';
  let days = micros / microsPerDay;
  let rest = micros % microsPerDay;
  if (rest < 0n) {
    rest += microsPerDay;
    days -= 1n;
  }
  return `${formatCivilDate(civilFromDays(Number(days)))}T${timeOfDay(rest)}${zone}`;
}

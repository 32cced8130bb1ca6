// The default Kafka message of a change, and the record a script sees: one
// rendering of typed values shared by both (docs/kafka.md documents it).
//
// Values are parsed with the typed value model (model/parse-text.ts) and
// written so that nothing is lost in JSON: 64-bit integers and numerics as
// strings, bytes as base64, timestamps as ISO 8601 with microseconds, NaN and
// infinities as strings.
//
// The default message is written as JSON text straight from the row's cells
// (`ChangeRecord.json`): member names and per-transaction fields are rendered
// once, and the cells whose text already is their JSON (integers, numerics,
// text kinds, usual timestamps) skip the parse. The document object, which a
// script reads, is built only when it is read. Both give the same JSON (unit
// test), except that the text keeps the table's column order where an object
// would put names that read as array indexes ("10") first.

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
import {
  type DestinationTable,
  isUnchangedToast,
  keyIndexes,
  type RowChange,
  type RowImage,
  type SourceTransaction,
  type TupleCell,
} from '../records.ts';
import { defaultTopicName } from './topics.ts';

export type Rendered =
  | null
  | boolean
  | number
  | string
  | readonly Rendered[]
  | { readonly [key: string]: Rendered };

export type Row = { readonly [column: string]: Rendered };

export type RecordKind = 'snapshot' | 'insert' | 'update' | 'delete' | 'truncate';

/** The kinds whose message is a new row alone (`"old":null`), as row-json.ts writes them. */
export type NewRowKind = 'snapshot' | 'insert' | 'update';

/** The default message value, as JSON. */
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
  readonly old: Row | null;
  readonly new: Row | null;
  /** Columns of `new` whose TOASTed value did not change and was not sent. */
  readonly unchanged_columns: readonly string[];
}

/** What one change becomes before a script or the default format decides its message. */
export interface ChangeRecord {
  readonly kind: RecordKind;
  /** The default message value: JSON.stringify(document), written without building the document. */
  readonly json: string;
  /** The default message value as an object, built when first read (by a script). */
  readonly document: RecordDocument;
  /** The row's key columns as a JSON object in key order; null when the table has no key or for a truncate. */
  readonly key: string | null;
  /** Commit LSN as a number, for scripts' `checkpoint`. */
  readonly commitLsn: bigint | null;
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

export function snapshotRecord(format: TableFormat, row: readonly (string | null)[]): ChangeRecord {
  return new RenderedRecord(format, 'snapshot', undefined, null, row);
}

export function changeRecord(format: TableFormat, change: RowChange): ChangeRecord {
  const { transaction } = change;
  switch (change.kind) {
    case 'insert':
      return new RenderedRecord(format, 'insert', transaction, null, change.newRow.cells());
    case 'update':
      return new RenderedRecord(
        format,
        'update',
        transaction,
        change.oldKey?.cells() ?? null,
        change.newRow.cells(),
      );
    case 'delete':
      return new RenderedRecord(format, 'delete', transaction, change.oldKey.cells(), null);
    case 'truncate':
      return new RenderedRecord(format, 'truncate', transaction, null, null);
  }
}

/**
 * A change and the images it carries: the JSON of its default message and
 * its key are written from the cells; the document is rendered on first read.
 */
class RenderedRecord implements ChangeRecord {
  readonly kind: RecordKind;
  readonly key: string | null;
  readonly commitLsn: bigint | null;
  readonly #format: TableFormat;
  readonly #transaction: SourceTransaction | undefined;
  readonly #before: RowImage | null;
  readonly #after: RowImage | null;
  #json: string | undefined;
  #document: RecordDocument | undefined;

  constructor(
    format: TableFormat,
    kind: RecordKind,
    transaction: SourceTransaction | undefined,
    before: RowImage | null,
    after: RowImage | null,
  ) {
    this.kind = kind;
    this.commitLsn = transaction ? transaction.commitLsn : null;
    this.#format = format;
    this.#transaction = transaction;
    this.#before = before;
    this.#after = after;
    this.key = kind === 'truncate' ? null : keyJson(format, after ?? before, after ? before : null);
  }

  get json(): string {
    this.#json ??= this.#writeJson();
    return this.#json;
  }

  get document(): RecordDocument {
    this.#document ??= this.#renderDocument();
    return this.#document;
  }

  #writeJson(): string {
    const format = this.#format;
    const before = this.#before;
    const after = this.#after;
    const transactionJson = this.#transaction
      ? transactionFields(this.#transaction).json
      : snapshotFieldsJson;
    const old = before ? imageJson(format, before, isKeyOnly(format, before)) : 'null';
    if (!after) {
      return `{"kind":"${this.kind}"${format.tableJson}${transactionJson},"old":${old},"new":null,"unchanged_columns":[]}`;
    }
    const unchanged: string[] = [];
    const json = imageJson(format, after, false, unchanged);
    const unchangedJson = unchanged.length === 0 ? '[]' : JSON.stringify(unchanged);
    return `{"kind":"${this.kind}"${format.tableJson}${transactionJson},"old":${old},"new":${json},"unchanged_columns":${unchangedJson}}`;
  }

  #renderDocument(): RecordDocument {
    const format = this.#format;
    const transaction = this.#transaction;
    const rendered = transaction ? transactionFields(transaction) : undefined;
    const before = this.#before ? renderRow(format, this.#before, 'old').row : null;
    const after = this.#after ? renderRow(format, this.#after, 'full') : undefined;
    return {
      kind: this.kind,
      source: format.source,
      target: format.topic,
      lsn: rendered ? rendered.lsn : null,
      commit_time: rendered ? rendered.commitTime : null,
      xid: transaction ? transaction.xid : null,
      old: before,
      new: after ? after.row : null,
      unchanged_columns: after ? after.unchanged : [],
    };
  }
}

const snapshotFieldsJson = '"lsn":null,"commit_time":null,"xid":null';

/**
 * A new row's value JSON (an insert's, an update's without an old key, or a
 * snapshot row's without a transaction) up to the members of its row
 * (`"new":{`): what row-json.ts writes before the row's values, the same text
 * #writeJson writes.
 */
export function newRowValueHead(
  format: TableFormat,
  kind: NewRowKind,
  transaction: SourceTransaction | null,
): string {
  const transactionJson = transaction ? transactionFields(transaction).json : snapshotFieldsJson;
  return `{"kind":"${kind}"${format.tableJson}${transactionJson},"old":null,"new":{`;
}

/**
 * The last transaction's LSN and commit time as the document writes them:
 * every change of a transaction shares them, so they are rendered once per
 * transaction rather than for each of its changes.
 */
let renderedTransaction:
  | { transaction: SourceTransaction; lsn: string; commitTime: string; json: string }
  | undefined;

function transactionFields(transaction: SourceTransaction): {
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
 * The key columns as a JSON object, in key order. A key column missing from
 * `image` (an unchanged TOASTed key, or NULL) is taken from `fallback`, the
 * change's old image.
 */
function keyJson(format: TableFormat, image: RowImage | null, fallback: RowImage | null): string | null {
  if (format.keyIndexes.length === 0 || !image) return null;
  let json = '{';
  for (let position = 0; position < format.keyIndexes.length; position++) {
    const index = format.keyIndexes[position] as number;
    let cell = image[index] ?? null;
    if ((cell === null || isUnchangedToast(cell)) && fallback) cell = fallback[index] ?? null;
    const value = cell === null || isUnchangedToast(cell) ? 'null' : cellJson(format, index, cell);
    json += `${position === 0 ? '' : ','}${JSON.stringify(format.table.keyColumns[position])}:${value}`;
  }
  return `${json}}`;
}

/**
 * An old image holds only the key columns unless the source sent the whole
 * row (REPLICA IDENTITY FULL): pgoutput sends non-key columns of a key-only
 * image as nulls, so an old image whose non-key columns are all null is
 * written with its key columns only.
 */
function isKeyOnly(format: TableFormat, image: RowImage): boolean {
  if (format.keyIndexes.length === 0) return false;
  for (let index = 0; index < image.length; index++) {
    if (!format.isKey[index] && image[index] !== null) return false;
  }
  return true;
}

/**
 * A row image as a JSON object in column order: with `keyOnly`, only the key
 * columns; unchanged TOASTed columns are left out and named in `unchanged`.
 */
function imageJson(format: TableFormat, image: RowImage, keyOnly: boolean, unchanged?: string[]): string {
  const { columns } = format.table;
  let json = '{';
  let first = true;
  for (let index = 0; index < columns.length; index++) {
    if (keyOnly && !format.isKey[index]) continue;
    const cell = image[index] ?? null;
    let value: string;
    if (cell === null) value = 'null';
    else if (isUnchangedToast(cell)) {
      unchanged?.push((columns[index] as DestinationTable['columns'][number]).name);
      continue;
    } else value = cellJson(format, index, cell);
    json += first ? `${format.memberNames[index]}${value}` : `,${format.memberNames[index]}${value}`;
    first = false;
  }
  return `${json}}`;
}

// PostgreSQL's canonical output of int2 and int4: the JSON number as it is.
const integerText = /^(?:0|-?[1-9]\d{0,9})$/;
const integerRange = { int16: 0x7fff, int32: 0x7fff_ffff } as const;

/** One non-NULL cell's rendering as JSON text: what JSON.stringify(renderText(…)) gives. */
export function cellJson(format: TableFormat, index: number, cell: Exclude<TupleCell, null>): string {
  if (typeof cell !== 'string') throw binaryValue(format);
  if (format.isVerbatim[index]) return stringJson(cell);
  const type = format.types[index] ?? textType;
  const { kind } = type;
  switch (kind) {
    case 'int16':
    case 'int32': {
      // Out-of-range or malformed text goes through the parse, which names the problem.
      const limit = integerRange[kind];
      if (integerText.test(cell) && Math.abs(Number(cell)) <= limit + (cell.startsWith('-') ? 1 : 0))
        return cell;
      break;
    }
    case 'int64':
      // Its text is its rendering (renderText), and JSON carries it as a string.
      return stringJson(cell);
    case 'numeric':
      return stringJson(renderText(type, cell) as string);
    case 'timestamp':
    case 'timestamptz': {
      const rendered = usualTimestamp(kind, cell);
      if (rendered !== undefined) return `"${rendered}"`;
      break;
    }
  }
  return JSON.stringify(renderText(type, cell));
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

/** Renders a row image for the document (`which` as in isKeyOnly). */
function renderRow(
  format: TableFormat,
  image: RowImage,
  which: 'full' | 'old',
): { row: Row; unchanged: string[] } {
  const { columns } = format.table;
  const keyOnly = which === 'old' && isKeyOnly(format, image);
  const row: Record<string, Rendered> = {};
  const unchanged: string[] = [];
  for (let index = 0; index < columns.length; index++) {
    const column = columns[index];
    if (!column) continue;
    if (keyOnly && !format.isKey[index]) continue;
    const cell = image[index] ?? null;
    if (cell === null) row[column.name] = null;
    else if (isUnchangedToast(cell)) unchanged.push(column.name);
    else if (typeof cell === 'string') row[column.name] = renderText(format.types[index] ?? textType, cell);
    else throw binaryValue(format);
  }
  return { row, unchanged };
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

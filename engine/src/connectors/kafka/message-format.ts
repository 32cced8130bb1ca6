// The default Kafka message of a change, and the record a script sees: one
// rendering of typed values shared by both (docs/kafka.md documents it).
//
// Values are parsed with the typed value model (model/parse-text.ts) and
// written so that nothing is lost in JSON: 64-bit integers and numerics as
// strings, bytes as base64, timestamps as ISO 8601 with microseconds, NaN and
// infinities as strings.

import { EngineError } from '../../errors.ts';
import { civilFromDays, formatCivilDate } from '../../model/calendar.ts';
import { formatLsn } from '../../model/lsn.ts';
import {
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
}

const formats = new WeakMap<DestinationTable, TableFormat>();

export function tableFormat(table: DestinationTable): TableFormat {
  let format = formats.get(table);
  if (!format) {
    format = {
      table,
      source: { schema: table.source.schema, table: table.source.table },
      topic: defaultTopicName(table.destination),
      // No catalog here: enums, domains and extension types become unknown_text (their text).
      types: table.columns.map((column) => pgColumnType(column.typeOid, column.typeModifier)),
      keyIndexes: keyIndexes(table),
    };
    formats.set(table, format);
  }
  return format;
}

export function snapshotRecord(format: TableFormat, row: readonly (string | null)[]): ChangeRecord {
  const rendered = renderRow(format, row, 'full');
  return {
    document: document(format, 'snapshot', undefined, null, rendered.row, []),
    key: keyOf(format, rendered.row, null),
    commitLsn: null,
  };
}

export function changeRecord(format: TableFormat, change: RowChange): ChangeRecord {
  const { transaction } = change;
  switch (change.kind) {
    case 'insert': {
      const after = renderRow(format, change.newRow, 'full');
      return {
        document: document(format, 'insert', transaction, null, after.row, after.unchanged),
        key: keyOf(format, after.row, null),
        commitLsn: transaction.commitLsn,
      };
    }
    case 'update': {
      const before = change.oldKey ? renderRow(format, change.oldKey, 'old').row : null;
      const after = renderRow(format, change.newRow, 'full');
      return {
        document: document(format, 'update', transaction, before, after.row, after.unchanged),
        key: keyOf(format, after.row, before),
        commitLsn: transaction.commitLsn,
      };
    }
    case 'delete': {
      const before = renderRow(format, change.oldKey, 'old').row;
      return {
        document: document(format, 'delete', transaction, before, null, []),
        key: keyOf(format, before, null),
        commitLsn: transaction.commitLsn,
      };
    }
    case 'truncate':
      return {
        document: document(format, 'truncate', transaction, null, null, []),
        key: null,
        commitLsn: transaction.commitLsn,
      };
  }
}

/**
 * The last transaction's LSN and commit time as the document writes them:
 * every change of a transaction shares them, so they are rendered once per
 * transaction rather than for each of its changes.
 */
let renderedTransaction: { transaction: SourceTransaction; lsn: string; commitTime: string } | undefined;

function transactionFields(transaction: SourceTransaction): { lsn: string; commitTime: string } {
  if (renderedTransaction?.transaction !== transaction) {
    renderedTransaction = {
      transaction,
      lsn: formatLsn(transaction.commitLsn),
      commitTime: isoTimestamp(transaction.commitTimeMicros, 'Z'),
    };
  }
  return renderedTransaction;
}

function document(
  format: TableFormat,
  kind: RecordKind,
  transaction: SourceTransaction | undefined,
  before: Row | null,
  after: Row | null,
  unchanged: readonly string[],
): RecordDocument {
  const rendered = transaction ? transactionFields(transaction) : undefined;
  return {
    kind,
    source: format.source,
    target: format.topic,
    lsn: rendered ? rendered.lsn : null,
    commit_time: rendered ? rendered.commitTime : null,
    xid: transaction ? transaction.xid : null,
    old: before,
    new: after,
    unchanged_columns: unchanged,
  };
}

/**
 * The key columns as a JSON object, in key order. A key column missing from the
 * row (an unchanged TOASTed key) is taken from the old image.
 */
function keyOf(format: TableFormat, row: Row, fallback: Row | null): string | null {
  if (format.keyIndexes.length === 0) return null;
  const key: Record<string, Rendered> = {};
  for (const name of format.table.keyColumns) key[name] = row[name] ?? fallback?.[name] ?? null;
  return JSON.stringify(key);
}

/**
 * Renders a row image. An old image ('old') holds only the key columns unless
 * the source sent the whole row (REPLICA IDENTITY FULL): pgoutput sends
 * non-key columns of a key-only image as nulls, so an old image whose non-key
 * columns are all null is rendered with its key columns only.
 */
function renderRow(
  format: TableFormat,
  image: RowImage,
  which: 'full' | 'old',
): { row: Row; unchanged: string[] } {
  const { columns } = format.table;
  const keyOnly =
    which === 'old' &&
    format.keyIndexes.length > 0 &&
    columns.every((_, index) => format.keyIndexes.includes(index) || image[index] === null);
  const row: Record<string, Rendered> = {};
  const unchanged: string[] = [];
  for (let index = 0; index < columns.length; index++) {
    const column = columns[index];
    if (!column) continue;
    if (keyOnly && !format.keyIndexes.includes(index)) continue;
    const cell = image[index] ?? null;
    if (cell === null) row[column.name] = null;
    else if (isUnchangedToast(cell)) unchanged.push(column.name);
    else if (typeof cell === 'string') row[column.name] = renderText(format.types[index] ?? textType, cell);
    else {
      throw new EngineError(
        'decode',
        `binary tuple value in ${format.table.source.schema}.${format.table.source.table}; text format expected`,
      );
    }
  }
  return { row, unchanged };
}

const textType: ColumnType = { kind: 'unknown_text' };

// The usual shape of a timestamp's text output under the engine's session
// settings (DateStyle=ISO, TimeZone=UTC): rewritten to ISO 8601 as text, the
// same result the parse below gives, at a fraction of its cost.
const plainTimestamp = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(\.\d*[1-9])?0*(\+00)?$/;

/** PostgreSQL's text output of one value, rendered for JSON. */
export function renderText(type: ColumnType, text: string): Rendered {
  if (type.kind === 'timestamptz' || type.kind === 'timestamp') {
    const match = plainTimestamp.exec(text);
    if (match && (match[4] !== undefined) === (type.kind === 'timestamptz')) {
      return `${match[1]}T${match[2]}${match[3] ?? ''}${match[4] ? 'Z' : ''}`;
    }
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

// What flows from the source to a destination: the record model every
// destination reads. It belongs to no source or destination; connectors import
// it, never each other (boundaries.test.ts keeps destinations off the source's
// folder).
import type { TableName } from '../resources/mirror.ts';
import type { TupleData } from './changes.ts';

/** A TOASTed value the change did not modify; the source does not resend it. */
export const unchangedToast: unique symbol = Symbol('unchangedToast');
export type UnchangedToast = typeof unchangedToast;

/**
 * One cell of a row image: `null` for SQL NULL, `unchangedToast`, a string for
 * text format or a Buffer for binary format (a copy of the message's bytes).
 */
export type TupleCell = string | Buffer | null | UnchangedToast;

export function isUnchangedToast(cell: TupleCell): cell is UnchangedToast {
  return cell === unchangedToast;
}

/** `newer` with its unchanged-TOAST cells taken from `older`, an earlier image of the same row. */
export function fillUnchanged(newer: RowImage, older: RowImage): RowImage {
  if (!newer.some(isUnchangedToast)) return newer;
  return newer.map((cell, index): TupleCell => (isUnchangedToast(cell) ? (older[index] ?? cell) : cell));
}

/** A source column as destinations create and write it. */
export interface SourceColumn {
  readonly name: string;
  readonly typeOid: number;
  readonly typeModifier: number;
  /** `format_type(oid, typmod)`, e.g. `numeric(10,2)`: the native type for PG destinations. */
  readonly typeName: string;
  /** For a domain, the type it is a domain over (resolved through nested domains). */
  readonly domainBaseTypeName?: string | undefined;
  readonly notNull: boolean;
  /** pg_attribute.attndims: the declared dimensions of an array column (not enforced by PostgreSQL). */
  readonly arrayDimensions?: number | undefined;
  /**
   * pg_attribute.attnum at the source: kept through a rename or a type change,
   * never reused after a drop, so it tells a rename from a drop and an add
   * (pipeline/schema-diff.ts). Undefined for a column known only by name.
   */
  readonly attnum?: number | undefined;
}

/** A destination table as the mirror creates and writes it. */
export interface DestinationTable {
  readonly source: TableName;
  readonly destination: TableName;
  /** Replicated columns in source attribute order (excluded columns removed). */
  readonly columns: readonly SourceColumn[];
  /** Names of the columns that identify a row; a subset of `columns`. */
  readonly keyColumns: readonly string[];
}

/** One change of a source table's shape, in the order the destination makes them (pipeline/schema-diff.ts). */
export type ColumnChange<Column = SourceColumn> =
  | { readonly kind: 'add'; readonly column: Column }
  | { readonly kind: 'drop'; readonly name: string }
  | { readonly kind: 'rename'; readonly from: string; readonly to: string }
  | { readonly kind: 'retype'; readonly name: string; readonly before: Column; readonly after: Column };

/** A destination table made to follow its source's shape (Destination.alterColumns). */
export interface TableAlteration {
  /** The table as the destination has it. */
  readonly before: DestinationTable;
  /** The table once `changes` are made. */
  readonly after: DestinationTable;
  /** In order; each names columns as they are just before it. */
  readonly changes: readonly ColumnChange[];
}

const keyIndexCache = new WeakMap<DestinationTable, readonly number[]>();

/**
 * Positions of `table.keyColumns` in `table.columns` (-1 for a key column that
 * is not replicated), computed once per table object.
 */
export function keyIndexes(table: DestinationTable): readonly number[] {
  let indexes = keyIndexCache.get(table);
  if (!indexes) {
    indexes = table.keyColumns.map((name) => table.columns.findIndex((column) => column.name === name));
    keyIndexCache.set(table, indexes);
  }
  return indexes;
}

/**
 * One source row image's cells aligned with `DestinationTable.columns`: text
 * values in PostgreSQL's text output, `null`, or the unchanged-TOAST sentinel
 * (the value did not change and the source did not send it).
 */
export type RowImage = readonly TupleCell[];

/**
 * A row image of a change: the one form every stage and destination reads
 * (rows.ts makes them). It may be a view over the source's bytes, decoding a
 * cell only when one is asked for; `tupleData` gives the cells as pgoutput's
 * TupleData whatever the row came as, so each destination has one encoder, over
 * those bytes (decoded cells are written into them once, when asked).
 * Immutable: a row belongs to its change.
 */
export interface Row {
  /** How many cells: the table's column count, for a row of a RowChange. */
  readonly width: number;
  /** Whether the row is the source's TupleData as it came: `tupleData` then costs nothing. */
  readonly fromSourceBytes: boolean;
  /** One cell, decoded alone when the others are not; `null` past the end. */
  cell(index: number): TupleCell;
  /** Every cell, decoded once. */
  cells(): RowImage;
  /** The cells as TupleData (changes.ts): the source's bytes, or written once from the cells. */
  tupleData(): TupleData;
  hasUnchangedToast(): boolean;
  /** About the heap bytes the row takes: what a batch's byte budget counts for it. */
  heapBytes(): number;
}

/** The source transaction a change belongs to; one object shared by its changes. */
export interface SourceTransaction {
  readonly xid: number;
  /** LSN of the commit record: increases in the order transactions are delivered. */
  readonly commitLsn: bigint;
  /** Commit time, microseconds since the Unix epoch. */
  readonly commitTimeMicros: bigint;
}

/** What a change does to a table's rows, without the transaction it came in. */
export type RowChangeImages =
  /**
   * `loaded`: a row an online load read (a backfill chunk's), not a change of
   * a transaction: a destination that tells them apart (Kafka: a `snapshot`
   * message) may; every other writes it as an insert.
   */
  | { readonly kind: 'insert'; readonly newRow: Row; readonly loaded?: true | undefined }
  /** `oldKey` is the old key (key changed) or the whole old row (REPLICA IDENTITY FULL). */
  | { readonly kind: 'update'; readonly oldKey: Row | null; readonly newRow: Row }
  | { readonly kind: 'delete'; readonly oldKey: Row }
  | { readonly kind: 'truncate' };

export type RowChange = { readonly transaction: SourceTransaction } & RowChangeImages;

// Measured on V8 (Node 24): a change object costs about 64 bytes besides its rows.
const changeOverheadBytes = 64;

/** About the heap bytes a change held as an object takes: what a batch's byte budget counts for it. */
export function changeHeapBytes(change: RowChange): number {
  switch (change.kind) {
    case 'truncate':
      return changeOverheadBytes;
    case 'insert':
      return changeOverheadBytes + change.newRow.heapBytes();
    case 'update':
      return changeOverheadBytes + change.newRow.heapBytes() + (change.oldKey?.heapBytes() ?? 0);
    case 'delete':
      return changeOverheadBytes + change.oldKey.heapBytes();
  }
}

/**
 * One table's changes of a batch, held in a destination's own form from the
 * moment they are decoded (Destination.changeBuffer) instead of as objects
 * until the write: a batch of tens of megabytes of objects is what V8's
 * young-generation collector copies again at every collection. A destination
 * that writes from objects holds a ChangeList.
 */
export interface ChangeBuffer {
  /**
   * Holds the table's next change, in order; returns about how many bytes it
   * now takes for it. A row that is the source's bytes (Row.fromSourceBytes)
   * can be copied from them without being decoded.
   */
  add(change: RowChange): number;
}

/** The changes as objects, in order: the buffer of a destination that has no form of its own. */
export class ChangeList implements ChangeBuffer {
  readonly changes: RowChange[] = [];

  add(change: RowChange): number {
    this.changes.push(change);
    return changeHeapBytes(change);
  }

  /** A list of `changes`, for a batch made by hand (tests, a stage that rewrites changes). */
  static of(changes: Iterable<RowChange>): ChangeList {
    const list = new ChangeList();
    for (const change of changes) list.add(change);
    return list;
  }
}

/** The changes of one batch for one destination table, in commit order, held by the destination's buffer. */
export interface TableChanges<Held extends ChangeBuffer = ChangeBuffer> {
  readonly table: DestinationTable;
  readonly held: Held;
}

/**
 * A place inside one source transaction: the transaction by its commit LSN, a
 * change by its LSN and its rank among the transaction's changes at that LSN
 * (1 for the first). Changes of one transaction arrive in WAL order, but
 * several can share an LSN: the rows of one COPY are one multi-insert record.
 */
export interface TransactionPosition {
  readonly commitLsn: bigint;
  readonly changeLsn: bigint;
  readonly changeRank: number;
}

export interface ChangeBatch<Held extends ChangeBuffer = ChangeBuffer> {
  readonly mirror: string;
  readonly batchId: bigint;
  /** Every change in the batch at or before this commit LSN is included. */
  readonly endLsn: bigint;
  /**
   * Set when the batch ends inside a transaction (one larger than a batch): the
   * last change of that transaction the batch holds. Its earlier changes are in
   * this batch or earlier ones.
   */
  readonly transactionPosition?: TransactionPosition | undefined;
  readonly tables: readonly TableChanges<Held>[];
  readonly rowCount: number;
  /**
   * Tables whose online resync this batch completes: after the batch's
   * changes, in the same atomic write as its checkpoint, each `shadow` (loaded
   * beside the live table, Destination.shadowTables) takes the place of `live`.
   * Only a destination with `shadowTables` is given any.
   */
  readonly swaps?: readonly TableSwap[] | undefined;
}

/** A live table and the shadow its resync loaded, to replace it (ChangeBatch.swaps). */
export interface TableSwap {
  readonly live: DestinationTable;
  readonly shadow: DestinationTable;
}

export interface Checkpoint {
  readonly batchId: bigint;
  /** The end of the last transaction the destination holds completely. */
  readonly lsn: bigint;
  /**
   * How far the destination holds the transaction after `lsn`, when the last
   * batch ended inside it: a replay skips its changes up to here.
   */
  readonly transactionPosition?: TransactionPosition | undefined;
}

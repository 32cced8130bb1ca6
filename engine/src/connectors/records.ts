// What flows from the source to a destination: the record model every
// destination reads. It belongs to no source or destination; connectors import
// it, never each other (boundaries.test.ts keeps destinations off the source's
// folder).
import { EngineError } from '../errors.ts';
import { formatTableName, type TableName } from '../resources/mirror.ts';
import type { WireTuple } from './changes.ts';

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
 * One source row image aligned with `DestinationTable.columns`: text values in
 * PostgreSQL's text output, `null`, or the unchanged-TOAST sentinel (the value
 * did not change and the source did not send it).
 */
export type RowImage = readonly TupleCell[];

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
  | { readonly kind: 'insert'; readonly newRow: RowImage }
  /** `oldKey` is the old key (key changed) or the whole old row (REPLICA IDENTITY FULL). */
  | { readonly kind: 'update'; readonly oldKey: RowImage | null; readonly newRow: RowImage }
  | { readonly kind: 'delete'; readonly oldKey: RowImage }
  | { readonly kind: 'truncate' };

export type RowChange = { readonly transaction: SourceTransaction } & RowChangeImages;

// Measured on V8 (Node 24): a change object with its row array costs about 80
// bytes and each string cell about 24 bytes on top of its text.
const changeOverheadBytes = 80;
const cellOverheadBytes = 24;

/** About the heap bytes a change held as an object takes: what a batch's byte budget counts for it. */
export function changeHeapBytes(change: RowChange): number {
  switch (change.kind) {
    case 'truncate':
      return changeOverheadBytes;
    case 'insert':
      return changeOverheadBytes + imageHeapBytes(change.newRow);
    case 'update':
      return (
        changeOverheadBytes +
        imageHeapBytes(change.newRow) +
        (change.oldKey ? imageHeapBytes(change.oldKey) : 0)
      );
    case 'delete':
      return changeOverheadBytes + imageHeapBytes(change.oldKey);
  }
}

function imageHeapBytes(row: readonly unknown[]): number {
  let size = 0;
  for (const cell of row) size += cellOverheadBytes + (typeof cell === 'string' ? cell.length : 0);
  return size;
}

/**
 * One table's changes of a batch, held in a destination's own form from the
 * moment they are decoded (Destination.changeBuffer) instead of as objects
 * until the write: a batch of tens of megabytes of objects is what V8's
 * young-generation collector copies again at every collection.
 */
export interface ChangeBuffer {
  /** Holds the table's next change; returns about how many bytes it now takes for it. */
  add(change: RowChange): number;
  /**
   * Holds the table's next change, an insert whose new row is given undecoded
   * with its cells in the table's column order, when this buffer can keep the
   * row without decoding it; returns about the bytes it took, or undefined
   * when it holds nothing and the insert must come decoded, through `add`.
   */
  addInsertTuple?(tuple: WireTuple, transaction: SourceTransaction): number | undefined;
  /**
   * The same for an update that sent no old image (its key did not change,
   * replica identity not full) and no unchanged-TOAST cell: the new row
   * replaces the row of its key.
   */
  addUpdateTuple?(tuple: WireTuple, transaction: SourceTransaction): number | undefined;
}

/**
 * A table's changes in a destination's own held form: the buffer its
 * changeBuffer made (`Held`), or one made now by `make` of plain changes (a
 * batch built without the buffer). A foreign buffer, or held and plain changes
 * together, is an internal error.
 */
export function heldAs<Held extends ChangeBuffer>(
  { table, held, changes }: TableChanges,
  kind: abstract new (...args: never[]) => Held,
  make: (table: DestinationTable) => Held,
): Held {
  if (held === undefined) {
    const made = make(table);
    for (const change of changes) made.add(change);
    return made;
  }
  if (!(held instanceof kind) || changes.length > 0) {
    throw new EngineError(
      'internal',
      `the changes of ${formatTableName(table.destination)} were handed over in a form this destination does not hold`,
    );
  }
  return held;
}

/** The changes of one batch for one destination table, in commit order. */
export interface TableChanges {
  readonly table: DestinationTable;
  /**
   * The table's changes held by the destination's own changeBuffer, for a
   * destination that offers one; `changes` then holds none.
   */
  readonly held?: ChangeBuffer | undefined;
  readonly changes: readonly RowChange[];
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

export interface ChangeBatch {
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
  readonly tables: readonly TableChanges[];
  readonly rowCount: number;
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

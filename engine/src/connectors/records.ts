// What flows from the source to a destination.
import type { TableName } from '../resources/mirror.ts';
import type { TupleCell } from './postgres/pgoutput.ts';
import type { SourceColumn } from './postgres/table-info.ts';

export type { TupleCell };

/** A destination table as the mirror creates and writes it. */
export interface DestinationTable {
  readonly source: TableName;
  readonly destination: TableName;
  /** Replicated columns in source attribute order (excluded columns removed). */
  readonly columns: readonly SourceColumn[];
  /** Names of the columns that identify a row; a subset of `columns`. */
  readonly keyColumns: readonly string[];
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

export type RowChange = { readonly transaction: SourceTransaction } & (
  | { readonly kind: 'insert'; readonly newRow: RowImage }
  /** `oldKey` is the old key (key changed) or the whole old row (REPLICA IDENTITY FULL). */
  | { readonly kind: 'update'; readonly oldKey: RowImage | null; readonly newRow: RowImage }
  | { readonly kind: 'delete'; readonly oldKey: RowImage }
  | { readonly kind: 'truncate' }
);

/** The changes of one batch for one destination table, in commit order. */
export interface TableChanges {
  readonly table: DestinationTable;
  readonly changes: readonly RowChange[];
}

export interface ChangeBatch {
  readonly mirror: string;
  readonly batchId: bigint;
  /** Every change in the batch at or before this commit LSN is included. */
  readonly endLsn: bigint;
  readonly tables: readonly TableChanges[];
  readonly rowCount: number;
}

export interface Checkpoint {
  readonly batchId: bigint;
  readonly lsn: bigint;
}

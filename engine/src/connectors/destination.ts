// The capabilities a destination offers the pipeline, with the contract each
// method keeps. Connectors do I/O only; when and how often to call them is the
// pipeline's business.
import type { Readable } from 'node:stream';
import type { ChangeBatch, ChangeBuffer, Checkpoint, DestinationTable, TableAlteration } from './records.ts';

export interface Connector {
  /** Connects and checks the peer is usable; returns the server's version. */
  check(): Promise<{ version: string }>;
  /** Releases connections. Safe to call twice. */
  close(): Promise<void>;
}

export interface MirrorColumns {
  /** Column set true instead of deleting rows, when soft delete is on. */
  readonly softDeleteColumn?: string | undefined;
  /** Column holding the time a row was last written by the mirror. */
  readonly syncedAtColumn?: string | undefined;
}

export type DestinationTableState = 'absent' | 'empty' | 'populated';

/**
 * `Held` is the form the destination holds a table's changes of a batch in
 * (`changeBuffer`): a destination gets back in `syncBatch` only buffers it made.
 */
export interface Destination<Held extends ChangeBuffer = ChangeBuffer> extends Connector {
  /**
   * Creates missing target tables and the destination's checkpoint store.
   * Idempotent: existing tables are kept as they are. Called once at setup and
   * again when a table is added.
   */
  setupTables(tables: readonly DestinationTable[]): Promise<void>;

  /**
   * Whether each target table exists and holds rows, in the order given: the
   * initial load empties only tables the mirror owns (see docs/engine.md).
   * A destination that never empties anything (Kafka) answers `empty`;
   * `absent` is a table that is not there (a dropped one is created again:
   * pipeline/table-faults.ts).
   */
  tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]>;

  /** Empties tables before an initial load starts over. */
  truncateTables(tables: readonly DestinationTable[]): Promise<void>;

  /**
   * Writes one snapshot partition given as PostgreSQL COPY text rows of
   * `table.columns`, and returns the row count. May run concurrently for
   * partitions of the same and different tables. A partition whose write failed
   * is retried whole after `truncateTables`; the pipeline never retries one
   * partition alone, so this need not be idempotent. It resolves only once
   * `copyText` was read to its end; it may reject at any point without
   * reading further (the source then drops the COPY, see SnapshotReader).
   * Errors are EngineErrors of this destination's classifier; any other
   * error is taken for a destination write failure.
   */
  writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number>;

  /**
   * Applies a batch so that, once this resolves, the batch and the checkpoint
   * (`batch.batchId`, `batch.endLsn` and `batch.transactionPosition`) are
   * durable together. Replaying a batch whose id is at or below the stored
   * checkpoint changes nothing. Never called concurrently for one mirror.
   *
   * A batch that ends inside a transaction carries `transactionPosition`, and
   * one that ends at a commit carries none: the stored checkpoint takes the
   * batch's value either way (clearing it), in the same atomic write as the
   * batch id. A destination that does not keep it stays correct, since the
   * pipeline then replays an interrupted transaction from its start; it only
   * loses the progress a huge transaction made before a restart.
   */
  syncBatch(batch: ChangeBatch<Held>): Promise<void>;

  /**
   * A buffer for one table's changes of a batch, in the form this destination
   * writes them: the pipeline adds each of the table's changes to it as it is
   * decoded, in order, and hands it back to syncBatch in `TableChanges.held`.
   * A destination that writes from the changes as objects returns a
   * ChangeList. Called by the pipeline at most once per table and batch.
   */
  changeBuffer(table: DestinationTable): Held;

  /**
   * The last durable checkpoint of the mirror, if any batch was synced, with
   * the transaction position of its batch when it had one.
   */
  readCheckpoint(mirror: string): Promise<Checkpoint | undefined>;

  /**
   * Why this destination cannot make `alteration` (a key or sorting-key
   * column renamed or dropped, a type it has no wider form of), or undefined
   * when it can. Asked before `alterColumns`, so that an alteration is made
   * whole or not at all; the pipeline then holds the table with the reason.
   * Widening is the pipeline's rule (model/type-widening.ts): a `retype` asked
   * here is always one.
   */
  refuseAlteration(alteration: TableAlteration): Promise<string | undefined>;

  /**
   * Makes a destination table follow a change of its source table's shape:
   * `alteration.changes` in order, which turn `before` into `after` (columns
   * added, dropped, renamed, widened). Called with no batch in flight, once
   * every change of the table under the old shape is durable, and only with
   * an alteration `refuseAlteration` accepted. Idempotent: after a crash in
   * its middle it is called again with the same alteration, and a change
   * already made (a column there already, gone already, renamed already) is
   * left as it is. A destination of events (Kafka) writes no DDL: it marks
   * the point in the stream instead.
   */
  alterColumns(alteration: TableAlteration): Promise<void>;

  /** Forgets the mirror's checkpoint (drop). Destination tables are kept. */
  removeCheckpoint(mirror: string): Promise<void>;

  /**
   * Present when the destination can load a table beside the live one and
   * put it in the live one's place atomically, readers seeing the old table
   * or the new one and never neither (an online resync, pipeline/table-resync.ts);
   * its `syncBatch` then carries out `ChangeBatch.swaps`.
   */
  readonly shadowTables?: ShadowTables | undefined;
}

/** Tables loaded beside live ones, for an online resync (Destination.shadowTables). */
export interface ShadowTables {
  /**
   * The shadow is written as the live table: a destination of events (Kafka)
   * gets the resync's rows again among the live table's changes, as rows a
   * load read (`loaded` inserts), in order with them; nothing is swapped.
   * Otherwise the shadow is a table of its own that takes every change too.
   */
  readonly intoLive: boolean;
  /** Where `live`'s resync loads: a table of the same name in a place of the mirror's own. */
  shadowOf(live: DestinationTable): DestinationTable;
  /**
   * Creates `shadow` empty, shaped as `live` is now (columns, key, defaults,
   * constraints, indexes and the privileges granted on it), replacing a
   * leftover one.
   */
  create(live: DestinationTable, shadow: DestinationTable): Promise<void>;
  /** Drops `shadow` if it is there (a resync given up). */
  drop(shadow: DestinationTable): Promise<void>;
}

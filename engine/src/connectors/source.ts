// The capabilities a source offers the pipeline, with the contract each method
// keeps. As for destinations (destination.ts), connectors do I/O only: which
// slot to use, whether the mirror may drop it, when to copy and when to stream
// are the pipeline's decisions. Every method throws an EngineError whose kind
// carries the retry policy (errors.ts); a driver's error goes in its `cause`.
import type { Readable } from 'node:stream';
import type { EngineError } from '../errors.ts';
import type { TableName } from '../resources/mirror.ts';
import type { StreamEvent } from './changes.ts';
import type { Connector } from './destination.ts';
import type { Row, SourceColumn } from './records.ts';

export type ReplicaIdentity = 'default' | 'nothing' | 'full' | 'index';

/** What the engine needs to know about a source table. */
export interface SourceTableInfo {
  readonly name: TableName;
  readonly oid: number;
  /** In attribute order, generated columns left out. */
  readonly columns: readonly SourceColumn[];
  /** Primary key columns, else the replica identity index's; empty when neither exists. */
  readonly keyColumns: readonly string[];
  readonly replicaIdentity: ReplicaIdentity;
  /**
   * A partitioned table holds no rows of its own: they live in its partitions,
   * which the initial load reads one by one and whose changes the mirror's
   * publication publishes under this table's name (docs/engine.md, "Partitioned
   * tables").
   */
  readonly partitioned: boolean;
  /** The partitioned tables this table is a partition of, its parent first; empty when it is none's. */
  readonly partitionOf: readonly TableName[];
}

/** A table as the mirror's own publication publishes it. */
export interface PublishedTable {
  readonly name: TableName;
  /**
   * The columns replicated, when some are excluded (a publication column
   * list on 15+, so excluded columns never leave the source); undefined: all.
   */
  readonly columns?: readonly string[] | undefined;
  /** A SQL predicate: only rows for which it is true are published (15+: the row filter). */
  readonly rowFilter?: string | undefined;
}

/** Rows to evaluate a table's row filter over. */
export interface RowFilterEvaluation {
  readonly table: TableName;
  readonly rowFilter: string;
  /** The columns the filter reads, with their types as the source's DDL spells them. */
  readonly columns: readonly { readonly name: string; readonly typeName: string }[];
  /** Per row, the text of each of `columns` (null for SQL NULL). */
  readonly rows: readonly (readonly (string | null)[])[];
}

/** What a publication applies itself. */
export interface PublicationFiltering {
  /** The row filters are the publication's (15+): a filtered row never leaves the source. */
  readonly rowFilters: boolean;
}

export interface SourceValidationInput {
  readonly tables: readonly TableName[];
  /** A user-given publication that must exist and contain every table. */
  readonly publicationName?: string | undefined;
  /** A slot the mirror already owns does not need a free slot. */
  readonly existingSlotName?: string | undefined;
  /** The mirror asks for a failover slot (PostgreSQL 17+). */
  readonly failoverSlot?: boolean | undefined;
  /**
   * A mirror under way: a mapped table gone from the source (dropped or
   * renamed) is that table's fault, returned in `missing`, not a problem.
   */
  readonly missingTablesAllowed?: boolean | undefined;
}

export interface ValidatedSource {
  readonly serverVersion: string;
  /** One per input table found, in the order given. */
  readonly tables: readonly SourceTableInfo[];
  /** The input tables not found (only with `missingTablesAllowed`; otherwise they are problems). */
  readonly missing: readonly TableName[];
}

/** Which of some tables the source no longer has, and where its WAL was when it looked. */
export interface MissingTables {
  readonly missing: readonly TableName[];
  /** The server's WAL position at the look: every change of a missing table was written before it. */
  readonly walLsn: bigint;
}

/**
 * A leaf partition of a partitioned table, as far as telling what PostgreSQL
 * does not publish under a root publication goes (pipeline/partition-watch.ts):
 * its identity, its storage and the transactions that last wrote its catalog
 * rows. Partitioned tables in between are no leaves; foreign partitions hold
 * no rows of the source's and are left out.
 */
export interface PartitionLeaf {
  readonly oid: number;
  readonly name: TableName;
  /** pg_class.relfilenode: a TRUNCATE (also VACUUM FULL, CLUSTER, a rewrite) gives the leaf new storage. */
  readonly fileNode: number;
  /** pg_class.xmin: the transaction that last wrote the leaf's pg_class row (a TRUNCATE writes it). */
  readonly classXmin: number;
  /** pg_inherits.xmin: the transaction that made it a partition (CREATE … PARTITION OF, or ATTACH). */
  readonly attachXmin: number;
}

/** The leaves of some partitioned tables now, and where the server's WAL was when they were read. */
export interface PartitionLeaves {
  /** By the partitioned table's name as asked (`schema.table`); a table that is not partitioned is absent. */
  readonly byTable: ReadonlyMap<string, readonly PartitionLeaf[]>;
  /** Every catalog change these leaves show was committed before this position. */
  readonly walLsn: bigint;
}

/** A replication slot as far as ownership goes. */
export interface SlotRow {
  readonly database: string | null;
  readonly plugin: string | null;
  readonly confirmedFlushLsn: bigint | null;
  /** The process reading it, if any. */
  readonly activePid: number | null;
}

/**
 * A slot's health as pg_replication_slots shows it, measured against the
 * server's WAL position at the same read (control/slot-health.ts reads it for
 * every mirror in every state, connectors/postgres/source/slot-health.ts).
 */
export interface SlotReading {
  /** A walsender reads the slot now. */
  readonly active: boolean;
  /** `reserved`, `extended`, `unreserved` or `lost`; null on a slot that never reserved WAL. */
  readonly walStatus: string | null;
  /** WAL the server keeps for the slot: its WAL position minus restart_lsn; null once invalidated. */
  readonly retainedWalBytes: bigint | null;
  /** WAL written since the slot's confirmed_flush_lsn: changes not yet confirmed durable. */
  readonly unconfirmedBytes: bigint | null;
  /** WAL that may still be written before the slot is at risk (max_slot_wal_keep_size set); null when unbounded. */
  readonly safeWalSizeBytes: bigint | null;
  /** PostgreSQL 17+: why the slot was invalidated; null when it was not (or before 17). */
  readonly invalidationReason: string | null;
  /** PostgreSQL 16+: the slot was invalidated (see SlotState.conflicting); null before 16. */
  readonly conflicting: boolean | null;
}

export interface CreatedSlot {
  readonly slotName: string;
  /** The LSN from which changes are streamed; the exported snapshot sees everything before it. */
  readonly consistentPoint: bigint;
  /** Valid only while the slot's creation is open (inside `whileOpen`); null when none was exported. */
  readonly snapshotName: string | null;
}

export interface CreateSlotOptions {
  /** Export a snapshot that shows the database exactly as of the slot's consistent point. */
  readonly exportSnapshot: boolean;
  /** The slot disappears when its creation ends: used only for its snapshot. */
  readonly temporary?: boolean;
  /** A failover slot, kept by standbys that synchronize slots (PostgreSQL 17+). */
  readonly failover?: boolean;
}

/**
 * A slice of a table that one worker copies: heap pages [fromPage, toPage),
 * `toPage` null to the end. A partitioned table's slices are of its leaf
 * partitions, each read on its own (`leaf`), so every row is read once.
 */
export interface SnapshotPartition {
  readonly fromPage: number;
  readonly toPage: number | null;
  /** The leaf partition whose pages these are, when the mapped table is partitioned. */
  readonly leaf?: TableName | undefined;
}

/**
 * Copies partitions under one snapshot over one connection, one partition at a
 * time (never concurrently on one reader). The pipeline keeps a reader per
 * worker and closes it when the table is done.
 */
export interface SnapshotReader {
  /**
   * Opens a read-only transaction under the snapshot, streams the partition's
   * rows of `columns` as PostgreSQL COPY text to `write`, and commits once
   * `write` resolved (its row count is returned). `write` must read the
   * stream to its end before it resolves; a write that rejects may stop
   * reading at any point (even before the first row). On any failure the
   * transaction ends at once, never waiting on an unread stream (rolled back,
   * or its connection dropped and replaced), the reader stays usable, and the
   * error is thrown classified: the write's own EngineError as it is, another
   * error of the write as the destination's, a failure of the copy itself by
   * the source classifier. With `rowFilter` only the rows for which it is
   * true are read (the table's row filter, one SQL expression).
   */
  copyPartition(
    table: TableName,
    columns: readonly string[],
    partition: SnapshotPartition,
    write: (copyText: Readable) => Promise<number>,
    rowFilter?: string,
  ): Promise<number>;
  /** Releases the connection. Safe to call twice. */
  close(): Promise<void>;
}

/** A key column of a table read in key order by a backfill. */
export interface BackfillKeyColumn {
  readonly name: string;
  /** The column's type as the source's DDL spells it (`format_type`), for its literals. */
  readonly typeName: string;
  /** Text compared by its UTF-8 bytes (`COLLATE "C"`), not by the column's collation. */
  readonly byteOrdered: boolean;
}

/** One chunk of a table's online backfill (pipeline/backfill/). */
export interface BackfillChunkRequest {
  readonly table: TableName;
  /** The columns of each row, in this order. */
  readonly columns: readonly string[];
  /** The key, its columns in key order. */
  readonly key: readonly BackfillKeyColumn[];
  /** Rows whose key is above this (text values, one per key column); every row from the first when null. */
  readonly after: readonly string[] | null;
  /** At most this many rows of the range, the lowest keys first; 0 reads no range. */
  readonly limit: number;
  /** Keys (text values) whose rows are read too, where they exist. */
  readonly pendingKeys: readonly (readonly string[])[];
  /** The table's row filter: only rows for which it is true are read (range and pending keys alike). */
  readonly rowFilter?: string | undefined;
}

export interface BackfillChunk {
  /** The snapshot the chunk was read under, as `pg_current_snapshot()` writes it (`xmin:xmax:xip,…`). */
  readonly snapshot: string;
  /** The range's rows in key order (key columns compared as `BackfillKeyColumn` says), as text cells. */
  readonly rows: Row[];
  /** The rows of the pending keys that exist. */
  readonly pendingRows: Row[];
  /**
   * A WAL position read after the snapshot was taken, at or past the end of
   * every commit record the snapshot sees (the WAL insert position): once the
   * change stream has passed it, every transaction the chunk holds was streamed.
   */
  readonly highLsn: bigint;
}

/**
 * Reads backfill chunks over one connection of its own, one at a time (never
 * concurrently), each in one read-only REPEATABLE READ transaction: its
 * snapshot, then its rows, then the high LSN, so the three agree. Writes
 * nothing to the source. A failure ends the transaction (the reader stays
 * usable) and is thrown classified.
 */
export interface BackfillReader {
  readChunk(request: BackfillChunkRequest): Promise<BackfillChunk>;
  /** Releases the connection. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * A stream of changes from a slot, starting after the position it was opened
 * at. Nothing is acknowledged on receipt: the slot advances only to what the
 * pipeline passes to `acknowledge`, which it does once the destination made
 * everything before that position durable.
 */
export interface ChangeStream {
  /**
   * Events in WAL order, in arrays of whatever had arrived. Iterated by one
   * consumer at a time; not reading holds the server back. Ends without error
   * only after `close()`; a broken stream throws a classified EngineError.
   */
  events(): AsyncGenerator<readonly StreamEvent[]>;
  /**
   * Reports everything before `lsn` as durable: the source may recycle it. A
   * position at or below one already acknowledged is ignored. Synchronous and
   * cheap: it may be called for every commit and keepalive.
   */
  acknowledge(lsn: bigint): void;
  /** The server's WAL end as it last reported it (0 until it has): for lag metrics. */
  readonly serverWalEnd: bigint;
  /** The last acknowledged position. */
  readonly flushedLsn: bigint;
  /**
   * Asks the server to say how far it has sent (a keepalive event follows
   * soon, in order with the changes): the backfill waits for a position at
   * or past a chunk's high LSN on a source that may be writing nothing.
   * Synchronous and cheap; acknowledges nothing new.
   */
  requestPosition(): void;
  /** Stops streaming and releases the connection. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * A mirror's source. The setup and teardown calls (validation, slot and
 * publication reads and changes) share one connection opened at the first call
 * and held until `close()`, and are made one at a time; type lookups hold
 * another, since they run while the change stream does. `close()` releases
 * both, and a later call opens them again: the pipeline closes the source
 * after setup and after streaming, and the supervisor reruns it on the same
 * object. Snapshot readers and change streams own their connections and may be
 * used while setup calls run. Only the caller that created a source closes it
 * for good (there is nothing more to release than `close()` does).
 */
export interface Source extends Connector {
  // --- Validation -----------------------------------------------------------

  /**
   * Hands `warn` what in the source's configuration deserves a WARN in the
   * mirror's logs when it starts (an SSH tunnel that does not verify the
   * server's host key), once per peer in a process. No I/O.
   */
  reportConfigWarnings(peerName: string, warn: (message: string) => void): void;

  /**
   * Checks the server and every table can be replicated, and describes the
   * tables. Reports every problem at once (`source_setup`), or `busy` when only
   * replication capacity is short. Reads only.
   */
  validate(input: SourceValidationInput): Promise<ValidatedSource>;

  /** Which of `tables` do not exist (any more) on the source: one cheap query, for a watch while streaming. */
  missingTables(tables: readonly TableName[]): Promise<MissingTables>;

  /**
   * The names the tables with these OIDs (SourceTableInfo.oid) have now; an
   * OID absent from the answer is no table any more. What follows a table
   * through a rename (pipeline/source-names.ts). One query.
   */
  tableNames(oids: readonly number[]): Promise<Map<number, TableName>>;

  /**
   * The leaf partitions of those of `tables` that are partitioned, at any
   * depth, and the WAL position after the read. One query, for the look a
   * mirror takes at its partitioned tables (pipeline/partition-watch.ts).
   */
  partitionLeaves(tables: readonly TableName[]): Promise<PartitionLeaves>;

  /**
   * Whether the leaf holds a row written no later than the transaction that
   * made it a partition (`attachXmin`): rows it had when it was attached,
   * which were never published under the partitioned table. Reads the leaf
   * until the first such row (all of it when there is none).
   */
  rowsBeforeAttach(leaf: PartitionLeaf): Promise<boolean>;

  // --- Publication and slot -------------------------------------------------

  /** The default slot and publication names of a mirror of one installation (pure). */
  defaultNames(mirror: string, installationId: string): { slotName: string; publicationName: string };
  /** The database the setup connection is attached to (part of a slot's identity). */
  database(): Promise<string>;
  /** The slot, or undefined when it does not exist. */
  readSlot(slotName: string): Promise<SlotRow | undefined>;
  slotExists(slotName: string): Promise<boolean>;
  /**
   * The slot's loss as a `slot_invalidated` EngineError (missing, WAL lost,
   * invalidated), or undefined while it can be read.
   */
  slotLoss(slotName: string): Promise<EngineError | undefined>;
  /** Whether the slot is a failover slot; null where the server has none (before 17) or no such slot. */
  slotFailover(slotName: string): Promise<boolean | null>;
  /** Makes an existing slot a failover slot or not (17+). */
  setSlotFailover(slotName: string, failover: boolean): Promise<void>;
  publicationExists(publicationName: string): Promise<boolean>;
  /**
   * Creates the publication when absent, adds any table it lacks, and brings
   * each table's row filter and column list in line with `tables` where the
   * server has them (PostgreSQL 15+): changes committed from then on are
   * published so. Returns whether the publication itself filters the rows
   * (otherwise the pipeline must, with the same semantics). Idempotent.
   */
  ensurePublication(
    publicationName: string,
    tables: readonly PublishedTable[],
  ): Promise<PublicationFiltering>;
  /** Removes the tables from the publication when they are in it. Idempotent. */
  removeFromPublication(publicationName: string, tables: readonly TableName[]): Promise<void>;
  /**
   * Creates a logical slot and runs `whileOpen` while its creation is still
   * open: an exported snapshot (and a temporary slot) lives exactly that long,
   * so every snapshot partition must be copied inside it. Not idempotent: a
   * slot of that name must not exist (`config` otherwise).
   */
  createSlot(
    slotName: string,
    options: CreateSlotOptions,
    whileOpen: (slot: CreatedSlot) => Promise<void>,
  ): Promise<CreatedSlot>;

  // --- Partitions and copy --------------------------------------------------

  /**
   * Splits a table into partitions of about `rowsPerPartition` rows, measured
   * under the snapshot (a fresh one when `snapshotName` is null). The last
   * partition is open-ended, so rows added after the measurement are copied.
   */
  planPartitions(
    table: TableName,
    snapshotName: string | null,
    rowsPerPartition: number,
  ): Promise<SnapshotPartition[]>;
  /** Opens a reader that copies partitions under `snapshotName` (a fresh snapshot when null). */
  openSnapshotReader(snapshotName: string | null): Promise<SnapshotReader>;
  /** Opens a reader of backfill chunks (PostgreSQL 13+: it reads `pg_current_snapshot()`). */
  openBackfillReader(): Promise<BackfillReader>;

  // --- Stream ---------------------------------------------------------------

  /**
   * Starts streaming the slot's changes of the publication's tables from
   * `startLsn`. One stream per slot at a time (the server refuses a second).
   *
   * `skipBefore`: the destination holds the changes of the transaction that
   * commits at `commitLsn` up to a change at `changeLsn` (its checkpoint's
   * transaction position). The source may leave out that transaction's row
   * changes whose LSN is below `changeLsn`, before decoding their rows, so a
   * restart reads quickly past what is done; everything else (its begin,
   * relation messages, changes at or after `changeLsn`, its commit) is
   * delivered. The pipeline skips those changes either way.
   */
  openStream(options: {
    readonly slotName: string;
    readonly publicationName: string;
    readonly startLsn: bigint;
    readonly skipBefore?: { readonly commitLsn: bigint; readonly changeLsn: bigint } | undefined;
  }): Promise<ChangeStream>;

  /**
   * Writes a heartbeat into the WAL of the source's database (a
   * non-transactional logical decoding message, prefix `tributary_heartbeat`,
   * no content) and returns its position. A record of this database lets the
   * server move an idle database's slot along while other databases write
   * (pipeline/heartbeats.ts). On the setup connection. Any role may, unless a
   * DBA revoked EXECUTE on `pg_logical_emit_message`; a standby cannot: thrown
   * classified.
   */
  emitHeartbeat(): Promise<bigint>;

  // --- Type lookup ----------------------------------------------------------

  /** The type names (as the source's DDL spells them) of columns a relation message announced. */
  typeNames(
    columns: readonly { readonly typeOid: number; readonly typeModifier: number }[],
  ): Promise<string[]>;
  /**
   * The partitioned tables a relation (by the id its Relation messages carry)
   * is a partition of, its parent first; empty when it is none's or gone. Read
   * from the source's current catalog while the change stream runs.
   */
  partitionAncestors(relationId: number): Promise<TableName[]>;
  /**
   * The replicated columns a relation (by its Relation messages' id) has in
   * the source's current catalog, by attnum in attnum order (not dropped, not
   * generated); empty when it is gone. What tells a renamed column from a
   * dropped one (pipeline/schema-diff.ts). Read once transaction `xid` (the
   * one the Relation message came in) is visible to the reading session: the
   * stream may deliver a transaction before other sessions see it.
   */
  liveColumns(relationId: number, xid: number): Promise<{ readonly attnum: number; readonly name: string }[]>;

  // --- Row filters ----------------------------------------------------------

  /**
   * The columns a table's row filter reads, in attribute order, or the
   * source's reason for refusing it (a `config` EngineError). Creates nothing.
   */
  rowFilterColumns(table: SourceTableInfo, rowFilter: string): Promise<string[]>;
  /**
   * Evaluates a row filter over rows with the source's own semantics, where
   * the publication does not filter (PostgreSQL 13 and 14, or a publication the
   * mirror does not own): true where the filter is true. On the type lookup
   * connection; not concurrently with itself.
   */
  evaluateRowFilter(request: RowFilterEvaluation): Promise<boolean[]>;

  // --- Teardown -------------------------------------------------------------

  /**
   * Drops the slot, first ending a reader still attached to it. Idempotent: a
   * slot that is gone is what a drop wants. The caller checked the mirror owns it.
   */
  dropSlot(slotName: string): Promise<void>;
  /** Drops the publication if it exists. The caller checked the mirror created it. */
  dropPublication(publicationName: string): Promise<void>;
}

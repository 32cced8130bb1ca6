// The catalog holds each mirror's runtime state, its CDC batches, its logs and
// its snapshot progress. The engine writes it; the facade and the operator read
// it. Rows of dropped mirrors' logs and batches are kept. It also holds the
// audit trail of the API, which the facade writes.
import type { ColumnChange, SourceColumn } from '../connectors/records.ts';
import type { SlotReading } from '../connectors/source.ts';
import type { ErrorKind } from '../errors.ts';

/** Mirror lifecycle phases; transitions are in docs/mirror-lifecycle.md. */
export const mirrorPhases = [
  'setup',
  'snapshot',
  'running',
  'pausing',
  'paused',
  'terminating',
  'terminated',
  'completed',
  'failed',
] as const;
export type MirrorPhase = (typeof mirrorPhases)[number];

/**
 * The states of one mapped table of a mirror; transitions are in
 * docs/mirror-lifecycle.md ("Table states") and written by table-states.ts only.
 */
export const tableStates = [
  'pending',
  'loading',
  'streaming',
  'resyncing',
  'held',
  'errored',
  'removed',
] as const;
export type TableState = (typeof tableStates)[number];

/** The name each table state has in the interface's style (like `currentFlowState`'s). */
export const tableStateNames = {
  pending: 'TABLE_STATE_PENDING',
  loading: 'TABLE_STATE_LOADING',
  streaming: 'TABLE_STATE_STREAMING',
  resyncing: 'TABLE_STATE_RESYNCING',
  held: 'TABLE_STATE_HELD',
  errored: 'TABLE_STATE_ERRORED',
  removed: 'TABLE_STATE_REMOVED',
} as const satisfies Record<TableState, string>;

export type TableStateName = (typeof tableStateNames)[TableState];

/** Why a table is `errored` (or `held`): the error's kind and remedy as for a mirror's fault (errors.ts). */
export interface TableProblem {
  readonly kind: ErrorKind;
  readonly message: string;
  readonly remedy: string;
}

/** Rows of one table a CDC batch applied, by operation, and the last of its changes the batch holds. */
export interface TableApplied {
  /** The source table, schema.table as formatTableName writes it. */
  readonly sourceTable: string;
  readonly inserts: bigint;
  readonly updates: bigint;
  readonly deletes: bigint;
  /** Commit LSN of the last transaction whose changes of this table the batch holds. */
  readonly lastLsn: bigint;
  /** That transaction's commit time, microseconds since the Unix epoch. */
  readonly lastCommitTimeMicros: bigint;
}

/** One table of a mirror as the catalog holds it (Catalog.listTables). */
export interface TableStatus {
  readonly sourceTable: string;
  readonly destinationTable: string;
  readonly state: TableState;
  /** When the table entered its state. */
  readonly stateSince: Date;
  readonly inserts: bigint;
  readonly updates: bigint;
  readonly deletes: bigint;
  /** Commit LSN of the last transaction CDC applied to the table; 0 before the first. */
  readonly lastLsn: bigint;
  /** Its commit time; null before the first. */
  readonly lastCommitTime: Date | null;
  /** Set while the table is `errored` or `held`; null otherwise. */
  readonly problem: TableProblem | null;
  /**
   * While `errored` or `held`: the position the table's destination is at,
   * changes after it are not applied; null otherwise.
   */
  readonly behindLsn: bigint | null;
  /** The last resync request of the spec (`resyncTables`) the engine acted on; null before any. */
  readonly resyncToken: string | null;
}

/**
 * The shape a table's destination follows (pipeline/schema-evolution.ts):
 * recorded when the mirror sets the table up and after each schema change it
 * carried to the destination, so a restart compares the stream with what the
 * destination has rather than with the source's catalog of now.
 */
export interface TableShape {
  /** The source columns its Relation messages list, in attnum order, excluded ones flagged. */
  readonly source: readonly {
    readonly name: string;
    readonly typeOid: number;
    readonly typeModifier: number;
    readonly attnum?: number | undefined;
    readonly excluded?: boolean | undefined;
  }[];
  /** The destination table's columns the mirror writes (DestinationTable.columns). */
  readonly columns: readonly SourceColumn[];
  readonly keyColumns: readonly string[];
  /**
   * The source table's identity (its OID), which a rename keeps: the mirror
   * finds the table by it (pipeline/source-names.ts). Absent on shapes
   * recorded before identities were.
   */
  readonly sourceOid?: number | undefined;
  /**
   * The source table's name (`schema.table`) as the destination follows it;
   * absent: the table mapping's. A rename is a schema change like a
   * column's: settled under the mirror's policy (schema-evolution.ts).
   */
  readonly sourceName?: string | undefined;
  /**
   * An alteration of the destination table under way from this shape to
   * `to` (schema-evolution.ts): recorded just before its first statement,
   * gone with the record of `to`. A start that finds it (the engine stopped
   * in between) completes it before the table is set up or written
   * (table-shapes.ts), so that nothing meets the table halfway: ClickHouse's
   * and Snowflake's setup would add back the columns it dropped or renamed.
   */
  readonly altering?: { readonly changes: readonly ColumnChange[]; readonly to: TableShape } | undefined;
}

/**
 * A leaf partition whose rows a partitioned table's destination holds
 * (pipeline/partition-watch.ts): recorded when a load of the table from
 * nothing begins and after each look that found its partitions changed, so
 * a look (also the first after a restart) can tell what PostgreSQL did not
 * publish: a partition truncated, detached or dropped, or attached with rows.
 */
export interface RecordedLeaf {
  readonly oid: number;
  /** `schema.table` when recorded: what the log says of a leaf that is gone. */
  readonly name: string;
  /** Its storage (pg_class.relfilenode) when recorded. */
  readonly fileNode: number;
}

/** What a table's state writer records with a move (Catalog.transitionTable). */
export interface TableMove {
  readonly sourceTable: string;
  readonly destinationTable: string;
  readonly to: TableState;
  /** Required for `errored` and `held`; cleared by every other move. */
  readonly problem?: TableProblem | undefined;
  /** For `errored` and `held`; cleared by every other move. */
  readonly behindLsn?: bigint | undefined;
}

/**
 * Where one added table's online backfill is (pipeline/backfill/): recorded
 * with each CDC batch before the batch is written, so the record of the
 * destination's checkpoint batch is the progress that is durable there.
 */
export interface BackfillTableProgress {
  /** The last key (text values) of the last chunk emitted; null before the first. */
  readonly after: readonly string[] | null;
  /** Every key above `after` was copied. */
  readonly rangeDone: boolean;
  /** Keys to read again; each is absent at the destination until it is. */
  readonly pending: readonly (readonly string[])[];
  /** Rows copied so far. */
  readonly rowsCopied: number;
  /**
   * When this load of the table began (its snapshot record's start time, ms):
   * a record of an earlier load (the table removed and added again) is not resumed.
   */
  readonly since: number;
}

/** Per source table (`schema.table`): its backfill's progress as of a batch. */
export type BatchBackfill = Readonly<Record<string, BackfillTableProgress>>;

/** Levels of a mirror's log entries, most severe first. */
export const logLevels = ['ERROR', 'WARN', 'INFO'] as const;
export type LogLevel = (typeof logLevels)[number];
/** What a reader of the logs filters on (API, console, CLI): one level, or all. */
export const logLevelFilters = ['ALL', ...logLevels] as const;
export type LogLevelFilter = (typeof logLevelFilters)[number];

/**
 * Who a slot is, beyond its name: a slot dropped and re-created under the same
 * name by someone else has another database or plugin, or started later.
 * pg_replication_slots has no creation time, so the LSN the slot started from
 * stands for it.
 */
export interface SlotIdentity {
  readonly database: string;
  readonly plugin: string;
  /** The slot's consistent point as CREATE_REPLICATION_SLOT answered it. */
  readonly createdAtLsn: string;
}

/** What setup created on the source, so teardown removes exactly that. */
export interface SourceSetup {
  readonly slotName: string;
  readonly publicationName: string;
  /** False when the user named an existing publication (or adopted one): teardown must keep it. */
  readonly publicationCreatedByMirror: boolean;
  /**
   * True once the mirror is about to create the slot (recorded before
   * CREATE_REPLICATION_SLOT, so a crash in between cannot orphan it); false for a
   * slot adopted with adoptExistingSlot, which the mirror reads but never drops.
   */
  readonly slotCreatedByMirror: boolean;
  /** Recorded right after the mirror created the slot; null before that and for an adopted slot. */
  readonly slotIdentity: SlotIdentity | null;
}

/**
 * Why a mirror's slot is or is not healthy (control/slot-health.ts decides):
 * True `Healthy`; False `Invalidated`, `WalAtRisk` (wal_status unreserved: the
 * next checkpoint may remove WAL it needs), `RetainedWalOverLimit` (more than the
 * mirror's maxRetainedWalBytes), `SlotMissing`; Unknown
 * `SlotNotCreated` (setup has not created it yet), `SourceUnreachable`,
 * `WaitingForPeer`.
 */
export const slotHealthReasons = [
  'Healthy',
  'Invalidated',
  'WalAtRisk',
  'RetainedWalOverLimit',
  'SlotMissing',
  'SlotNotCreated',
  'SourceUnreachable',
  'WaitingForPeer',
] as const;
export type SlotHealthReason = (typeof slotHealthReasons)[number];

/** A mirror's slot as the last read of its source server found it. */
export interface SlotHealth {
  readonly slotName: string;
  /** When the source was read (or the read failed). */
  readonly checkedAt: Date;
  /** True healthy, false not, null unknown (no reading). */
  readonly healthy: boolean | null;
  readonly reason: SlotHealthReason;
  /** One line for a person: what was found, or why nothing could be read. Never a secret. */
  readonly message: string;
  /** What pg_replication_slots showed; null when the slot does not exist or the source could not be read. */
  readonly reading: SlotReading | null;
}

/** A step that has made no progress for longer than the stall bound. */
export interface MirrorStall {
  /** What it waits on, e.g. `initial load: destination: write public.orders partition 3 of 8`. */
  readonly step: string;
  /** When that step last moved (or began, if it never did). */
  readonly since: Date;
}

export interface MirrorRuntime {
  readonly mirror: string;
  readonly phase: MirrorPhase;
  /** Why the mirror failed (phase `failed`); null otherwise. */
  readonly errorMessage: string | null;
  /**
   * The fault the mirror is retrying by itself, while it lasts (the phase stays
   * what it was, e.g. `running`); null when there is none.
   */
  readonly retryingError: string | null;
  readonly retryingSince: Date | null;
  /**
   * What the mirror waits on while a step has made no progress for longer
   * than the stall bound (pipeline/progress-watchdog.ts); null when nothing is stalled.
   */
  readonly stall: MirrorStall | null;
  /**
   * While the engine streams: the commit time at the source of the oldest
   * transaction received and not yet durable at the destination; null when
   * every transaction received is durable (caught up). Lag in seconds is the
   * time since (pipeline/replication-delay.ts).
   */
  readonly lagSince: Date | null;
  readonly setup: SourceSetup | null;
  readonly snapshotCompleted: boolean;
  readonly updatedAt: Date;
}

/**
 * One CDC batch. `startLsn` is the LSN of the batch's first change. `endLsn` is
 * the end LSN of the last commit the batch holds completely, which is what the
 * slot is acknowledged to; a batch that ends inside a transaction larger than a
 * batch records the LSN of its last change instead, so `startLsn <= endLsn`
 * always holds. `endLsn` is 0 while the batch is not finished.
 */
export interface CdcBatch {
  readonly batchId: bigint;
  readonly startTime: Date;
  readonly endTime: Date | null;
  readonly rowCount: bigint;
  readonly startLsn: bigint;
  readonly endLsn: bigint;
}

export interface LogEntry {
  readonly id: bigint;
  readonly mirror: string;
  /** 0: the mirror of this name that exists now (or was dropped last); 1, 2, …: earlier ones, in drop order. */
  readonly incarnation: number;
  readonly level: LogLevel;
  readonly message: string;
  /** When it was first written. */
  readonly timestampMs: number;
  /** How many times in a row it was written (identical consecutive entries are folded into one). */
  readonly repeatCount: number;
  /** When it was last written: `timestampMs` unless it was folded. */
  readonly lastTimestampMs: number;
}

export interface SnapshotTableProgress {
  readonly sourceTable: string;
  readonly destinationTable: string;
  readonly startTime: Date;
  readonly partitionsTotal: number;
  readonly partitionsCompleted: number;
  readonly rowsSynced: bigint;
  readonly totalPartitionMs: bigint;
  readonly fetchCompleted: boolean;
  readonly consolidateCompleted: boolean;
  /** CDC applies this table's changes only from transactions committed at or after this LSN. */
  readonly cdcStartLsn: bigint;
}

export interface BatchQuery {
  /** At most this many; 0 or less means all. */
  readonly limit: number;
  readonly ascending: boolean;
  readonly beforeId?: bigint;
  readonly afterId?: bigint;
  /**
   * Only batches that finished (durable at the destination). The newest batch
   * may be one that is still being written, or failed and will be replayed:
   * lag and last-batch figures must not count it, or they vanish during an outage.
   */
  readonly finishedOnly?: boolean;
}

export interface LogQuery {
  /** Undefined means every mirror (entries of every incarnation). */
  readonly mirror?: string;
  /** With `mirror`: which mirror of that name (see LogEntry.incarnation); 0 when absent. */
  readonly incarnation?: number;
  readonly levels?: readonly LogLevel[];
  readonly beforeId?: bigint;
  readonly afterId?: bigint;
  readonly offset: number;
  readonly limit: number;
}

/**
 * One state-changing API request, as the facade recorded it (docs/security.md,
 * "Audit trail"): who, what, when, from where, and how it was answered. Never a
 * secret: names of what was acted on, not request bodies.
 */
export interface AuditEntry {
  readonly id: bigint;
  readonly at: Date;
  /** The credential's user name (the API password's is its --user, else `api-password`). */
  readonly user: string;
  /** The credential's role when the request was made. */
  readonly role: string;
  /** What was asked, e.g. `mirror.pause`, `peer.create`. */
  readonly action: string;
  /** `METHOD /path` of the route. */
  readonly route: string;
  /** The name of the mirror, peer or script acted on; null when the request did not get as far as naming it. */
  readonly object: string | null;
  /** More about the object: a resync's table. */
  readonly detail: string | null;
  /** The client's address as the facade sees it (behind trusted proxies, the forwarded one). */
  readonly clientAddress: string;
  /** The HTTP status it was answered with. */
  readonly status: number;
}

export type NewAuditEntry = Omit<AuditEntry, 'id'>;

export interface AuditQuery {
  /** Only this user's entries. */
  readonly user?: string;
  readonly offset: number;
  readonly limit: number;
}

/**
 * Implementations must make each method atomic on its own; methods may be called
 * concurrently from different mirrors but never concurrently for one mirror's
 * phase (the pipeline serialises those).
 */
export interface Catalog {
  migrate(): Promise<void>;

  getRuntime(mirror: string): Promise<MirrorRuntime | undefined>;
  /** Mirrors with a runtime record that are not terminated (engines ran for them and they were not torn down). */
  listUnterminatedMirrors(): Promise<string[]>;
  /**
   * Moves the mirror to `phase` if the lifecycle allows it from its current
   * phase (creating the runtime row for `setup`), atomically. Throws
   * PhaseTransitionError otherwise.
   */
  transition(mirror: string, phase: MirrorPhase, errorMessage?: string | null): Promise<void>;
  /**
   * A mirror of this name exists again after one was dropped: when the stored
   * runtime is `terminated`, forgets it, its batches and its snapshot progress,
   * and numbers the dropped mirror's logs as an earlier incarnation (they stay
   * readable). Returns whether there was a dropped mirror to forget.
   */
  startNewIncarnation(mirror: string): Promise<boolean>;
  /**
   * Records (message) or clears (null) the fault the mirror is retrying; see
   * MirrorRuntime.retryingError. Recording it for a mirror without a runtime
   * row yet (its first run failed before setup) creates the row in `setup`.
   */
  setRetryingError(mirror: string, message: string | null): Promise<void>;
  /** Records (the stalled step) or clears (null) a stall; see MirrorRuntime.stall. */
  setStall(mirror: string, stall: MirrorStall | null): Promise<void>;
  /** Records MirrorRuntime.lagSince (null: caught up). */
  setLagSince(mirror: string, since: Date | null): Promise<void>;
  saveSourceSetup(mirror: string, setup: SourceSetup): Promise<void>;
  /**
   * A random id of this catalog, made once: it tells apart installations that
   * share a source, so their default slot and publication names differ.
   */
  installationId(): Promise<string>;
  /**
   * Records destination tables the mirror owns: it created them, or found them
   * empty and loaded them. Only those (or any, on a resync) may be emptied by an
   * initial load that starts (over). Kept when the mirror is dropped, so a
   * mirror created again under its name (the resync remedy) may reload them.
   */
  recordOwnedTables(mirror: string, destinationTables: readonly string[]): Promise<void>;
  /** Destination tables mirrors of this name own (see recordOwnedTables). */
  listOwnedTables(mirror: string): Promise<string[]>;
  setSnapshotCompleted(mirror: string, completed: boolean): Promise<void>;

  startBatch(mirror: string, batch: { batchId: bigint; startTime: Date; startLsn: bigint }): Promise<void>;
  /**
   * Records the batch durable; with `tables`, adds each table's applied rows and
   * moves its last applied position in the same statement (a table the catalog
   * does not track is left out).
   */
  finishBatch(
    mirror: string,
    batch: {
      batchId: bigint;
      endTime: Date;
      rowCount: bigint;
      endLsn: bigint;
      tables?: readonly TableApplied[] | undefined;
    },
  ): Promise<void>;
  /**
   * Records the progress of the online backfills as of the batch's end, on
   * the batch's record (which startBatch made). Called before the batch is
   * written to the destination, so the checkpoint's batch always has it.
   */
  recordBatchBackfill(mirror: string, batchId: bigint, backfill: BatchBackfill): Promise<void>;
  /** The backfill progress recorded with a batch; undefined when none was (or no such batch). */
  batchBackfill(mirror: string, batchId: bigint): Promise<BatchBackfill | undefined>;
  /** Removes batches that never became durable (ids above the destination's checkpoint). */
  discardBatchesAfter(mirror: string, batchId: bigint): Promise<void>;
  lastBatchId(mirror: string): Promise<bigint>;
  /** Rows of every finished batch of the mirror. */
  cdcRowCount(mirror: string): Promise<bigint>;
  listBatches(mirror: string, query: BatchQuery): Promise<{ batches: CdcBatch[]; total: number }>;

  /**
   * Appends an entry to the mirror's current log. One identical to the newest
   * entry (same level and message) is folded into it: its count goes up and
   * its last time moves. Entries beyond the catalog's retention (count per
   * mirror, age) are dropped, the oldest first.
   */
  appendLog(mirror: string, level: LogLevel, message: string): Promise<void>;

  /**
   * Why the mirror's engine cannot run where the engine itself cannot say it
   * (cluster mode: its pod crash-loops, is OOM-killed, its image cannot be
   * pulled), as the operator last saw it; null clears it.
   */
  setEngineProblem(mirror: string, message: string | null): Promise<void>;
  getEngineProblem(mirror: string): Promise<string | undefined>;
  /**
   * Records the mirror's slot health as the slot health monitor last read it
   * (one writer: control/slot-health.ts), replacing the previous record.
   */
  recordSlotHealth(mirror: string, health: SlotHealth): Promise<void>;
  getSlotHealth(mirror: string): Promise<SlotHealth | undefined>;
  /** Forgets the slot health of every mirror not named (dropped ones). */
  keepSlotHealthOf(mirrors: readonly string[]): Promise<void>;
  listLogs(query: LogQuery): Promise<{ entries: LogEntry[]; total: number }>;

  resetSnapshotProgress(mirror: string): Promise<void>;
  startSnapshotTable(
    mirror: string,
    table: { sourceTable: string; destinationTable: string; partitionsTotal: number; cdcStartLsn: bigint },
  ): Promise<void>;
  /** Forgets the load of tables no longer mapped, so mapping them again loads them again. */
  removeSnapshotTables(mirror: string, sourceTables: readonly string[]): Promise<void>;
  recordSnapshotPartition(
    mirror: string,
    sourceTable: string,
    rowCount: bigint,
    elapsedMs: number,
  ): Promise<void>;
  finishSnapshotTable(mirror: string, sourceTable: string): Promise<void>;
  listSnapshotProgress(mirror: string): Promise<SnapshotTableProgress[]>;

  /** Every table the mirror tracks, removed ones too, by source table. */
  listTables(mirror: string): Promise<TableStatus[]>;
  /**
   * Moves one table to `move.to` if the table states allow it from the state
   * it is in (creating its row when `new` may lead there), atomically; throws
   * TableStateTransitionError (table-states.ts) otherwise. Only table-states.ts calls it.
   */
  transitionTable(mirror: string, move: TableMove): Promise<void>;
  /** The shapes the mirror's tables' destinations follow, by source table (TableShape). */
  listTableShapes(mirror: string): Promise<Map<string, TableShape>>;
  /** Records the shape a table's destination follows from now on, replacing the last one. */
  recordTableShape(mirror: string, sourceTable: string, shape: TableShape): Promise<void>;
  /** The leaf partitions each partitioned table's destination holds the rows of, by source table (RecordedLeaf). */
  listPartitionLeaves(mirror: string): Promise<Map<string, readonly RecordedLeaf[]>>;
  /** Records a partitioned table's leaves as its destination holds them from now on, replacing the last record. */
  recordPartitionLeaves(mirror: string, sourceTable: string, leaves: readonly RecordedLeaf[]): Promise<void>;
  /** Records that the engine acted on the table's resync request `token` (pipeline/table-resync.ts). */
  recordResyncToken(mirror: string, sourceTable: string, token: string): Promise<void>;

  /**
   * Appends an entry to the audit trail. Entries beyond the catalog's audit
   * retention (a count, an age) are dropped, the oldest first.
   */
  appendAudit(entry: NewAuditEntry): Promise<void>;
  /** Audit entries, newest first, and how many match in all. */
  listAudit(query: AuditQuery): Promise<{ entries: AuditEntry[]; total: number }>;
}

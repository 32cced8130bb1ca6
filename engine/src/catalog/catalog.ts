// The catalog holds each mirror's runtime state, its CDC batches, its logs and
// its snapshot progress. The engine writes it; the facade and the operator read
// it. Rows of dropped mirrors' logs and batches are kept.

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

export type LogLevel = 'INFO' | 'WARN' | 'ERROR';

/** What setup created on the source, so teardown removes exactly that. */
export interface SourceSetup {
  readonly slotName: string;
  readonly publicationName: string;
  /** False when the user named an existing publication: teardown must keep it. */
  readonly publicationCreatedByMirror: boolean;
}

export interface MirrorRuntime {
  readonly mirror: string;
  readonly phase: MirrorPhase;
  readonly errorMessage: string | null;
  readonly setup: SourceSetup | null;
  readonly snapshotCompleted: boolean;
  readonly updatedAt: Date;
}

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
  readonly level: LogLevel;
  readonly message: string;
  readonly timestampMs: number;
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
}

export interface LogQuery {
  /** Undefined means every mirror. */
  readonly mirror?: string;
  readonly levels?: readonly LogLevel[];
  readonly beforeId?: bigint;
  readonly afterId?: bigint;
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
  saveSourceSetup(mirror: string, setup: SourceSetup): Promise<void>;
  setSnapshotCompleted(mirror: string, completed: boolean): Promise<void>;

  startBatch(mirror: string, batch: { batchId: bigint; startTime: Date; startLsn: bigint }): Promise<void>;
  finishBatch(
    mirror: string,
    batch: { batchId: bigint; endTime: Date; rowCount: bigint; endLsn: bigint },
  ): Promise<void>;
  /** Removes batches that never became durable (ids above the destination's checkpoint). */
  discardBatchesAfter(mirror: string, batchId: bigint): Promise<void>;
  lastBatchId(mirror: string): Promise<bigint>;
  /** Rows of every finished batch of the mirror. */
  cdcRowCount(mirror: string): Promise<bigint>;
  listBatches(mirror: string, query: BatchQuery): Promise<{ batches: CdcBatch[]; total: number }>;

  appendLog(mirror: string, level: LogLevel, message: string): Promise<void>;

  /**
   * Why the mirror's engine cannot run where the engine itself cannot say it
   * (cluster mode: its pod crash-loops, is OOM-killed, its image cannot be
   * pulled), as the operator last saw it; null clears it.
   */
  setEngineProblem(mirror: string, message: string | null): Promise<void>;
  getEngineProblem(mirror: string): Promise<string | undefined>;
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
}

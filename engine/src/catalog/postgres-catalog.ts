// Catalog on PostgreSQL-compatible SQL. It needs only `query(text, params)`, so
// it runs on a `pg` Pool (cluster mode) and on an embedded engine (standalone).

import { randomUUID } from 'node:crypto';
import type { ErrorKind } from '../errors.ts';
import { type AuditRetention, auditRetentionDefaults } from './audit-retention.ts';
import type {
  AuditEntry,
  AuditQuery,
  BatchBackfill,
  BatchQuery,
  Catalog,
  CdcBatch,
  LogEntry,
  LogLevel,
  LogQuery,
  MirrorPhase,
  MirrorRuntime,
  MirrorStall,
  NewAuditEntry,
  RecordedLeaf,
  SlotHealth,
  SlotHealthReason,
  SnapshotTableProgress,
  SourceSetup,
  TableApplied,
  TableMove,
  TableShape,
  TableState,
  TableStatus,
} from './catalog.ts';
import { type LogRetention, logRetentionDefaults } from './log-retention.ts';
import { migrate } from './migrations.ts';
import { PhaseTransitionError } from './phase-error.ts';
import { phasesLeadingTo } from './phases.ts';
import { TableStateTransitionError, tableStatesLeadingTo } from './table-states.ts';

export interface SqlQueries {
  query<Row>(text: string, params?: unknown[]): Promise<{ rows: Row[] }>;
}

export interface SqlExecutor extends SqlQueries {
  /**
   * One connection of a pool, for a transaction (a `pg` Pool has it). An
   * executor without it is one connection already (the embedded database).
   */
  connect?(): Promise<SqlQueries & { release(): void }>;
}

/**
 * The advisory lock key that serialises catalog migrations: the operator, the
 * api-server and engines all migrate on start, in any order and any number of
 * replicas, and concurrent `CREATE ... IF NOT EXISTS` of one object can fail
 * with a unique violation. Any 64-bit constant of our own.
 */
const migrationLockKey = '7261627574617279';

const migrations: readonly string[] = [
  `CREATE SCHEMA IF NOT EXISTS tributary`,
  `CREATE TABLE IF NOT EXISTS tributary.mirror_runtime (
     mirror text PRIMARY KEY,
     phase text NOT NULL,
     error_message text,
     slot_name text,
     publication_name text,
     publication_created_by_mirror boolean,
     snapshot_completed boolean NOT NULL DEFAULT false,
     updated_at timestamptz NOT NULL DEFAULT now())`,
  `CREATE TABLE IF NOT EXISTS tributary.cdc_batches (
     mirror text NOT NULL,
     batch_id bigint NOT NULL,
     start_time timestamptz NOT NULL,
     end_time timestamptz,
     row_count bigint NOT NULL DEFAULT 0,
     start_lsn numeric(20, 0) NOT NULL,
     end_lsn numeric(20, 0) NOT NULL DEFAULT 0,
     PRIMARY KEY (mirror, batch_id))`,
  `CREATE TABLE IF NOT EXISTS tributary.logs (
     id bigserial PRIMARY KEY,
     mirror text NOT NULL,
     level text NOT NULL,
     message text NOT NULL,
     at_ms bigint NOT NULL)`,
  `CREATE INDEX IF NOT EXISTS logs_mirror_id ON tributary.logs (mirror, id)`,
  `CREATE TABLE IF NOT EXISTS tributary.snapshot_tables (
     mirror text NOT NULL,
     source_table text NOT NULL,
     destination_table text NOT NULL,
     start_time timestamptz NOT NULL,
     partitions_total integer NOT NULL,
     partitions_completed integer NOT NULL DEFAULT 0,
     rows_synced bigint NOT NULL DEFAULT 0,
     total_partition_ms bigint NOT NULL DEFAULT 0,
     fetch_completed boolean NOT NULL DEFAULT false,
     consolidate_completed boolean NOT NULL DEFAULT false,
     PRIMARY KEY (mirror, source_table))`,
  `ALTER TABLE tributary.snapshot_tables ADD COLUMN IF NOT EXISTS cdc_start_lsn numeric(20, 0) NOT NULL DEFAULT 0`,
  // The online backfills' progress as of each batch (Catalog.recordBatchBackfill).
  `ALTER TABLE tributary.cdc_batches ADD COLUMN IF NOT EXISTS backfill jsonb`,
  `CREATE TABLE IF NOT EXISTS tributary.engine_problems (
     mirror text PRIMARY KEY,
     message text NOT NULL,
     seen_at timestamptz NOT NULL DEFAULT now())`,
  // 0 is the mirror of that name that exists now (or was dropped last); the
  // entries of earlier mirrors of the name are numbered 1, 2, … in drop order.
  `ALTER TABLE tributary.logs ADD COLUMN IF NOT EXISTS incarnation integer NOT NULL DEFAULT 0`,
  `ALTER TABLE tributary.mirror_runtime ADD COLUMN IF NOT EXISTS retrying_error text`,
  `ALTER TABLE tributary.mirror_runtime ADD COLUMN IF NOT EXISTS retrying_since timestamptz`,
  // Null on rows written before slot ownership was recorded: those mirrors
  // created their slot (they refused none), so null reads as created.
  `ALTER TABLE tributary.mirror_runtime ADD COLUMN IF NOT EXISTS slot_created_by_mirror boolean`,
  `ALTER TABLE tributary.mirror_runtime ADD COLUMN IF NOT EXISTS slot_database text`,
  `ALTER TABLE tributary.mirror_runtime ADD COLUMN IF NOT EXISTS slot_plugin text`,
  `ALTER TABLE tributary.mirror_runtime ADD COLUMN IF NOT EXISTS slot_created_at_lsn text`,
  `CREATE TABLE IF NOT EXISTS tributary.installation (
     singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
     id text NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS tributary.owned_tables (
     mirror text NOT NULL,
     destination_table text NOT NULL,
     PRIMARY KEY (mirror, destination_table))`,
  // Identical consecutive entries are one row: how often, and when last.
  `ALTER TABLE tributary.logs ADD COLUMN IF NOT EXISTS repeat_count integer NOT NULL DEFAULT 1`,
  `ALTER TABLE tributary.logs ADD COLUMN IF NOT EXISTS last_at_ms bigint`,
  `ALTER TABLE tributary.mirror_runtime ADD COLUMN IF NOT EXISTS stalled_step text`,
  `ALTER TABLE tributary.mirror_runtime ADD COLUMN IF NOT EXISTS stalled_since timestamptz`,
  `ALTER TABLE tributary.mirror_runtime ADD COLUMN IF NOT EXISTS lag_since timestamptz`,
  `CREATE TABLE IF NOT EXISTS tributary.slot_health (
     mirror text PRIMARY KEY,
     slot_name text NOT NULL,
     checked_at timestamptz NOT NULL,
     healthy boolean,
     reason text NOT NULL,
     message text NOT NULL,
     found boolean NOT NULL,
     active boolean,
     wal_status text,
     retained_wal_bytes numeric(20, 0),
     unconfirmed_bytes numeric(20, 0),
     safe_wal_size_bytes numeric(20, 0),
     invalidation_reason text,
     conflicting boolean)`,
  // One row per table a mirror tracks (table-states.ts writes `state`; the
  // batch writer adds to the counters in the statement that finishes a batch).
  `CREATE TABLE IF NOT EXISTS tributary.mirror_tables (
     mirror text NOT NULL,
     source_table text NOT NULL,
     destination_table text NOT NULL,
     state text NOT NULL,
     state_since timestamptz NOT NULL DEFAULT now(),
     inserts bigint NOT NULL DEFAULT 0,
     updates bigint NOT NULL DEFAULT 0,
     deletes bigint NOT NULL DEFAULT 0,
     last_lsn numeric(20, 0) NOT NULL DEFAULT 0,
     last_commit_time timestamptz,
     error_kind text,
     error_message text,
     error_remedy text,
     behind_lsn numeric(20, 0),
     PRIMARY KEY (mirror, source_table))`,
  // The spec's last resync request per table that the engine acted on (resyncTables).
  `ALTER TABLE tributary.mirror_tables ADD COLUMN IF NOT EXISTS resync_token text`,
  // The shape each table's destination follows (TableShape), written by schema evolution and setup.
  `CREATE TABLE IF NOT EXISTS tributary.table_shapes (
     mirror text NOT NULL,
     source_table text NOT NULL,
     shape jsonb NOT NULL,
     PRIMARY KEY (mirror, source_table))`,
  // The leaf partitions whose rows each partitioned table's destination holds (RecordedLeaf).
  `CREATE TABLE IF NOT EXISTS tributary.partition_leaves (
     mirror text NOT NULL,
     source_table text NOT NULL,
     leaves jsonb NOT NULL,
     PRIMARY KEY (mirror, source_table))`,
  // The API's audit trail (Catalog.appendAudit), written by the facade.
  `CREATE TABLE IF NOT EXISTS tributary.audit_log (
     id bigserial PRIMARY KEY,
     at timestamptz NOT NULL,
     user_name text NOT NULL,
     role text NOT NULL,
     action text NOT NULL,
     route text NOT NULL,
     object text,
     detail text,
     client_address text NOT NULL,
     status integer NOT NULL)`,
  `CREATE INDEX IF NOT EXISTS audit_log_at ON tributary.audit_log (at)`,
  `CREATE INDEX IF NOT EXISTS audit_log_user ON tributary.audit_log (user_name, id)`,
];

interface RuntimeRow {
  mirror: string;
  phase: MirrorPhase;
  error_message: string | null;
  retrying_error: string | null;
  retrying_since: Date | null;
  stalled_step: string | null;
  stalled_since: Date | null;
  lag_since: Date | string | null;
  slot_name: string | null;
  publication_name: string | null;
  publication_created_by_mirror: boolean | null;
  slot_created_by_mirror: boolean | null;
  slot_database: string | null;
  slot_plugin: string | null;
  slot_created_at_lsn: string | null;
  snapshot_completed: boolean;
  updated_at: Date;
}

interface BatchRow {
  batch_id: string;
  start_time: Date;
  end_time: Date | null;
  row_count: string;
  start_lsn: string;
  end_lsn: string;
}

interface TableRow {
  source_table: string;
  destination_table: string;
  state: TableState;
  state_since: Date;
  inserts: string;
  updates: string;
  deletes: string;
  last_lsn: string;
  last_commit_time: Date | null;
  error_kind: string | null;
  error_message: string | null;
  error_remedy: string | null;
  behind_lsn: string | null;
  resync_token: string | null;
}

interface LogRow {
  id: string;
  mirror: string;
  incarnation: number;
  level: LogLevel;
  message: string;
  at_ms: string;
  repeat_count: number;
  last_at_ms: string | null;
}

interface AuditRow {
  id: string;
  at: Date | string;
  user_name: string;
  role: string;
  action: string;
  route: string;
  object: string | null;
  detail: string | null;
  client_address: string;
  status: number;
}

interface SnapshotRow {
  source_table: string;
  destination_table: string;
  start_time: Date;
  partitions_total: number;
  partitions_completed: number;
  rows_synced: string;
  total_partition_ms: string;
  fetch_completed: boolean;
  consolidate_completed: boolean;
  cdc_start_lsn: string;
}

export interface PostgresCatalogOptions {
  /** How many log entries of a mirror are kept, and how long (log-retention.ts; defaults there). */
  readonly logRetention?: LogRetention;
  /** How many audit entries are kept, and how long (audit-retention.ts; defaults there). */
  readonly auditRetention?: AuditRetention;
}

const dayMs = 86_400_000;

export class PostgresCatalog implements Catalog {
  readonly #sql: SqlExecutor;
  readonly #logRetention: LogRetention;
  readonly #auditRetention: AuditRetention;

  constructor(sql: SqlExecutor, options: PostgresCatalogOptions = {}) {
    this.#sql = sql;
    this.#logRetention = options.logRetention ?? logRetentionDefaults;
    this.#auditRetention = options.auditRetention ?? auditRetentionDefaults;
  }

  /**
   * Creates or upgrades the catalog's tables: idempotent, safe from several
   * processes at once, one query when already up to date (migrations.ts).
   */
  async migrate(): Promise<void> {
    await migrate(this.#sql, { schema: 'tributary', statements: migrations, lockKey: migrationLockKey });
  }

  async listUnterminatedMirrors(): Promise<string[]> {
    const { rows } = await this.#sql.query<{ mirror: string }>(
      `SELECT mirror FROM tributary.mirror_runtime WHERE phase <> 'terminated' ORDER BY mirror`,
    );
    return rows.map((row) => row.mirror);
  }

  async getRuntime(mirror: string): Promise<MirrorRuntime | undefined> {
    const { rows } = await this.#sql.query<RuntimeRow>(
      `SELECT * FROM tributary.mirror_runtime WHERE mirror = $1`,
      [mirror],
    );
    const row = rows[0];
    if (!row) return undefined;
    const setup =
      row.slot_name && row.publication_name
        ? {
            slotName: row.slot_name,
            publicationName: row.publication_name,
            publicationCreatedByMirror: row.publication_created_by_mirror === true,
            slotCreatedByMirror: row.slot_created_by_mirror !== false,
            slotIdentity:
              row.slot_database && row.slot_plugin && row.slot_created_at_lsn
                ? {
                    database: row.slot_database,
                    plugin: row.slot_plugin,
                    createdAtLsn: row.slot_created_at_lsn,
                  }
                : null,
          }
        : null;
    return {
      mirror: row.mirror,
      phase: row.phase,
      errorMessage: row.error_message,
      retryingError: row.retrying_error,
      retryingSince: row.retrying_since,
      stall:
        row.stalled_step !== null && row.stalled_since !== null
          ? { step: row.stalled_step, since: row.stalled_since }
          : null,
      lagSince: row.lag_since === null ? null : new Date(row.lag_since),
      setup,
      snapshotCompleted: row.snapshot_completed,
      updatedAt: row.updated_at,
    };
  }

  async transition(mirror: string, phase: MirrorPhase, errorMessage: string | null = null): Promise<void> {
    const from = phasesLeadingTo(phase);
    // Each statement is conditional on the current phase, so two writers cannot
    // both make a move the table forbids.
    const updated = await this.#sql.query<{ mirror: string }>(
      `UPDATE tributary.mirror_runtime SET phase = $2, error_message = $3, updated_at = now(),
         -- Re-created after a drop: forget what the old mirror had set up.
         slot_name = CASE WHEN phase = 'terminated' THEN NULL ELSE slot_name END,
         publication_name = CASE WHEN phase = 'terminated' THEN NULL ELSE publication_name END,
         publication_created_by_mirror = CASE WHEN phase = 'terminated' THEN NULL ELSE publication_created_by_mirror END,
         slot_created_by_mirror = CASE WHEN phase = 'terminated' THEN NULL ELSE slot_created_by_mirror END,
         slot_database = CASE WHEN phase = 'terminated' THEN NULL ELSE slot_database END,
         slot_plugin = CASE WHEN phase = 'terminated' THEN NULL ELSE slot_plugin END,
         slot_created_at_lsn = CASE WHEN phase = 'terminated' THEN NULL ELSE slot_created_at_lsn END,
         snapshot_completed = CASE WHEN phase = 'terminated' THEN false ELSE snapshot_completed END
       WHERE mirror = $1 AND phase = ANY($4::text[])
       RETURNING mirror`,
      [mirror, phase, errorMessage, from.filter((origin) => origin !== 'new')],
    );
    if (updated.rows.length > 0) return;
    const rows = from.includes('new')
      ? (
          await this.#sql.query<{ mirror: string }>(
            `INSERT INTO tributary.mirror_runtime (mirror, phase, error_message) VALUES ($1, $2, $3)
             ON CONFLICT (mirror) DO NOTHING RETURNING mirror`,
            [mirror, phase, errorMessage],
          )
        ).rows
      : [];
    if (rows.length > 0) return;
    // Distinguish "no row and new not allowed" from "row in the wrong phase".
    const current = await this.getRuntime(mirror);
    throw new PhaseTransitionError(mirror, current?.phase ?? 'new', phase);
  }

  async startNewIncarnation(mirror: string): Promise<boolean> {
    // One statement, so a concurrent reader sees either the dropped mirror or
    // the new one, never a mix.
    const { rows } = await this.#sql.query<{ mirror: string }>(
      `WITH dropped AS (
         DELETE FROM tributary.mirror_runtime WHERE mirror = $1 AND phase = 'terminated' RETURNING mirror),
       archived AS (
         UPDATE tributary.logs SET incarnation = (
             SELECT coalesce(max(incarnation), 0) + 1 FROM tributary.logs WHERE mirror = $1)
         WHERE mirror = $1 AND incarnation = 0 AND EXISTS (SELECT 1 FROM dropped) RETURNING id),
       batches AS (
         DELETE FROM tributary.cdc_batches WHERE mirror = $1 AND EXISTS (SELECT 1 FROM dropped)
         RETURNING batch_id),
       snapshot AS (
         DELETE FROM tributary.snapshot_tables WHERE mirror = $1 AND EXISTS (SELECT 1 FROM dropped)
         RETURNING source_table),
       tables AS (
         DELETE FROM tributary.mirror_tables WHERE mirror = $1 AND EXISTS (SELECT 1 FROM dropped)
         RETURNING source_table),
       shapes AS (
         DELETE FROM tributary.table_shapes WHERE mirror = $1 AND EXISTS (SELECT 1 FROM dropped)
         RETURNING source_table),
       leaves AS (
         DELETE FROM tributary.partition_leaves WHERE mirror = $1 AND EXISTS (SELECT 1 FROM dropped)
         RETURNING source_table)
       SELECT mirror FROM dropped`,
      [mirror],
    );
    return rows.length > 0;
  }

  async setRetryingError(mirror: string, message: string | null): Promise<void> {
    if (message === null) {
      await this.#sql.query(
        `UPDATE tributary.mirror_runtime SET retrying_error = NULL, retrying_since = NULL WHERE mirror = $1`,
        [mirror],
      );
      return;
    }
    // A mirror whose very first run cannot reach its source has no runtime row
    // yet; it is in setup (new → setup is always allowed), and its fault must show.
    await this.#sql.query(
      `INSERT INTO tributary.mirror_runtime (mirror, phase, retrying_error, retrying_since)
       VALUES ($1, 'setup', $2, now())
       ON CONFLICT (mirror) DO UPDATE SET retrying_error = EXCLUDED.retrying_error,
         retrying_since = coalesce(tributary.mirror_runtime.retrying_since, now())`,
      [mirror, message],
    );
  }

  async setStall(mirror: string, stall: MirrorStall | null): Promise<void> {
    await this.#sql.query(
      `UPDATE tributary.mirror_runtime SET stalled_step = $2, stalled_since = $3 WHERE mirror = $1`,
      [mirror, stall?.step ?? null, stall?.since ?? null],
    );
  }

  async setLagSince(mirror: string, since: Date | null): Promise<void> {
    await this.#sql.query(`UPDATE tributary.mirror_runtime SET lag_since = $2 WHERE mirror = $1`, [
      mirror,
      since,
    ]);
  }

  async saveSourceSetup(mirror: string, setup: SourceSetup): Promise<void> {
    await this.#sql.query(
      `UPDATE tributary.mirror_runtime SET slot_name = $2, publication_name = $3,
         publication_created_by_mirror = $4, slot_created_by_mirror = $5, slot_database = $6,
         slot_plugin = $7, slot_created_at_lsn = $8, updated_at = now() WHERE mirror = $1`,
      [
        mirror,
        setup.slotName,
        setup.publicationName,
        setup.publicationCreatedByMirror,
        setup.slotCreatedByMirror,
        setup.slotIdentity?.database ?? null,
        setup.slotIdentity?.plugin ?? null,
        setup.slotIdentity?.createdAtLsn ?? null,
      ],
    );
  }

  async installationId(): Promise<string> {
    // Two processes migrating at once both try; the first row wins and both read it.
    await this.#sql.query(
      `INSERT INTO tributary.installation (id) VALUES ($1) ON CONFLICT (singleton) DO NOTHING`,
      [randomUUID()],
    );
    const { rows } = await this.#sql.query<{ id: string }>(`SELECT id FROM tributary.installation`);
    const id = rows[0]?.id;
    if (!id) throw new Error('catalog: installation id is missing');
    return id;
  }

  async recordOwnedTables(mirror: string, destinationTables: readonly string[]): Promise<void> {
    for (const table of destinationTables) {
      await this.#sql.query(
        `INSERT INTO tributary.owned_tables (mirror, destination_table) VALUES ($1, $2)
         ON CONFLICT DO NOTHING`,
        [mirror, table],
      );
    }
  }

  async listOwnedTables(mirror: string): Promise<string[]> {
    const { rows } = await this.#sql.query<{ destination_table: string }>(
      `SELECT destination_table FROM tributary.owned_tables WHERE mirror = $1 ORDER BY destination_table`,
      [mirror],
    );
    return rows.map((row) => row.destination_table);
  }

  async setSnapshotCompleted(mirror: string, completed: boolean): Promise<void> {
    await this.#sql.query(
      `UPDATE tributary.mirror_runtime SET snapshot_completed = $2, updated_at = now() WHERE mirror = $1`,
      [mirror, completed],
    );
  }

  async startBatch(
    mirror: string,
    batch: { batchId: bigint; startTime: Date; startLsn: bigint },
  ): Promise<void> {
    await this.#sql.query(
      `INSERT INTO tributary.cdc_batches (mirror, batch_id, start_time, start_lsn) VALUES ($1, $2, $3, $4)
       ON CONFLICT (mirror, batch_id) DO UPDATE SET start_time = EXCLUDED.start_time,
         start_lsn = EXCLUDED.start_lsn, end_time = NULL, row_count = 0, end_lsn = 0`,
      [mirror, batch.batchId.toString(), batch.startTime, batch.startLsn.toString()],
    );
  }

  async finishBatch(
    mirror: string,
    batch: {
      batchId: bigint;
      endTime: Date;
      rowCount: bigint;
      endLsn: bigint;
      tables?: readonly TableApplied[] | undefined;
    },
  ): Promise<void> {
    const params: unknown[] = [
      mirror,
      batch.batchId.toString(),
      batch.endTime,
      batch.rowCount.toString(),
      batch.endLsn.toString(),
    ];
    const tables = batch.tables ?? [];
    if (tables.length === 0) {
      await this.#sql.query(
        `UPDATE tributary.cdc_batches SET end_time = $3, row_count = $4, end_lsn = $5
         WHERE mirror = $1 AND batch_id = $2`,
        params,
      );
      return;
    }
    // One statement: the batch and its tables' counters are durable together,
    // so a status never counts a batch the catalog has not finished (nor the reverse).
    const column = (value: (table: TableApplied) => string) => tables.map(value);
    await this.#sql.query(
      `WITH batch AS (
         UPDATE tributary.cdc_batches SET end_time = $3, row_count = $4, end_lsn = $5
         WHERE mirror = $1 AND batch_id = $2 RETURNING batch_id),
       applied AS (
         SELECT * FROM unnest($6::text[], $7::bigint[], $8::bigint[], $9::bigint[], $10::numeric[],
           $11::bigint[]) AS a(source_table, inserts, updates, deletes, last_lsn, commit_micros))
       UPDATE tributary.mirror_tables t SET inserts = t.inserts + a.inserts,
         updates = t.updates + a.updates, deletes = t.deletes + a.deletes,
         last_commit_time = CASE WHEN a.last_lsn >= t.last_lsn
           THEN timestamptz 'epoch' + a.commit_micros * interval '1 microsecond'
           ELSE t.last_commit_time END,
         last_lsn = greatest(t.last_lsn, a.last_lsn)
       FROM applied a WHERE t.mirror = $1 AND t.source_table = a.source_table`,
      [
        ...params,
        column((table) => table.sourceTable),
        column((table) => table.inserts.toString()),
        column((table) => table.updates.toString()),
        column((table) => table.deletes.toString()),
        column((table) => table.lastLsn.toString()),
        column((table) => table.lastCommitTimeMicros.toString()),
      ],
    );
  }

  async recordBatchBackfill(mirror: string, batchId: bigint, backfill: BatchBackfill): Promise<void> {
    await this.#sql.query(
      `UPDATE tributary.cdc_batches SET backfill = $3::jsonb WHERE mirror = $1 AND batch_id = $2`,
      [mirror, batchId.toString(), JSON.stringify(backfill)],
    );
  }

  async batchBackfill(mirror: string, batchId: bigint): Promise<BatchBackfill | undefined> {
    const { rows } = await this.#sql.query<{ backfill: BatchBackfill | string | null }>(
      `SELECT backfill FROM tributary.cdc_batches WHERE mirror = $1 AND batch_id = $2`,
      [mirror, batchId.toString()],
    );
    const stored = rows[0]?.backfill;
    if (stored === null || stored === undefined) return undefined;
    return typeof stored === 'string' ? (JSON.parse(stored) as BatchBackfill) : stored;
  }

  async discardBatchesAfter(mirror: string, batchId: bigint): Promise<void> {
    await this.#sql.query(`DELETE FROM tributary.cdc_batches WHERE mirror = $1 AND batch_id > $2`, [
      mirror,
      batchId.toString(),
    ]);
  }

  async lastBatchId(mirror: string): Promise<bigint> {
    const { rows } = await this.#sql.query<{ last: string | null }>(
      `SELECT max(batch_id)::text AS last FROM tributary.cdc_batches WHERE mirror = $1`,
      [mirror],
    );
    return BigInt(rows[0]?.last ?? '0');
  }

  async cdcRowCount(mirror: string): Promise<bigint> {
    const { rows } = await this.#sql.query<{ total: string }>(
      `SELECT coalesce(sum(row_count), 0)::text AS total FROM tributary.cdc_batches WHERE mirror = $1 AND end_time IS NOT NULL`,
      [mirror],
    );
    return BigInt(rows[0]?.total ?? '0');
  }

  async listBatches(mirror: string, query: BatchQuery): Promise<{ batches: CdcBatch[]; total: number }> {
    const params: unknown[] = [mirror];
    let where = 'mirror = $1';
    if (query.beforeId !== undefined) {
      params.push(query.beforeId.toString());
      where += ` AND batch_id < $${params.length}`;
    }
    if (query.afterId !== undefined) {
      params.push(query.afterId.toString());
      where += ` AND batch_id > $${params.length}`;
    }
    if (query.finishedOnly) where += ' AND end_time IS NOT NULL';
    const order = query.ascending ? 'ASC' : 'DESC';
    const limit = query.limit > 0 ? ` LIMIT ${Math.floor(query.limit)}` : '';
    const [{ rows }, count] = await Promise.all([
      this.#sql.query<BatchRow>(
        // Ordered by the qualified column: a bare `batch_id` would name the
        // text output column and sort 9 after 14.
        `SELECT b.batch_id::text, b.start_time, b.end_time, b.row_count::text, b.start_lsn::text,
           b.end_lsn::text
         FROM tributary.cdc_batches b WHERE ${where} ORDER BY b.batch_id ${order}${limit}`,
        params,
      ),
      this.#sql.query<{ total: string }>(
        `SELECT count(*)::text AS total FROM tributary.cdc_batches WHERE mirror = $1`,
        [mirror],
      ),
    ]);
    return {
      batches: rows.map((row) => ({
        batchId: BigInt(row.batch_id),
        startTime: row.start_time,
        endTime: row.end_time,
        rowCount: BigInt(row.row_count),
        startLsn: BigInt(row.start_lsn),
        endLsn: BigInt(row.end_lsn),
      })),
      total: Number(count.rows[0]?.total ?? 0),
    };
  }

  async appendLog(mirror: string, level: LogLevel, message: string): Promise<void> {
    // One statement: fold into the newest entry of the mirror's current log
    // when it says the same, insert otherwise. A fault that repeats (an
    // engine restarted by its kubelet, a check every few seconds) then costs
    // one row however long it lasts.
    const { rows } = await this.#sql.query<{ inserted: boolean }>(
      `WITH newest AS (
         SELECT id, level, message FROM tributary.logs
         WHERE mirror = $1 AND incarnation = 0 ORDER BY id DESC LIMIT 1),
       folded AS (
         UPDATE tributary.logs l SET repeat_count = l.repeat_count + 1, last_at_ms = $4
         FROM newest WHERE l.id = newest.id AND newest.level = $2 AND newest.message = $3
         RETURNING l.id),
       inserted AS (
         INSERT INTO tributary.logs (mirror, level, message, at_ms)
         SELECT $1, $2, $3, $4 WHERE NOT EXISTS (SELECT 1 FROM folded)
         RETURNING id)
       SELECT EXISTS (SELECT 1 FROM inserted) AS inserted`,
      [mirror, level, message, Date.now()],
    );
    if (rows[0]?.inserted) await this.#pruneLogs(mirror);
  }

  /** Drops the mirror's entries beyond the retention, the oldest first (all incarnations of the name). */
  async #pruneLogs(mirror: string): Promise<void> {
    const { maxEntries, maxAgeDays } = this.#logRetention;
    const oldestKeptMs = maxAgeDays > 0 ? Date.now() - maxAgeDays * dayMs : 0;
    await this.#sql.query(
      `DELETE FROM tributary.logs WHERE mirror = $1 AND (
         id <= (SELECT id FROM tributary.logs WHERE mirror = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)
         OR coalesce(last_at_ms, at_ms) < $3)`,
      [mirror, Math.floor(maxEntries), oldestKeptMs],
    );
  }

  async appendAudit(entry: NewAuditEntry): Promise<void> {
    await this.#sql.query(
      `INSERT INTO tributary.audit_log (at, user_name, role, action, route, object, detail, client_address, status)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        entry.at,
        entry.user,
        entry.role,
        entry.action,
        entry.route,
        entry.object,
        entry.detail,
        entry.clientAddress,
        entry.status,
      ],
    );
    const { maxEntries, maxAgeDays } = this.#auditRetention;
    const oldestKept = new Date(maxAgeDays > 0 ? Date.now() - maxAgeDays * dayMs : 0);
    await this.#sql.query(
      `DELETE FROM tributary.audit_log WHERE
         id <= (SELECT id FROM tributary.audit_log ORDER BY id DESC OFFSET $1 LIMIT 1) OR at < $2`,
      [Math.floor(maxEntries), oldestKept],
    );
  }

  async listAudit(query: AuditQuery): Promise<{ entries: AuditEntry[]; total: number }> {
    const params: unknown[] = [];
    let where = '';
    if (query.user !== undefined) {
      params.push(query.user);
      where = 'WHERE user_name = $1';
    }
    const count = await this.#sql.query<{ total: string }>(
      `SELECT count(*)::text AS total FROM tributary.audit_log ${where}`,
      params,
    );
    const total = Number(count.rows[0]?.total ?? 0);
    if (query.limit <= 0) return { entries: [], total };
    const { rows } = await this.#sql.query<AuditRow>(
      `SELECT a.id::text, a.at, a.user_name, a.role, a.action, a.route, a.object, a.detail, a.client_address,
         a.status FROM tributary.audit_log a ${where}
       ORDER BY a.id DESC LIMIT ${Math.floor(query.limit)} OFFSET ${Math.max(0, Math.floor(query.offset))}`,
      params,
    );
    return {
      entries: rows.map((row) => ({
        id: BigInt(row.id),
        at: new Date(row.at),
        user: row.user_name,
        role: row.role,
        action: row.action,
        route: row.route,
        object: row.object,
        detail: row.detail,
        clientAddress: row.client_address,
        status: row.status,
      })),
      total,
    };
  }

  async setEngineProblem(mirror: string, message: string | null): Promise<void> {
    if (message === null) {
      await this.#sql.query(`DELETE FROM tributary.engine_problems WHERE mirror = $1`, [mirror]);
      return;
    }
    await this.#sql.query(
      `INSERT INTO tributary.engine_problems (mirror, message) VALUES ($1, $2)
       ON CONFLICT (mirror) DO UPDATE SET message = EXCLUDED.message, seen_at = now()`,
      [mirror, message],
    );
  }

  async getEngineProblem(mirror: string): Promise<string | undefined> {
    const { rows } = await this.#sql.query<{ message: string }>(
      `SELECT message FROM tributary.engine_problems WHERE mirror = $1`,
      [mirror],
    );
    return rows[0]?.message;
  }

  async recordSlotHealth(mirror: string, health: SlotHealth): Promise<void> {
    const reading = health.reading;
    const text = (value: bigint | null | undefined) => (value == null ? null : value.toString());
    await this.#sql.query(
      `INSERT INTO tributary.slot_health (mirror, slot_name, checked_at, healthy, reason, message, found, active,
         wal_status, retained_wal_bytes, unconfirmed_bytes, safe_wal_size_bytes, invalidation_reason, conflicting)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
       ON CONFLICT (mirror) DO UPDATE SET slot_name = EXCLUDED.slot_name, checked_at = EXCLUDED.checked_at,
         healthy = EXCLUDED.healthy, reason = EXCLUDED.reason, message = EXCLUDED.message, found = EXCLUDED.found,
         active = EXCLUDED.active, wal_status = EXCLUDED.wal_status, retained_wal_bytes = EXCLUDED.retained_wal_bytes,
         unconfirmed_bytes = EXCLUDED.unconfirmed_bytes, safe_wal_size_bytes = EXCLUDED.safe_wal_size_bytes,
         invalidation_reason = EXCLUDED.invalidation_reason, conflicting = EXCLUDED.conflicting`,
      [
        mirror,
        health.slotName,
        health.checkedAt,
        health.healthy,
        health.reason,
        health.message,
        reading !== null,
        reading?.active ?? null,
        reading?.walStatus ?? null,
        text(reading?.retainedWalBytes),
        text(reading?.unconfirmedBytes),
        text(reading?.safeWalSizeBytes),
        reading?.invalidationReason ?? null,
        reading?.conflicting ?? null,
      ],
    );
  }

  async getSlotHealth(mirror: string): Promise<SlotHealth | undefined> {
    const { rows } = await this.#sql.query<{
      slot_name: string;
      checked_at: Date | string;
      healthy: boolean | null;
      reason: string;
      message: string;
      found: boolean;
      active: boolean | null;
      wal_status: string | null;
      retained_wal_bytes: string | null;
      unconfirmed_bytes: string | null;
      safe_wal_size_bytes: string | null;
      invalidation_reason: string | null;
      conflicting: boolean | null;
    }>(
      `SELECT slot_name, checked_at, healthy, reason, message, found, active, wal_status,
              retained_wal_bytes::text, unconfirmed_bytes::text, safe_wal_size_bytes::text,
              invalidation_reason, conflicting
       FROM tributary.slot_health WHERE mirror = $1`,
      [mirror],
    );
    const row = rows[0];
    if (!row) return undefined;
    const bytes = (value: string | null) => (value === null ? null : BigInt(value));
    return {
      slotName: row.slot_name,
      checkedAt: new Date(row.checked_at),
      healthy: row.healthy,
      reason: row.reason as SlotHealthReason,
      message: row.message,
      reading: row.found
        ? {
            active: row.active ?? false,
            walStatus: row.wal_status,
            retainedWalBytes: bytes(row.retained_wal_bytes),
            unconfirmedBytes: bytes(row.unconfirmed_bytes),
            safeWalSizeBytes: bytes(row.safe_wal_size_bytes),
            invalidationReason: row.invalidation_reason,
            conflicting: row.conflicting,
          }
        : null,
    };
  }

  async keepSlotHealthOf(mirrors: readonly string[]): Promise<void> {
    await this.#sql.query(`DELETE FROM tributary.slot_health WHERE mirror <> ALL($1::text[])`, [
      [...mirrors],
    ]);
  }

  async listLogs(query: LogQuery): Promise<{ entries: LogEntry[]; total: number }> {
    const params: unknown[] = [];
    const conditions: string[] = [];
    if (query.mirror !== undefined) {
      params.push(query.mirror);
      conditions.push(`mirror = $${params.length}`);
      params.push(query.incarnation ?? 0);
      conditions.push(`incarnation = $${params.length}`);
    }
    if (query.levels && query.levels.length > 0) {
      params.push(query.levels);
      conditions.push(`level = ANY($${params.length})`);
    }
    if (query.beforeId !== undefined) {
      params.push(query.beforeId.toString());
      conditions.push(`id < $${params.length}`);
    }
    if (query.afterId !== undefined) {
      params.push(query.afterId.toString());
      conditions.push(`id > $${params.length}`);
    }
    const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
    const count = await this.#sql.query<{ total: string }>(
      `SELECT count(*)::text AS total FROM tributary.logs ${where}`,
      params,
    );
    const total = Number(count.rows[0]?.total ?? 0);
    if (query.limit <= 0) return { entries: [], total };
    const { rows } = await this.#sql.query<LogRow>(
      // Qualified for the same reason as in listBatches: `id` alone is the text output column.
      `SELECT l.id::text, l.mirror, l.incarnation, l.level, l.message, l.at_ms::text, l.repeat_count,
         l.last_at_ms::text FROM tributary.logs l ${where}
       ORDER BY l.id DESC LIMIT ${Math.floor(query.limit)} OFFSET ${Math.max(0, Math.floor(query.offset))}`,
      params,
    );
    return {
      entries: rows.map((row) => ({
        id: BigInt(row.id),
        mirror: row.mirror,
        incarnation: row.incarnation,
        level: row.level,
        message: row.message,
        timestampMs: Number(row.at_ms),
        repeatCount: row.repeat_count,
        lastTimestampMs: Number(row.last_at_ms ?? row.at_ms),
      })),
      total,
    };
  }

  async resetSnapshotProgress(mirror: string): Promise<void> {
    await this.#sql.query(`DELETE FROM tributary.snapshot_tables WHERE mirror = $1`, [mirror]);
  }

  async startSnapshotTable(
    mirror: string,
    table: { sourceTable: string; destinationTable: string; partitionsTotal: number; cdcStartLsn: bigint },
  ): Promise<void> {
    await this.#sql.query(
      `INSERT INTO tributary.snapshot_tables
         (mirror, source_table, destination_table, start_time, partitions_total, cdc_start_lsn)
       VALUES ($1, $2, $3, now(), $4, $5)
       ON CONFLICT (mirror, source_table) DO UPDATE SET destination_table = EXCLUDED.destination_table,
         start_time = EXCLUDED.start_time, partitions_total = EXCLUDED.partitions_total,
         partitions_completed = 0, rows_synced = 0, total_partition_ms = 0,
         fetch_completed = false, consolidate_completed = false, cdc_start_lsn = EXCLUDED.cdc_start_lsn`,
      [
        mirror,
        table.sourceTable,
        table.destinationTable,
        table.partitionsTotal,
        table.cdcStartLsn.toString(),
      ],
    );
  }

  async removeSnapshotTables(mirror: string, sourceTables: readonly string[]): Promise<void> {
    await this.#sql.query(
      `WITH leaves AS (
         DELETE FROM tributary.partition_leaves WHERE mirror = $1 AND source_table = ANY($2))
       DELETE FROM tributary.snapshot_tables WHERE mirror = $1 AND source_table = ANY($2)`,
      [mirror, [...sourceTables]],
    );
  }

  async recordSnapshotPartition(
    mirror: string,
    sourceTable: string,
    rowCount: bigint,
    elapsedMs: number,
  ): Promise<void> {
    await this.#sql.query(
      `UPDATE tributary.snapshot_tables SET partitions_completed = partitions_completed + 1,
         rows_synced = rows_synced + $3, total_partition_ms = total_partition_ms + $4
       WHERE mirror = $1 AND source_table = $2`,
      [mirror, sourceTable, rowCount.toString(), Math.round(elapsedMs)],
    );
  }

  async finishSnapshotTable(mirror: string, sourceTable: string): Promise<void> {
    await this.#sql.query(
      `UPDATE tributary.snapshot_tables SET fetch_completed = true, consolidate_completed = true
       WHERE mirror = $1 AND source_table = $2`,
      [mirror, sourceTable],
    );
  }

  async listSnapshotProgress(mirror: string): Promise<SnapshotTableProgress[]> {
    const { rows } = await this.#sql.query<SnapshotRow>(
      `SELECT source_table, destination_table, start_time, partitions_total, partitions_completed,
         rows_synced::text, total_partition_ms::text, fetch_completed, consolidate_completed,
         cdc_start_lsn::text
       FROM tributary.snapshot_tables WHERE mirror = $1 ORDER BY source_table`,
      [mirror],
    );
    return rows.map((row) => ({
      sourceTable: row.source_table,
      destinationTable: row.destination_table,
      startTime: row.start_time,
      partitionsTotal: row.partitions_total,
      partitionsCompleted: row.partitions_completed,
      rowsSynced: BigInt(row.rows_synced),
      totalPartitionMs: BigInt(row.total_partition_ms),
      fetchCompleted: row.fetch_completed,
      consolidateCompleted: row.consolidate_completed,
      cdcStartLsn: BigInt(row.cdc_start_lsn),
    }));
  }

  async listTables(mirror: string): Promise<TableStatus[]> {
    const { rows } = await this.#sql.query<TableRow>(
      `SELECT source_table, destination_table, state, state_since, inserts::text, updates::text,
         deletes::text, last_lsn::text, last_commit_time, error_kind, error_message, error_remedy,
         behind_lsn::text, resync_token
       FROM tributary.mirror_tables WHERE mirror = $1 ORDER BY source_table`,
      [mirror],
    );
    return rows.map((row) => ({
      sourceTable: row.source_table,
      destinationTable: row.destination_table,
      state: row.state,
      stateSince: row.state_since,
      inserts: BigInt(row.inserts),
      updates: BigInt(row.updates),
      deletes: BigInt(row.deletes),
      lastLsn: BigInt(row.last_lsn),
      lastCommitTime: row.last_commit_time,
      problem:
        row.error_kind !== null && row.error_message !== null
          ? {
              kind: row.error_kind as ErrorKind,
              message: row.error_message,
              remedy: row.error_remedy ?? '',
            }
          : null,
      behindLsn: row.behind_lsn === null ? null : BigInt(row.behind_lsn),
      resyncToken: row.resync_token,
    }));
  }

  async listTableShapes(mirror: string): Promise<Map<string, TableShape>> {
    const { rows } = await this.#sql.query<{ source_table: string; shape: TableShape }>(
      `SELECT source_table, shape FROM tributary.table_shapes WHERE mirror = $1`,
      [mirror],
    );
    return new Map(rows.map((row) => [row.source_table, row.shape]));
  }

  async recordTableShape(mirror: string, sourceTable: string, shape: TableShape): Promise<void> {
    await this.#sql.query(
      `INSERT INTO tributary.table_shapes (mirror, source_table, shape) VALUES ($1, $2, $3::jsonb)
       ON CONFLICT (mirror, source_table) DO UPDATE SET shape = EXCLUDED.shape`,
      [mirror, sourceTable, JSON.stringify(shape)],
    );
  }

  async listPartitionLeaves(mirror: string): Promise<Map<string, readonly RecordedLeaf[]>> {
    const { rows } = await this.#sql.query<{ source_table: string; leaves: RecordedLeaf[] }>(
      `SELECT source_table, leaves FROM tributary.partition_leaves WHERE mirror = $1`,
      [mirror],
    );
    return new Map(rows.map((row) => [row.source_table, row.leaves]));
  }

  async recordPartitionLeaves(
    mirror: string,
    sourceTable: string,
    leaves: readonly RecordedLeaf[],
  ): Promise<void> {
    await this.#sql.query(
      `INSERT INTO tributary.partition_leaves (mirror, source_table, leaves) VALUES ($1, $2, $3::jsonb)
       ON CONFLICT (mirror, source_table) DO UPDATE SET leaves = EXCLUDED.leaves`,
      [mirror, sourceTable, JSON.stringify(leaves)],
    );
  }

  async recordResyncToken(mirror: string, sourceTable: string, token: string): Promise<void> {
    await this.#sql.query(
      `UPDATE tributary.mirror_tables SET resync_token = $3 WHERE mirror = $1 AND source_table = $2`,
      [mirror, sourceTable, token],
    );
  }

  async transitionTable(mirror: string, move: TableMove): Promise<void> {
    const from = tableStatesLeadingTo(move.to);
    const values = [
      mirror,
      move.sourceTable,
      move.destinationTable,
      move.to,
      move.problem?.kind ?? null,
      move.problem?.message ?? null,
      move.problem?.remedy ?? null,
      move.behindLsn?.toString() ?? null,
    ];
    // Conditional on the state held, as Catalog.transition is on the phase.
    const updated = await this.#sql.query<{ source_table: string }>(
      `UPDATE tributary.mirror_tables SET destination_table = $3, state = $4, state_since = now(),
         error_kind = $5, error_message = $6, error_remedy = $7, behind_lsn = $8
       WHERE mirror = $1 AND source_table = $2 AND state = ANY($9::text[])
       RETURNING source_table`,
      [...values, from.filter((origin) => origin !== 'new')],
    );
    if (updated.rows.length > 0) return;
    const inserted = from.includes('new')
      ? (
          await this.#sql.query<{ source_table: string }>(
            `INSERT INTO tributary.mirror_tables (mirror, source_table, destination_table, state,
               error_kind, error_message, error_remedy, behind_lsn)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (mirror, source_table) DO NOTHING RETURNING source_table`,
            values,
          )
        ).rows
      : [];
    if (inserted.length > 0) return;
    const current = (await this.listTables(mirror)).find((table) => table.sourceTable === move.sourceTable);
    throw new TableStateTransitionError(mirror, move.sourceTable, current?.state ?? 'new', move.to);
  }
}

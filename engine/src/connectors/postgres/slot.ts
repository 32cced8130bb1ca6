// The publication and logical replication slot a mirror reads from.
import type pg from 'pg';
import { EngineError, isEngineError } from '../../errors.ts';
import type { TableName } from '../../resources/mirror.ts';
import { classifyPgError, type SlotState } from '../classify.ts';
import { parseLsn } from './lsn.ts';
import { quoteIdent, quoteTable } from './sql.ts';

/** Slot names allow only lower-case letters, digits and underscores (63 bytes). */
export function defaultSlotName(mirror: string): string {
  return `tributary_${mirror.toLowerCase().replace(/[^a-z0-9_]/g, '_')}`.slice(0, 63);
}

export function defaultPublicationName(mirror: string): string {
  return `tributary_${mirror.toLowerCase().replace(/[^a-z0-9_]/g, '_')}`.slice(0, 63);
}

export interface CreatedSlot {
  readonly slotName: string;
  /** The LSN from which changes are streamed; the exported snapshot sees everything before it. */
  readonly consistentPoint: bigint;
  /** Valid only while the replication connection that created the slot stays open and idle. */
  readonly snapshotName: string | null;
}

/** Creates the publication when absent and adds any mapped table it lacks. */
export async function ensurePublication(
  client: pg.Client,
  publicationName: string,
  tables: readonly TableName[],
): Promise<void> {
  try {
    const existing = await client.query(`SELECT 1 FROM pg_publication WHERE pubname = $1`, [publicationName]);
    if (existing.rowCount === 0) {
      await client.query(
        `CREATE PUBLICATION ${quoteIdent(publicationName)} FOR TABLE ${tables.map(quoteTable).join(', ')}`,
      );
      return;
    }
    const published = await client.query<{ schemaname: string; tablename: string }>(
      `SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1`,
      [publicationName],
    );
    const present = new Set(published.rows.map((row) => `${row.schemaname}\u0000${row.tablename}`));
    const missing = tables.filter((table) => !present.has(`${table.schema}\u0000${table.table}`));
    if (missing.length > 0) {
      await client.query(
        `ALTER PUBLICATION ${quoteIdent(publicationName)} ADD TABLE ${missing.map(quoteTable).join(', ')}`,
      );
    }
  } catch (error) {
    throw classifyPgError(error, `source: create publication ${publicationName}`, 'source_setup');
  }
}

/** Removes tables that are no longer mapped from a publication the mirror created. */
export async function removeFromPublication(
  client: pg.Client,
  publicationName: string,
  tables: readonly TableName[],
): Promise<void> {
  if (tables.length === 0) return;
  try {
    const published = await client.query<{ schemaname: string; tablename: string }>(
      `SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1`,
      [publicationName],
    );
    const present = new Set(published.rows.map((row) => `${row.schemaname}\u0000${row.tablename}`));
    const toDrop = tables.filter((table) => present.has(`${table.schema}\u0000${table.table}`));
    if (toDrop.length > 0) {
      await client.query(
        `ALTER PUBLICATION ${quoteIdent(publicationName)} DROP TABLE ${toDrop.map(quoteTable).join(', ')}`,
      );
    }
  } catch (error) {
    throw classifyPgError(error, `source: remove tables from publication ${publicationName}`, 'source_setup');
  }
}

/**
 * The slot's WAL status and, on PostgreSQL 17+, its invalidation reason; read
 * through to_jsonb so one query serves servers without that column.
 */
export async function readSlotState(client: pg.Client, slotName: string): Promise<SlotState | undefined> {
  try {
    const result = await client.query<{ wal_status: string | null; invalidation_reason: string | null }>(
      `SELECT s.wal_status, to_jsonb(s) ->> 'invalidation_reason' AS invalidation_reason
       FROM pg_replication_slots s WHERE s.slot_name = $1`,
      [slotName],
    );
    const row = result.rows[0];
    return row ? { walStatus: row.wal_status, invalidationReason: row.invalidation_reason } : undefined;
  } catch (error) {
    throw classifyPgError(error, `source: read replication slot ${slotName}`, 'source_setup');
  }
}

export async function slotExists(client: pg.Client, slotName: string): Promise<boolean> {
  const result = await client.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name = $1`, [slotName]);
  return (result.rowCount ?? 0) > 0;
}

/**
 * Creates a pgoutput slot over a replication connection. With `exportSnapshot`,
 * the returned snapshot shows the database exactly as of `consistentPoint`.
 */
export async function createSlot(
  replicationClient: pg.Client,
  slotName: string,
  exportSnapshot: boolean,
  options: { temporary?: boolean } = {},
): Promise<CreatedSlot> {
  const snapshotMode = exportSnapshot ? 'EXPORT_SNAPSHOT' : 'NOEXPORT_SNAPSHOT';
  // A temporary slot disappears with its connection: used only for its snapshot.
  const temporary = options.temporary ? ' TEMPORARY' : '';
  try {
    const result = await replicationClient.query<{
      slot_name: string;
      consistent_point: string;
      snapshot_name: string | null;
    }>(`CREATE_REPLICATION_SLOT ${quoteIdent(slotName)}${temporary} LOGICAL pgoutput ${snapshotMode}`);
    const row = result.rows[0];
    if (!row)
      throw new EngineError('internal', `source: CREATE_REPLICATION_SLOT ${slotName} returned no row`);
    return {
      slotName: row.slot_name,
      consistentPoint: parseLsn(row.consistent_point),
      snapshotName: row.snapshot_name,
    };
  } catch (error) {
    throw classifyPgError(error, `source: create replication slot ${slotName}`, 'source_setup');
  }
}

/** Drops the slot, first ending a walsender still attached to it (a stale engine). */
export async function dropSlot(client: pg.Client, slotName: string): Promise<void> {
  try {
    for (let attempt = 0; attempt < 50; attempt++) {
      const slot = await client.query<{ active_pid: number | null }>(
        `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`,
        [slotName],
      );
      const row = slot.rows[0];
      if (!row) return;
      if (row.active_pid === null) {
        await client.query(`SELECT pg_drop_replication_slot($1)`, [slotName]);
        return;
      }
      await client.query(`SELECT pg_terminate_backend($1)`, [row.active_pid]);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new EngineError(
      'source_setup',
      `source: replication slot ${slotName} stayed in use; stop its reader`,
    );
  } catch (error) {
    const classified = classifyPgError(error, `source: drop replication slot ${slotName}`, 'source_setup');
    // Gone between the look and the drop (another teardown): what a drop wants.
    if (classified.kind === 'slot_invalidated' && !isEngineError(error)) return;
    throw classified;
  }
}

export async function dropPublication(client: pg.Client, publicationName: string): Promise<void> {
  try {
    await client.query(`DROP PUBLICATION IF EXISTS ${quoteIdent(publicationName)}`);
  } catch (error) {
    throw classifyPgError(error, `source: drop publication ${publicationName}`, 'source_setup');
  }
}

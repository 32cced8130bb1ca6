// The publication and logical replication slot a mirror reads from.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { EngineError, isEngineError } from '../../../errors.ts';
import { parseLsn } from '../../../model/lsn.ts';
import type { TableName } from '../../../resources/mirror.ts';
import { classifyPgError, type SlotState } from '../../classify/index.ts';
import type { CreatedSlot, PublicationFiltering, PublishedTable, SlotRow } from '../../source.ts';
import { quoteIdent, quoteTable } from '../driver/sql.ts';

export type { CreatedSlot, SlotRow } from '../../source.ts';

/**
 * The default slot (and publication) name of a mirror of one installation:
 * `tributary_<mirror>_<hash>`, the mirror's name folded to what slot names allow
 * (lower-case letters, digits, `_`; 63 bytes) and cut to fit, plus 8 hex digits
 * of a hash of the installation id and the exact mirror name. Two installations
 * on one source, mirrors whose names differ only in `-`/`_`, and names cut at 63
 * characters thus get different names. Mirrors set up before this rule keep the
 * name their catalog recorded.
 */
export function defaultSlotName(mirror: string, installationId: string): string {
  const hash = createHash('sha256').update(`${installationId}\u0000${mirror}`).digest('hex').slice(0, 8);
  const folded = mirror.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  return `tributary_${folded.slice(0, 63 - 'tributary_'.length - 9)}_${hash}`;
}

export function defaultPublicationName(mirror: string, installationId: string): string {
  return defaultSlotName(mirror, installationId);
}

export async function readSlot(client: pg.Client, slotName: string): Promise<SlotRow | undefined> {
  try {
    const result = await client.query<{
      database: string | null;
      plugin: string | null;
      confirmed_flush_lsn: string | null;
      active_pid: number | null;
    }>(
      `SELECT database, plugin, confirmed_flush_lsn::text, active_pid FROM pg_replication_slots WHERE slot_name = $1`,
      [slotName],
    );
    const row = result.rows[0];
    if (!row) return undefined;
    return {
      database: row.database,
      plugin: row.plugin,
      confirmedFlushLsn: row.confirmed_flush_lsn ? parseLsn(row.confirmed_flush_lsn) : null,
      activePid: row.active_pid,
    };
  } catch (error) {
    throw classifyPgError(error, `source: read replication slot ${slotName}`, 'source_setup');
  }
}

export async function publicationExists(client: pg.Client, publicationName: string): Promise<boolean> {
  try {
    const result = await client.query(`SELECT 1 FROM pg_publication WHERE pubname = $1`, [publicationName]);
    return (result.rowCount ?? 0) > 0;
  } catch (error) {
    throw classifyPgError(error, `source: read publication ${publicationName}`, 'source_setup');
  }
}

/**
 * The tables a publication names itself (FOR TABLE), not what it publishes:
 * pg_publication_tables lists a partitioned table's partitions instead of it
 * when the publication does not publish via the root.
 */
async function publicationMembers(client: pg.Client, publicationName: string): Promise<Set<string>> {
  const members = await client.query<{ schemaname: string; tablename: string }>(
    `SELECT n.nspname AS schemaname, c.relname AS tablename
     FROM pg_publication p JOIN pg_publication_rel pr ON pr.prpubid = p.oid
     JOIN pg_class c ON c.oid = pr.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE p.pubname = $1`,
    [publicationName],
  );
  return new Set(members.rows.map((row) => `${row.schemaname}\u0000${row.tablename}`));
}

/** Row filters and column lists in publications (FOR TABLE t (columns) WHERE (filter)). */
export const publicationFiltersServerVersionNum = 150_000;

/** A table as FOR TABLE names it: with its column list and row filter where the server has them. */
function publishedTableClause(table: PublishedTable, filters: boolean): string {
  if (!filters) return quoteTable(table.name);
  const columns = table.columns ? ` (${table.columns.map(quoteIdent).join(', ')})` : '';
  // The filter is one expression (rowFilterSchema), kept inside its parentheses.
  const where = table.rowFilter !== undefined ? ` WHERE (${table.rowFilter})` : '';
  return `${quoteTable(table.name)}${columns}${where}`;
}

/**
 * Whether the publication's row filters and column lists differ from the
 * wanted ones. A filter's text cannot be compared with the server's parsed
 * form, so a table with a filter is always set again: setting it is cheap and
 * takes effect from the commit on.
 */
async function publicationDefinitionsDiffer(
  client: pg.Client,
  publicationName: string,
  tables: readonly PublishedTable[],
): Promise<boolean> {
  if (tables.some((table) => table.rowFilter !== undefined)) return true;
  const current = await client.query<{
    schemaname: string;
    tablename: string;
    filtered: boolean;
    columns: string[] | null;
  }>(
    `SELECT n.nspname AS schemaname, c.relname AS tablename, pr.prqual IS NOT NULL AS filtered,
            (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
             WHERE a.attrelid = pr.prrelid AND a.attnum = ANY (pr.prattrs)) AS columns
     FROM pg_publication p JOIN pg_publication_rel pr ON pr.prpubid = p.oid
     JOIN pg_class c ON c.oid = pr.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE p.pubname = $1`,
    [publicationName],
  );
  const wanted = new Map(tables.map((table) => [`${table.name.schema}\u0000${table.name.table}`, table]));
  return current.rows.some((row) => {
    const table = wanted.get(`${row.schemaname}\u0000${row.tablename}`);
    if (!table) return false;
    if (row.filtered) return true;
    const wantedColumns = table.columns ? [...table.columns].join('\u0000') : null;
    const presentColumns = row.columns ? row.columns.join('\u0000') : null;
    if (wantedColumns === null || presentColumns === null) return wantedColumns !== presentColumns;
    // Compared as sets: the list is kept in attribute order by the server.
    return (
      [...(table.columns ?? [])].sort().join('\u0000') !== [...(row.columns ?? [])].sort().join('\u0000')
    );
  });
}

/**
 * Creates the publication when absent and adds any mapped table it lacks.
 * It publishes via the partition root, so the changes of a partitioned table's
 * partitions (attached, created or moved between later too) arrive under the
 * partitioned table's name, resolved by the server as of each change; a
 * publication a mirror created before it did so is switched over here. On
 * PostgreSQL 15+ each table carries its row filter and column list, and a
 * publication whose filters or lists differ (an edited mirror) is set to the
 * mapped tables as they are now (`SET TABLE`): changes committed after that
 * are published by the new definition, earlier ones by the old.
 */
export async function ensurePublication(
  client: pg.Client,
  publicationName: string,
  tables: readonly PublishedTable[],
): Promise<PublicationFiltering> {
  try {
    const existing = await client.query<{ pubviaroot: boolean | null; version: number }>(
      `SELECT (SELECT pubviaroot FROM pg_publication WHERE pubname = $1) AS pubviaroot,
              current_setting('server_version_num')::int AS version`,
      [publicationName],
    );
    const found = existing.rows[0];
    const filters = (found?.version ?? 0) >= publicationFiltersServerVersionNum;
    const clauses = (list: readonly PublishedTable[]) =>
      list.map((table) => publishedTableClause(table, filters)).join(', ');
    if (found?.pubviaroot === null || found?.pubviaroot === undefined) {
      await client.query(
        `CREATE PUBLICATION ${quoteIdent(publicationName)} FOR TABLE ${clauses(tables)} WITH (publish_via_partition_root = true)`,
      );
      return { rowFilters: filters };
    }
    if (!found.pubviaroot) {
      await client.query(
        `ALTER PUBLICATION ${quoteIdent(publicationName)} SET (publish_via_partition_root = true)`,
      );
    }
    if (filters && (await publicationDefinitionsDiffer(client, publicationName, tables))) {
      await client.query(`ALTER PUBLICATION ${quoteIdent(publicationName)} SET TABLE ${clauses(tables)}`);
      return { rowFilters: true };
    }
    const present = await publicationMembers(client, publicationName);
    const missing = tables.filter((table) => !present.has(`${table.name.schema}\u0000${table.name.table}`));
    if (missing.length > 0) {
      await client.query(`ALTER PUBLICATION ${quoteIdent(publicationName)} ADD TABLE ${clauses(missing)}`);
    }
    return { rowFilters: filters };
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
    const present = await publicationMembers(client, publicationName);
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
 * The slot's WAL status (13+), whether it conflicted with recovery (16+) and
 * its invalidation reason (17+); the newer columns are read through to_jsonb
 * so one query serves every supported server.
 */
export async function readSlotState(client: pg.Client, slotName: string): Promise<SlotState | undefined> {
  try {
    const result = await client.query<{
      wal_status: string | null;
      invalidation_reason: string | null;
      conflicting: boolean | null;
    }>(
      `SELECT s.wal_status, to_jsonb(s) ->> 'invalidation_reason' AS invalidation_reason,
              (to_jsonb(s) ->> 'conflicting')::boolean AS conflicting
       FROM pg_replication_slots s WHERE s.slot_name = $1`,
      [slotName],
    );
    const row = result.rows[0];
    return row
      ? {
          walStatus: row.wal_status,
          invalidationReason: row.invalidation_reason,
          conflicting: row.conflicting,
        }
      : undefined;
  } catch (error) {
    throw classifyPgError(error, `source: read replication slot ${slotName}`, 'source_setup');
  }
}

/**
 * Whether the slot is a failover slot: null on servers before PostgreSQL 17
 * (no such column, read through to_jsonb) and when the slot does not exist.
 */
export async function readSlotFailover(client: pg.Client, slotName: string): Promise<boolean | null> {
  try {
    const result = await client.query<{ failover: boolean | null }>(
      `SELECT (to_jsonb(s) ->> 'failover')::boolean AS failover FROM pg_replication_slots s WHERE s.slot_name = $1`,
      [slotName],
    );
    return result.rows[0]?.failover ?? null;
  } catch (error) {
    throw classifyPgError(error, `source: read replication slot ${slotName}`, 'source_setup');
  }
}

/** Turns the failover property of an existing slot on or off (PostgreSQL 17+, a replication connection). */
export async function setSlotFailover(
  replicationClient: pg.Client,
  slotName: string,
  failover: boolean,
): Promise<void> {
  try {
    await replicationClient.query(`ALTER_REPLICATION_SLOT ${quoteIdent(slotName)} (FAILOVER ${failover})`);
  } catch (error) {
    throw classifyPgError(error, `source: alter replication slot ${slotName}`, 'source_setup');
  }
}

export async function slotExists(client: pg.Client, slotName: string): Promise<boolean> {
  try {
    const result = await client.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name = $1`, [slotName]);
    return (result.rowCount ?? 0) > 0;
  } catch (error) {
    throw classifyPgError(error, `source: read replication slot ${slotName}`, 'source_setup');
  }
}

/**
 * Creates a pgoutput slot over a replication connection. With `exportSnapshot`,
 * the returned snapshot shows the database exactly as of `consistentPoint`.
 * With `failover` (PostgreSQL 17+), standbys that synchronize slots
 * (`sync_replication_slots`) keep a copy, so the slot survives a failover.
 */
export async function createSlot(
  replicationClient: pg.Client,
  slotName: string,
  exportSnapshot: boolean,
  options: { temporary?: boolean; failover?: boolean } = {},
): Promise<CreatedSlot> {
  // A temporary slot disappears with its connection: used only for its snapshot.
  const temporary = options.temporary ? ' TEMPORARY' : '';
  // The option list arrived in PostgreSQL 15 and FAILOVER in 17; the older
  // keyword form (still accepted) serves every supported server otherwise.
  // https://www.postgresql.org/docs/17/protocol-replication.html#PROTOCOL-REPLICATION-CREATE-REPLICATION-SLOT
  const slotOptions = options.failover
    ? `(SNAPSHOT '${exportSnapshot ? 'export' : 'nothing'}', FAILOVER true)`
    : exportSnapshot
      ? 'EXPORT_SNAPSHOT'
      : 'NOEXPORT_SNAPSHOT';
  try {
    const result = await replicationClient.query<{
      slot_name: string;
      consistent_point: string;
      snapshot_name: string | null;
    }>(`CREATE_REPLICATION_SLOT ${quoteIdent(slotName)}${temporary} LOGICAL pgoutput ${slotOptions}`);
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

/**
 * Drops the slot, first ending a walsender still attached to it (a stale
 * engine). Only for a slot the mirror created: callers check ownership.
 */
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

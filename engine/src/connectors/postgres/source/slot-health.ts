// Reads the health of replication slots on one PostgreSQL server in one query:
// how much WAL each slot keeps (the server's WAL position minus restart_lsn),
// how much of it is not yet confirmed, whether a walsender reads it, its
// wal_status and safe_wal_size (13+), and why it was invalidated (conflicting
// 16+, invalidation_reason 17+). pg_replication_slots lists every database's
// slots, so one connection to any database of the server serves every mirror
// whose source is on it (control/slot-health.ts groups them so).
// https://www.postgresql.org/docs/current/view-pg-replication-slots.html
import { parseLsn } from '../../../model/lsn.ts';
import type { RelationalConfig } from '../../../resources/peer.ts';
import { classifyPgError } from '../../classify/index.ts';
import type { SlotReading } from '../../source.ts';
import { connectPostgres } from '../driver/connect.ts';

/** What one read of a server found: the named slots that exist, and where the server's WAL stood. */
export interface ServerSlotReadings {
  /** The server's WAL position the figures are measured from (insert position; on a standby, received). */
  readonly serverWalLsn: bigint;
  /** The slots found, by name; a name asked for and absent here does not exist on the server. */
  readonly slots: ReadonlyMap<string, SlotReading>;
}

interface SlotRow {
  slot_name: string;
  active: boolean;
  wal_status: string | null;
  retained_wal_bytes: string | null;
  unconfirmed_bytes: string | null;
  safe_wal_size: string | null;
  invalidation_reason: string | null;
  conflicting: boolean | null;
  server_wal_lsn: string;
}

// One statement for every supported version: the columns newer than 13 are
// read through to_jsonb (null where the server has none), and a position the
// slot no longer has (restart_lsn of an invalidated slot) gives no figure
// rather than GREATEST's 0, which ignores nulls. On a standby
// (logical slots there are 16+) pg_current_wal_lsn() fails; the received
// position stands for it.
const slotHealthQuery = `
  WITH server AS (
    SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_receive_lsn() ELSE pg_current_wal_lsn() END AS lsn)
  SELECT s.slot_name, s.active, s.wal_status,
         CASE WHEN s.restart_lsn IS NOT NULL
           THEN GREATEST(pg_wal_lsn_diff(server.lsn, s.restart_lsn), 0)::text END AS retained_wal_bytes,
         CASE WHEN s.confirmed_flush_lsn IS NOT NULL
           THEN GREATEST(pg_wal_lsn_diff(server.lsn, s.confirmed_flush_lsn), 0)::text END AS unconfirmed_bytes,
         s.safe_wal_size::text AS safe_wal_size,
         to_jsonb(s) ->> 'invalidation_reason' AS invalidation_reason,
         (to_jsonb(s) ->> 'conflicting')::boolean AS conflicting,
         server.lsn::text AS server_wal_lsn
  FROM server LEFT JOIN pg_replication_slots s ON s.slot_name = ANY($1::text[])`;

const bytes = (text: string | null): bigint | null =>
  text === null ? null : BigInt(text.split('.')[0] ?? '0');

/**
 * Reads the named slots of the server `config` reaches, over one short
 * connection (opened and closed here, so a paused mirror's source holds no
 * connection between reads). Reads only pg_replication_slots and the WAL
 * position, which every user may; fails with a classified EngineError.
 */
export async function readServerSlots(
  config: RelationalConfig,
  slotNames: readonly string[],
  options: { readonly connectTimeoutMs?: number } = {},
): Promise<ServerSlotReadings> {
  const connection = await connectPostgres(config, {
    applicationName: 'tributary-slot-health',
    connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
    side: 'source',
  });
  try {
    const result = await connection.client.query<SlotRow>(slotHealthQuery, [slotNames]);
    const slots = new Map<string, SlotReading>();
    let serverWalLsn = 0n;
    for (const row of result.rows) {
      serverWalLsn = parseLsn(row.server_wal_lsn);
      if (row.slot_name === null) continue;
      slots.set(row.slot_name, {
        active: row.active,
        walStatus: row.wal_status,
        retainedWalBytes: bytes(row.retained_wal_bytes),
        unconfirmedBytes: bytes(row.unconfirmed_bytes),
        safeWalSizeBytes: bytes(row.safe_wal_size),
        invalidationReason: row.invalidation_reason,
        conflicting: row.conflicting,
      });
    }
    return { serverWalLsn, slots };
  } catch (error) {
    throw classifyPgError(
      error,
      `source: read replication slots on ${config.host}:${config.port}`,
      'connection',
    );
  } finally {
    await connection.close().catch(() => {});
  }
}

// Waits until a transaction the stream delivered is visible to this session.
//
// A logical decoding client can receive a transaction before other sessions
// see it: the commit record is flushed, and so may be decoded and sent, before
// the committing backend leaves the proc array (RecordTransactionCommit, then
// ProcArrayEndTransaction, in src/backend/access/transam/xact.c). A catalog
// read made at once on another connection may then still see the table as it
// was before the transaction, e.g. a column the transaction dropped as alive.
//
// pgoutput's Begin message carries the 32-bit xid; pg_visible_in_snapshot
// (PostgreSQL 13+) takes an xid8, so the epoch is the one of the snapshot's
// xmax, one less when the xid is above xmax's low 32 bits (assigned before the
// counter wrapped). https://www.postgresql.org/docs/current/functions-info.html#FUNCTIONS-PG-SNAPSHOT
import type pg from 'pg';

const visibleSql = `
  SELECT pg_visible_in_snapshot(
    ((GREATEST((xmax >> 32) - CASE WHEN $1::bigint > (xmax & 4294967295) THEN 1 ELSE 0 END, 0) << 32) | $1::bigint)::text::xid8,
    snapshot) AS visible
  FROM (SELECT snapshot, pg_snapshot_xmax(snapshot)::text::bigint AS xmax FROM pg_current_snapshot() AS snapshot) AS now`;

/** How often the visibility is asked again while the committing backend finishes. */
const pollMs = 5;

/**
 * Resolves true once transaction `xid` is visible to a statement this
 * session runs next, or false after `timeoutMs` (the read that follows is
 * then the best there is). Visible at once in nearly every case: one query.
 */
export async function awaitTransactionVisible(
  client: pg.Client,
  xid: number,
  timeoutMs = 10_000,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await client.query<{ visible: boolean }>(visibleSql, [xid]);
    if (rows[0]?.visible !== false) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

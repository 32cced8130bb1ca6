// Transactions a killed engine left open. Snowflake keeps the transaction of a
// session that vanished (the process was killed mid-batch) open, with its
// locks, until it has been idle for four hours
// (https://docs.snowflake.com/en/sql-reference/transactions#aborting-transactions);
// the next batch's guard UPDATE would wait on those locks. Every batch's
// transaction is therefore named after its mirror, and before the first batch
// of an engine (and after a failed one) the mirror's transactions held by other
// sessions are aborted. Only one engine writes a mirror at a time, so such a
// transaction is always a dead one.

import type { Row, SnowflakeSession } from './session.ts';
import { snowflakeName } from './sql.ts';

/** The transaction name of a mirror's batches: an unquoted identifier. */
export function transactionName(mirror: string): string {
  return `TRIBUTARY_${snowflakeName(mirror).replace(/[^A-Z0-9_]/g, '_')}`;
}

/**
 * Aborts the mirror's transactions held by other sessions; returns how many,
 * or undefined when the server cannot list transactions (an emulator without
 * the adapter's translations): the batch then goes ahead without the check.
 */
export async function abortDetachedTransactions(
  session: SnowflakeSession,
  mirror: string,
): Promise<number | undefined> {
  const name = transactionName(mirror);
  let own: string;
  let rows: readonly Row[];
  try {
    own = String((await session.execute('SELECT CURRENT_SESSION() AS "SESSION"')).rows[0]?.SESSION ?? '');
    ({ rows } = await session.execute('SHOW TRANSACTIONS', { numbersAsStrings: true }));
  } catch {
    return undefined;
  }
  let aborted = 0;
  for (const row of rows) {
    if (String(row.name) !== name || String(row.session) === own) continue;
    // The id is a number beyond 2^53: read as text (numbersAsStrings), written back as a literal.
    const id = String(row.id);
    if (!/^\d+$/.test(id)) continue;
    await session.execute(`SELECT SYSTEM$ABORT_TRANSACTION(${id}) AS "ABORTED"`);
    aborted++;
  }
  return aborted;
}

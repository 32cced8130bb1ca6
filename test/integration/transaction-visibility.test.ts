// awaitTransactionVisible (engine/src/connectors/postgres/source/transaction-visibility.ts)
// on the run's source server: it waits while a transaction is open and
// resolves once it committed, for the 32-bit xid pgoutput's Begin carries.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { awaitTransactionVisible } from '../../engine/src/connectors/postgres/source/transaction-visibility.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { sourcePostgres } from '../support/testenv.ts';

describe(`awaitTransactionVisible on PostgreSQL ${sourcePostgres.major}`, () => {
  let database: TestDatabase;
  let reader: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase('xact_visible', sourcePostgres);
    reader = new pg.Client(database.config);
    await reader.connect();
  });

  afterAll(async () => {
    await reader?.end();
    await database?.drop();
  });

  it('waits while the transaction is open and resolves once it committed', async () => {
    const writer = database.client;
    await writer.query('BEGIN');
    const { rows } = await writer.query<{ xid: number }>(
      `SELECT (pg_current_xact_id()::text::bigint & 4294967295)::int AS xid`,
    );
    const xid = rows[0]?.xid ?? 0;
    try {
      expect(await awaitTransactionVisible(reader, xid, 200)).toBe(false);
      const waiting = awaitTransactionVisible(reader, xid, 30_000);
      await writer.query('COMMIT');
      expect(await waiting).toBe(true);
    } finally {
      await writer.query('ROLLBACK').catch(() => {});
    }
    // An older transaction than any running is visible at once.
    expect(await awaitTransactionVisible(reader, 3, 0)).toBe(true);
  });
});

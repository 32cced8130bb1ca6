// What a run stopped before its own cleanup (Ctrl-C, a kill, a crash) leaves
// on the PostgreSQL servers, swept at the start of the next run: its
// databases and, in them, its replication slots, which would hold WAL back on
// the shared test server for good, and on the target server its
// subscriptions, whose workers would keep reading the source.
//
// A database is the benchmark's when its name has a prefix of the runs
// (`bench_`, `bigtxn_`); it is left alone while a client session uses it: a
// run in progress, in this checkout or another, keeps its databases
// connected from their creation to their drop. ClickHouse databases and Kafka
// topics a stopped run leaves cost only disk, and are left.
import pg from 'pg';
import { adminClient, dropTestDatabase } from '../../test/support/databases.ts';
import type { PostgresServer } from '../../test/support/testenv.ts';

const benchDatabase = `^(bench|bigtxn)_`;

export interface Swept {
  readonly databases: readonly string[];
  readonly subscriptions: number;
}

/** Drops what stopped runs left on `server`; returns what it dropped. */
export async function sweepLeftovers(server: PostgresServer): Promise<Swept> {
  const admin = adminClient(server, 'postgres');
  await admin.connect();
  let unused: string[];
  try {
    const found = await admin.query<{ datname: string }>(
      `SELECT datname FROM pg_database d
        WHERE datname ~ $1
          AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                           WHERE a.datname = d.datname AND a.backend_type = 'client backend')
        ORDER BY datname`,
      [benchDatabase],
    );
    unused = found.rows.map((row) => row.datname);
  } finally {
    await admin.end();
  }
  let subscriptions = 0;
  for (const name of unused) {
    subscriptions += await dropSubscriptions(server, name);
    await dropTestDatabase(server, name);
  }
  return { databases: unused, subscriptions };
}

/**
 * Drops the subscriptions of database `name`, their slots at the source left
 * to the source's own sweep: a subscription is detached from its slot first,
 * so dropping it needs no connection to a source that may be gone.
 */
async function dropSubscriptions(server: PostgresServer, name: string): Promise<number> {
  const client = adminClient(server, name);
  await client.connect();
  try {
    const found = await client.query<{ subname: string }>(
      `SELECT subname FROM pg_subscription s JOIN pg_database d ON d.oid = s.subdbid WHERE d.datname = $1`,
      [name],
    );
    for (const { subname } of found.rows) {
      const subscription = pg.escapeIdentifier(subname);
      await client.query(`ALTER SUBSCRIPTION ${subscription} DISABLE`);
      await client.query(`ALTER SUBSCRIPTION ${subscription} SET (slot_name = NONE)`);
      await client.query(`DROP SUBSCRIPTION ${subscription}`);
    }
    return found.rowCount ?? 0;
  } finally {
    await client.end();
  }
}

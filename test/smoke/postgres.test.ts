import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgres } from '../support/testenv.ts';

const suffix = randomBytes(4).toString('hex');
const table = `smoke_${suffix}`;
const publication = `smoke_pub_${suffix}`;
const slot = `smoke_slot_${suffix}`;

describe('PostgreSQL test server', () => {
  const admin = new pg.Client({
    host: postgres.host,
    port: postgres.port,
    database: postgres.database,
    ...postgres.superuser,
  });
  const replicator = new pg.Client({
    host: postgres.host,
    port: postgres.port,
    database: postgres.database,
    ...postgres.replicator,
  });

  beforeAll(async () => {
    await admin.connect();
    await replicator.connect();
  });

  afterAll(async () => {
    await admin.query(`SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1`, [
      slot,
    ]);
    await admin.query(`DROP PUBLICATION IF EXISTS ${publication}`);
    await admin.query(`DROP TABLE IF EXISTS ${table}`);
    await replicator.end();
    await admin.end();
  });

  it('runs with logical decoding and enough slots and senders', async () => {
    const settings = await admin.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings WHERE name IN ('wal_level', 'max_replication_slots', 'max_wal_senders')`,
    );
    const byName = Object.fromEntries(settings.rows.map((row) => [row.name, row.setting]));
    expect(byName.wal_level).toBe('logical');
    expect(Number(byName.max_replication_slots)).toBeGreaterThanOrEqual(20);
    expect(Number(byName.max_wal_senders)).toBeGreaterThanOrEqual(20);
  });

  it('has a non-superuser replication role', async () => {
    const role = await admin.query<{ rolsuper: boolean; rolreplication: boolean }>(
      'SELECT rolsuper, rolreplication FROM pg_roles WHERE rolname = $1',
      [postgres.replicator.user],
    );
    expect(role.rows).toEqual([{ rolsuper: false, rolreplication: true }]);
  });

  it('decodes an insert through a pgoutput slot created by the replication role', async () => {
    await admin.query(`CREATE TABLE ${table} (id int PRIMARY KEY, note text)`);
    await admin.query(`CREATE PUBLICATION ${publication} FOR TABLE ${table}`);
    await replicator.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slot]);
    await admin.query(`INSERT INTO ${table} VALUES (1, 'hello')`);

    const changes = await replicator.query<{ data: Buffer }>(
      `SELECT data FROM pg_logical_slot_get_binary_changes($1, NULL, NULL,
         'proto_version', '1', 'publication_names', $2)`,
      [slot, publication],
    );
    // pgoutput message tags: Begin, Relation, Insert, Commit.
    const tags = changes.rows.map((row) => String.fromCharCode(row.data[0] ?? 0));
    expect(tags).toEqual(['B', 'R', 'I', 'C']);
    const insert = changes.rows[2]?.data;
    expect(insert?.toString('latin1')).toContain('hello');
  });
});

// What the mirror's look at partitioned tables reads on the run's source server
// (engine/src/connectors/postgres/source/table-info.ts, pipeline/partition-watch.ts):
// the leaves at every depth with their storage and catalog transactions, and
// whether a new leaf holds rows from before it became a partition.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  leafRowsBeforeAttach,
  partitionLeavesOf,
} from '../../engine/src/connectors/postgres/source/table-info.ts';
import type { PartitionLeaf } from '../../engine/src/connectors/source.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { sourcePostgres } from '../support/testenv.ts';

const tree = { schema: 'public', table: 'tree' };

describe(`partition leaves on PostgreSQL ${sourcePostgres.major}`, () => {
  let database: TestDatabase;
  let client: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase('partition_leaves', sourcePostgres);
    client = database.client;
    await client.query(`
      CREATE TABLE tree (id bigint, k int, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);
      CREATE TABLE tree_low PARTITION OF tree FOR VALUES FROM (0) TO (100);
      CREATE TABLE tree_mid PARTITION OF tree FOR VALUES FROM (100) TO (300) PARTITION BY RANGE (k);
      CREATE TABLE tree_mid_a PARTITION OF tree_mid FOR VALUES FROM (100) TO (200);
      CREATE TABLE tree_rest PARTITION OF tree DEFAULT;
      CREATE TABLE bare (id bigint, k int) PARTITION BY LIST (k);
      CREATE TABLE plain (id bigint PRIMARY KEY);
      INSERT INTO tree SELECT g, g % 200 FROM generate_series(1, 400) g`);
  });

  afterAll(async () => {
    await database?.drop();
  });

  const leavesOf = async (table = tree): Promise<readonly PartitionLeaf[]> =>
    (await partitionLeavesOf(client, [table])).byTable.get(`${table.schema}.${table.table}`) ?? [];
  const currentXid = async (session: pg.Client): Promise<number> =>
    Number(
      (
        await session.query<{ xid: string }>(
          `SELECT (pg_current_xact_id()::text::bigint & 4294967295)::text AS xid`,
        )
      ).rows[0]?.xid,
    );

  it('lists the leaves at every depth, a partitioned table without any, and no plain table', async () => {
    const found = await partitionLeavesOf(client, [
      tree,
      { schema: 'public', table: 'bare' },
      { schema: 'public', table: 'plain' },
      { schema: 'public', table: 'nowhere' },
    ]);
    expect([...found.byTable.keys()]).toEqual(['public.tree', 'public.bare']);
    expect(
      found.byTable
        .get('public.tree')
        ?.map((leaf) => leaf.name.table)
        .sort(),
    ).toEqual(['tree_low', 'tree_mid_a', 'tree_rest']);
    expect(found.byTable.get('public.bare')).toEqual([]);
    expect(found.walLsn).toBeGreaterThan(0n);
  });

  it('gives every leaf new storage written by the TRUNCATE of the whole table, and one leaf by its own', async () => {
    const before = await leavesOf();
    await client.query('BEGIN');
    const xid = await currentXid(client);
    await client.query('TRUNCATE tree');
    await client.query('COMMIT');
    const after = await leavesOf();
    for (const leaf of after) {
      expect(leaf.fileNode).not.toBe(before.find((old) => old.oid === leaf.oid)?.fileNode);
      expect(leaf.classXmin).toBe(xid);
    }
    await client.query('TRUNCATE tree_low');
    const lowOnly = await leavesOf();
    const changed = lowOnly.filter(
      (leaf) => leaf.fileNode !== after.find((old) => old.oid === leaf.oid)?.fileNode,
    );
    expect(changed.map((leaf) => leaf.name.table)).toEqual(['tree_low']);
    expect(changed[0]?.classXmin).not.toBe(xid);
  });

  it('tells a table attached with rows from a partition created, or attached empty, and filled through the table', async () => {
    const leaf = async (name: string) => {
      const found = (await leavesOf()).find((candidate) => candidate.name.table === name);
      if (!found) throw new Error(`no leaf ${name}`);
      return found;
    };
    await client.query(`CREATE TABLE tree_made PARTITION OF tree FOR VALUES FROM (1000) TO (1100)`);
    await client.query(`INSERT INTO tree VALUES (1, 1000), (2, 1001)`);
    expect(await leafRowsBeforeAttach(client, await leaf('tree_made'))).toBe(false);

    await client.query(`CREATE TABLE tree_empty (id bigint NOT NULL, k int NOT NULL)`);
    await client.query(`ALTER TABLE tree ATTACH PARTITION tree_empty FOR VALUES FROM (2000) TO (2100)`);
    await client.query(`INSERT INTO tree VALUES (1, 2000)`);
    expect(await leafRowsBeforeAttach(client, await leaf('tree_empty'))).toBe(false);

    await client.query(`CREATE TABLE tree_full (id bigint NOT NULL, k int NOT NULL)`);
    await client.query(`INSERT INTO tree_full VALUES (1, 3000)`);
    await client.query(`ALTER TABLE tree ATTACH PARTITION tree_full FOR VALUES FROM (3000) TO (3100)`);
    await client.query(`INSERT INTO tree VALUES (2, 3001)`);
    expect(await leafRowsBeforeAttach(client, await leaf('tree_full'))).toBe(true);

    // Made, filled and attached in one transaction: its rows were never published either.
    await client.query(`BEGIN;
      CREATE TABLE tree_once (id bigint NOT NULL, k int NOT NULL);
      INSERT INTO tree_once VALUES (1, 4000);
      ALTER TABLE tree ATTACH PARTITION tree_once FOR VALUES FROM (4000) TO (4100);
      COMMIT`);
    expect(await leafRowsBeforeAttach(client, await leaf('tree_once'))).toBe(true);
  });
});

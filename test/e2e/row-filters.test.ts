// A table mapping's row filter: the initial load reads only matching rows, and
// the changes arrive as a publication's row filter publishes them (an update
// moving a row out of the filter as a delete, into it as an insert), so the
// destination ends equal row by row to the filtered source, under writes. On
// PostgreSQL 15+ the filter and the column list of `exclude` are the
// publication's own (pg_publication_rel prqual, prattrs), so filtered rows and
// excluded columns never leave the source; on 13 and 14 the engine filters
// with the same semantics. An edited filter is brought in line at the next
// start. Into PostgreSQL in-process, into ClickHouse by an engine process,
// and into Kafka in-process (each move's message, then the topics folded by key).
// Run on PostgreSQL 13, 15 and 18 sources.
import { type ClickHouseClient, createClient } from '@clickhouse/client';
import type pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KafkaDestination } from '../../engine/src/connectors/kafka/destination.ts';
import {
  createTopics,
  deleteTopics,
  kafkaClient,
  randomTopic,
  streamConfig,
  TopicCollector,
} from '../integration/kafka-support.ts';
import { clickhouseEngines } from '../support/clickhouse-engines.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness, startMirror } from '../support/mirror-harness.ts';
import { seededIntegers } from '../support/seeded-random.ts';
import { sourcePostgres } from '../support/testenv.ts';

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });

const ordersFilter = `region = 'eu' AND amount >= 10`;
const accountsFilter = 'id % 3 <> 0';
const seedOrders = 2000;
const seedAccounts = 1000;
const regions = ['eu', 'us', 'apac'];

/**
 * `orders` (REPLICA IDENTITY FULL, so its filter may read any column) and
 * `accounts` (default identity: its filter reads the key; `secret` excluded).
 */
async function createTables(client: pg.Client, orders: string, accounts: string): Promise<void> {
  await client.query(`
    CREATE TABLE ${orders} (id bigint PRIMARY KEY, region text NOT NULL, amount int NOT NULL, note text);
    ALTER TABLE ${orders} REPLICA IDENTITY FULL;
    INSERT INTO ${orders} SELECT g, (ARRAY['eu', 'us', 'apac'])[1 + g % 3], g % 20, 'seed ' || g
      FROM generate_series(1, ${seedOrders}) g;
    CREATE TABLE ${accounts} (id bigint PRIMARY KEY, tier int NOT NULL, secret text);
    INSERT INTO ${accounts} SELECT g, g % 7, 'secret ' || g FROM generate_series(1, ${seedAccounts}) g;
    ANALYZE ${orders}; ANALYZE ${accounts}`);
}

/**
 * Random single-row transactions: inserts, updates that move orders in and
 * out of the filter (region, amount) or not (note), key changes of accounts
 * (in and out of `id % 3 <> 0`), deletes.
 */
async function writeChanges(
  client: pg.Client,
  tables: { orders: string; accounts?: string },
  options: { count: number; seed: number; firstId: number },
): Promise<void> {
  const next = seededIntegers(options.seed);
  let nextId = options.firstId;
  const { orders, accounts } = tables;
  for (let index = 0; index < options.count; index++) {
    const id = 1 + next(seedOrders);
    switch (next(accounts ? 8 : 5)) {
      case 0:
        await client.query(`INSERT INTO ${orders} VALUES ($1, $2, $3, $4)`, [
          nextId++,
          regions[next(3)],
          next(20),
          `new ${index}`,
        ]);
        break;
      case 1:
        await client.query(`UPDATE ${orders} SET amount = $2 WHERE id = $1`, [id, next(20)]);
        break;
      case 2:
        await client.query(`UPDATE ${orders} SET region = $2, note = $3 WHERE id = $1`, [
          id,
          regions[next(3)],
          `moved ${index}`,
        ]);
        break;
      case 3:
        await client.query(`UPDATE ${orders} SET note = $2 WHERE id = $1`, [id, `noted ${index}`]);
        break;
      case 4:
        await client.query(`DELETE FROM ${orders} WHERE id = $1`, [id]);
        break;
      case 5:
        await client.query(`INSERT INTO ${accounts} VALUES ($1, $2, 'new secret')`, [nextId++, next(7)]);
        break;
      case 6:
        // A key change: the old key decides whether the row was in, the new one whether it is.
        await client.query(`UPDATE ${accounts} SET id = $2, tier = tier + 1 WHERE id = $1`, [
          1 + next(seedAccounts),
          nextId++,
        ]);
        break;
      default:
        await client.query(`DELETE FROM ${accounts} WHERE id = $1`, [1 + next(seedAccounts)]);
    }
  }
}

/** Rows as compared: every column as text, ordered by id. */
async function rows(client: pg.Client, select: string): Promise<string[][]> {
  const result = await client.query<unknown[]>({ text: select, rowMode: 'array' } as pg.QueryArrayConfig);
  return result.rows.map((row) => row.map((cell) => String(cell)));
}

/** The source's orders the filter takes, as compared. */
const filteredOrders = (client: pg.Client, orders: string) =>
  rows(client, `SELECT id, region, amount, note FROM ${orders} WHERE ${ordersFilter} ORDER BY id`);

/** The source's accounts a filter takes, as compared. */
const filteredAccounts = (client: pg.Client, accounts: string, filter = accountsFilter) =>
  rows(client, `SELECT id, tier FROM ${accounts} WHERE ${filter} ORDER BY id`);

/** Asserts equal row sets, naming at most five rows that differ. */
function expectSameRows(actual: readonly string[][], expected: readonly string[][]): void {
  const keyed = (list: readonly string[][]) =>
    new Map(list.map((row) => [row[0] ?? '', JSON.stringify(row)]));
  const [a, e] = [keyed(actual), keyed(expected)];
  const differences = [...new Set([...a.keys(), ...e.keys()])]
    .filter((key) => a.get(key) !== e.get(key))
    .slice(0, 5)
    .map((key) => ({ key, destination: a.get(key), source: e.get(key) }));
  expect({ rows: actual.length, differences }).toEqual({ rows: expected.length, differences: [] });
}

/** What the mirror's publication holds for a table (15+): its row filter and listed columns. */
async function publicationEntry(
  client: pg.Client,
  table: string,
): Promise<{ rowfilter: string | null; columns: string[] | null }[]> {
  const result = await client.query<{ rowfilter: string | null; columns: string[] | null }>(
    `SELECT pg_get_expr(r.prqual, r.prrelid) AS rowfilter,
            (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
             WHERE a.attrelid = r.prrelid AND a.attnum = ANY (r.prattrs)) AS columns
     FROM pg_publication_rel r WHERE r.prrelid = $1::regclass`,
    [table],
  );
  return result.rows;
}

const publicationFilters = sourcePostgres.major >= 15;

describe('row filters into PostgreSQL', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('rowfilter');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('loads and streams only the filtered rows, moves as deletes and inserts, and follows an edited filter', async () => {
    const { source, destination } = harness;
    const suffix = randomSuffix().replaceAll('-', '_');
    const [orders, accounts] = [`orders_${suffix}`, `accounts_${suffix}`];
    await createTables(source.client, orders, accounts);
    const name = `rowfilter-${suffix.replaceAll('_', '-')}`;
    const table = (t: string) => ({ schema: 'public', table: t });
    const spec = (filter: string) => ({
      name,
      tableMappings: [
        { source: table(orders), destination: table(orders), rowFilter: ordersFilter },
        { source: table(accounts), destination: table(accounts), exclude: ['secret'], rowFilter: filter },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      maxBatchSize: 100,
      snapshotNumRowsPerPartition: 500,
    });
    const expected = {
      orders: () => filteredOrders(source.client, orders),
      accounts: (filter: string) => filteredAccounts(source.client, accounts, filter),
    };
    const actual = {
      orders: () => rows(destination.client, `SELECT id, region, amount, note FROM ${orders} ORDER BY id`),
      accounts: () => rows(destination.client, `SELECT id, tier FROM ${accounts} ORDER BY id`),
    };
    const expectFiltered = async (what: string, filter = accountsFilter) => {
      const same = async () =>
        JSON.stringify(await actual.orders()) === JSON.stringify(await expected.orders()) &&
        JSON.stringify(await actual.accounts()) === JSON.stringify(await expected.accounts(filter));
      await waitFor(same, 60_000, what).catch(() => {});
      expectSameRows(await actual.orders(), await expected.orders());
      expectSameRows(await actual.accounts(), await expected.accounts(filter));
    };

    let mirror = startMirror(harness, spec(accountsFilter));
    try {
      await expectFiltered('the initial load');
      await waitFor(
        async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
        30_000,
        'running',
      );
      // The load read only matching rows.
      const progress = await harness.catalog.listSnapshotProgress(name);
      const loaded = new Map(progress.map((entry) => [entry.sourceTable, entry.rowsSynced]));
      expect(loaded.get(`public.${orders}`)).toBe(BigInt((await expected.orders()).length));
      expect(loaded.get(`public.${accounts}`)).toBe(BigInt((await expected.accounts(accountsFilter)).length));
      // The excluded column is not at the destination.
      const columns = await destination.client.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position`,
        [accounts],
      );
      expect(columns.rows.map((row) => row.column_name)).not.toContain('secret');
      if (publicationFilters) {
        // The publication filters: nothing else leaves the source.
        expect(await publicationEntry(source.client, orders)).toEqual([
          { rowfilter: `((region = 'eu'::text) AND (amount >= 10))`, columns: null },
        ]);
        expect(await publicationEntry(source.client, accounts)).toEqual([
          { rowfilter: '((id % (3)::bigint) <> 0)', columns: ['id', 'tier'] },
        ]);
      }

      await writeChanges(source.client, { orders, accounts }, { count: 400, seed: 11, firstId: 100_000 });
      // One row moved out and back in, in one transaction and in two.
      await source.client.query(`UPDATE ${orders} SET region = 'eu', amount = 15 WHERE id = 7`);
      await source.client.query(`UPDATE ${orders} SET region = 'us' WHERE id = 7`);
      await source.client.query(
        `BEGIN; UPDATE ${orders} SET region = 'eu' WHERE id = 7; UPDATE ${orders} SET amount = 3 WHERE id = 7; UPDATE ${orders} SET amount = 30 WHERE id = 7; COMMIT`,
      );
      await expectFiltered('the changes under writes');
      expect((await actual.orders()).some((row) => row[0] === '7')).toBe(true);

      // An edited filter: in line at the next start, for the changes committed after it.
      expect(await mirror.stop()).toBe('stopped');
      const edited = `${accountsFilter} AND id < 200003`;
      mirror = startMirror(harness, spec(edited));
      await waitFor(
        async () =>
          !publicationFilters ||
          (await publicationEntry(source.client, accounts))[0]?.rowfilter?.includes('200003') === true,
        30_000,
        'the edited filter in the publication',
      );
      await waitFor(
        async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
        30_000,
        'running again',
      );
      // Both match the old filter; only the first the edited one.
      await source.client.query(`INSERT INTO ${accounts} VALUES (200005, 1, 's')`);
      await source.client.query(`INSERT INTO ${accounts} VALUES (200002, 6, 's')`);
      await waitFor(
        async () => (await actual.accounts()).some((row) => row[0] === '200002'),
        30_000,
        'the row the edited filter takes',
      );
      expect((await actual.accounts()).some((row) => row[0] === '200005')).toBe(false);
      if (publicationFilters) {
        expect(await publicationEntry(source.client, accounts)).toEqual([
          { rowfilter: '(((id % (3)::bigint) <> 0) AND (id < 200003))', columns: ['id', 'tier'] },
        ]);
      }
    } finally {
      expect(await mirror.stop()).toBe('stopped');
    }
  });
});

describe('a table added with a row filter', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('rowfilter_add');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('is loaded online with only its matching rows, under writes, and ends equal to the filtered source', async () => {
    const { source, destination } = harness;
    const suffix = randomSuffix().replaceAll('-', '_');
    const [orders, accounts] = [`orders_${suffix}`, `accounts_${suffix}`];
    await createTables(source.client, orders, accounts);
    const name = `rowfilter-add-${suffix.replaceAll('_', '-')}`;
    const ordersMapping = {
      source: { schema: 'public', table: orders },
      destination: { schema: 'public', table: orders },
      rowFilter: ordersFilter,
    };
    const spec = { name, tableMappings: [ordersMapping], doInitialSnapshot: true, idleTimeoutSeconds: 1 };
    const first = startMirror(harness, spec);
    try {
      await waitFor(
        async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
        60_000,
        'running',
      );
    } finally {
      expect(await first.stop()).toBe('stopped');
    }
    const second = startMirror(harness, {
      ...spec,
      tableMappings: [
        ordersMapping,
        {
          source: { schema: 'public', table: accounts },
          destination: { schema: 'public', table: accounts },
          exclude: ['secret'],
          rowFilter: accountsFilter,
        },
      ],
    });
    const expected = () => filteredAccounts(source.client, accounts);
    const actual = () =>
      rows(destination.client, `SELECT id, tier FROM ${accounts} ORDER BY id`).catch(() => []);
    try {
      await writeChanges(source.client, { orders, accounts }, { count: 300, seed: 3, firstId: 100_000 });
      await waitFor(
        async () =>
          (await harness.catalog.listTables(name)).find((table) => table.sourceTable === `public.${accounts}`)
            ?.state === 'streaming',
        120_000,
        'the added table loaded',
      );
      await waitFor(
        async () => JSON.stringify(await actual()) === JSON.stringify(await expected()),
        60_000,
        'the added table to match',
      ).catch(() => {});
      expectSameRows(await actual(), await expected());
    } finally {
      expect(await second.stop()).toBe('stopped');
    }
  });
});

describe('an edited row filter the source refuses', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('rowfilter_edit');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('fails the mirror at its start with PostgreSQL’s reason and leaves the publication and the table’s updates as they were', async () => {
    const { source } = harness;
    const suffix = randomSuffix().replaceAll('-', '_');
    const [orders, accounts] = [`orders_${suffix}`, `accounts_${suffix}`];
    await createTables(source.client, orders, accounts);
    const name = `rowfilter-edit-${suffix.replaceAll('_', '-')}`;
    const spec = (filter: string) => ({
      name,
      tableMappings: [
        {
          source: { schema: 'public', table: accounts },
          destination: { schema: 'public', table: accounts },
          rowFilter: filter,
        },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    });
    const first = startMirror(harness, spec(accountsFilter));
    try {
      await waitFor(
        async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
        60_000,
        'running',
      );
    } finally {
      expect(await first.stop()).toBe('stopped');
    }
    // tier is not in the replica identity (the key, id).
    const edited = startMirror(harness, spec('tier > 1'));
    const failure = await edited.done.then(
      () => undefined,
      (error: unknown) => error as Error & { kind?: string },
    );
    await edited.stop().catch(() => {});
    expect(failure?.kind).toBe('config');
    expect(failure?.message).toContain(
      'Column used in the publication WHERE expression is not part of the replica identity.',
    );
    if (publicationFilters) {
      expect(await publicationEntry(source.client, accounts)).toEqual([
        { rowfilter: '((id % (3)::bigint) <> 0)', columns: null },
      ]);
    }
    // The source table still takes updates and deletes.
    await source.client.query(`UPDATE ${accounts} SET tier = tier + 1 WHERE id = 1`);
    await source.client.query(`DELETE FROM ${accounts} WHERE id = 2`);
  });
});

describe('row filters into ClickHouse', () => {
  let harness: Harness;
  let admin: ClickHouseClient;
  const engine = clickhouseEngines[clickhouseEngines.length - 1];
  if (!engine) throw new Error('no ClickHouse engine');
  const database = `tributary_rowfilter_${randomSuffix().replaceAll('-', '_')}`;
  const config = engine.config(database);

  beforeAll(async () => {
    harness = await createHarness('rowfilter_ch');
    admin = createClient({
      url: `http://${config.host}:${config.httpPort}`,
      username: config.user,
      password: config.password,
    });
    await admin.command({ query: `CREATE DATABASE ${database}` });
  });

  afterAll(async () => {
    await admin?.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => {});
    await admin?.close();
    await harness?.close();
  });

  it(`ends equal to the filtered source row by row (${engine.name})`, { timeout: 240_000 }, async () => {
    const { source } = harness;
    const suffix = randomSuffix().replaceAll('-', '_');
    const [orders, accounts] = [`orders_${suffix}`, `accounts_${suffix}`];
    await createTables(source.client, orders, accounts);
    const name = `rowfilter-ch-${suffix.replaceAll('_', '-')}`;
    const configPath = writeEngineConfig(
      harness,
      {
        name,
        sourcePeer: 'source',
        destinationPeer: 'analytics',
        tableMappings: [
          {
            source: { schema: 'public', table: orders },
            destination: { schema: database, table: orders },
            rowFilter: ordersFilter,
          },
        ],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        maxBatchSize: 100,
      },
      { destination: { name: 'analytics', kind: 'analytics', config } },
    );
    const expected = () => filteredOrders(source.client, orders);
    const actual = async () => {
      const result = await admin
        .query({
          query: `SELECT toString(id) AS id, region, toString(amount) AS amount, note FROM ${database}.${orders} FINAL
                  WHERE _tributary_is_deleted = 0 ORDER BY id`,
          format: 'JSONEachRow',
        })
        .catch(() => undefined);
      const found =
        (await result?.json<{ id: string; region: string; amount: string; note: string }>()) ?? [];
      return found
        .map((row) => [row.id, row.region, row.amount, String(row.note)])
        .sort((a, b) => Number(a[0]) - Number(b[0]));
    };
    const same = async () => JSON.stringify(await actual()) === JSON.stringify(await expected());
    const process = startEngine(name, configPath);
    try {
      await waitFor(same, 120_000, 'the initial load').catch(() => {});
      expectSameRows(await actual(), await expected());
      await writeChanges(source.client, { orders }, { count: 300, seed: 5, firstId: 100_000 });
      await waitFor(same, 120_000, 'the changes').catch(() => {});
      expectSameRows(await actual(), await expected());
    } finally {
      process.kill('SIGTERM');
      await exited(process);
    }
  });
});

describe('row filters into Kafka', () => {
  const client = kafkaClient('PLAINTEXT');
  const [ordersTopic, accountsTopic] = [randomTopic('orders'), randomTopic('accounts')];
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('rowfilter_kafka');
    // One partition each: a topic's messages in the order of the source's commits.
    await createTopics(client, [ordersTopic, accountsTopic], 1);
  });

  afterAll(async () => {
    await deleteTopics(client, [ordersTopic, accountsTopic]).catch(() => {});
    await harness?.close();
  });

  it('sends snapshot messages of the matching rows only, a move out of the filter as a delete, into it as an insert', {
    timeout: 240_000,
  }, async () => {
    const { source } = harness;
    const suffix = randomSuffix().replaceAll('-', '_');
    const [orders, accounts] = [`orders_${suffix}`, `accounts_${suffix}`];
    await createTables(source.client, orders, accounts);
    const name = `rowfilter-kafka-${suffix.replaceAll('_', '-')}`;
    const spec = {
      name,
      tableMappings: [
        {
          source: { schema: 'public', table: orders },
          destination: { schema: 'public', table: ordersTopic },
          rowFilter: ordersFilter,
        },
        {
          source: { schema: 'public', table: accounts },
          destination: { schema: 'public', table: accountsTopic },
          exclude: ['secret'],
          rowFilter: accountsFilter,
        },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      maxBatchSize: 100,
    };
    const expected = {
      orders: () => filteredOrders(source.client, orders),
      accounts: () => filteredAccounts(source.client, accounts),
    };
    type Row = Record<string, unknown>;
    const valuesOf = (topic: string) =>
      collector.messages
        .filter((message) => message.topic === topic)
        .sort((x, y) => x.offset - y.offset)
        .map((message) => ({ key: message.key, ...JSON.parse(message.value ?? 'null') }));
    /** The topic folded by the rows' ids, as a consumer does: the rows it holds, as text cells. */
    const folded = (
      topic: string,
      columns: readonly string[],
      kinds = ['snapshot', 'insert', 'update', 'delete'],
    ) => {
      const byId = new Map<string, Row>();
      for (const value of valuesOf(topic).filter((candidate) => kinds.includes(candidate.kind))) {
        if (value.old) byId.delete(String(value.old.id));
        if (value.new) byId.set(String(value.new.id), value.new);
      }
      return [...byId.values()]
        .map((row) => columns.map((column) => String(row[column])))
        .sort((x, y) => Number(x[0]) - Number(y[0]));
    };
    const orderColumns = ['id', 'region', 'amount', 'note'];
    const collector = new TopicCollector(client);
    const mirror = startMirror(harness, spec, {
      wrapDestination: () => new KafkaDestination(streamConfig('PLAINTEXT'), { mirror: name, logger }),
    });
    try {
      await collector.start([ordersTopic, accountsTopic]);
      await waitFor(
        async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
        60_000,
        'running',
      );
      // The initial load: a snapshot message of each matching row, and of no other.
      const [ordersLoaded, accountsLoaded] = [await expected.orders(), await expected.accounts()];
      await collector.until(
        () => collector.messages.length >= ordersLoaded.length + accountsLoaded.length,
        60_000,
        'the initial load',
      );
      expect(valuesOf(ordersTopic).every((value) => value.kind === 'snapshot')).toBe(true);
      expectSameRows(folded(ordersTopic, orderColumns), ordersLoaded);
      expectSameRows(folded(accountsTopic, ['id', 'tier']), accountsLoaded);
      expect(valuesOf(accountsTopic).some((value) => 'secret' in value.new)).toBe(false);

      // Each way an update meets the filter (orders: region = 'eu' AND amount >= 10,
      // REPLICA IDENTITY FULL; accounts: id % 3 <> 0, on its key), then a last row in each.
      for (const statement of [
        `UPDATE ${orders} SET region = 'us' WHERE id = 15`, // out: a delete
        `UPDATE ${orders} SET amount = 12 WHERE id = 3`, // in: an insert
        `UPDATE ${orders} SET note = 'still in' WHERE id = 30`, // both: an update
        `UPDATE ${orders} SET note = 'still out' WHERE id = 1`, // neither: nothing
        `INSERT INTO ${orders} VALUES (100002, 'us', 11, 'out')`,
        `DELETE FROM ${orders} WHERE id = 33`,
        `DELETE FROM ${orders} WHERE id = 2`,
        `INSERT INTO ${orders} VALUES (100003, 'eu', 19, 'last')`,
        `UPDATE ${accounts} SET id = 300000 WHERE id = 1`, // a key out: a delete by the old key
        `UPDATE ${accounts} SET id = 300001 WHERE id = 3`, // a key in: an insert
        `UPDATE ${accounts} SET id = 300002 WHERE id = 4`, // in to in: an update with its old key
        `UPDATE ${accounts} SET tier = 9 WHERE id = 2`,
        `UPDATE ${accounts} SET tier = 9 WHERE id = 6`,
        `INSERT INTO ${accounts} VALUES (300004, 1, 'last')`,
      ]) {
        await source.client.query(statement);
      }
      const changes = (topic: string) =>
        valuesOf(topic)
          .filter((value) => value.kind !== 'snapshot')
          .map(({ key, kind, old, new: row }) => ({ key, kind, old, new: row }));
      await collector.until(
        () =>
          changes(ordersTopic).some((value) => value.new?.note === 'last') &&
          changes(accountsTopic).some((value) => value.new?.id === '300004'),
        60_000,
        'the last row of each table',
      );
      const order = (id: number, region: string, amount: number, note: string) => ({
        id: String(id),
        region,
        amount,
        note,
      });
      expect(changes(ordersTopic)).toEqual([
        { key: '{"id":"15"}', kind: 'delete', old: order(15, 'eu', 15, 'seed 15'), new: null },
        { key: '{"id":"3"}', kind: 'insert', old: null, new: order(3, 'eu', 12, 'seed 3') },
        {
          key: '{"id":"30"}',
          kind: 'update',
          old: order(30, 'eu', 10, 'seed 30'),
          new: order(30, 'eu', 10, 'still in'),
        },
        { key: '{"id":"33"}', kind: 'delete', old: order(33, 'eu', 13, 'seed 33'), new: null },
        { key: '{"id":"100003"}', kind: 'insert', old: null, new: order(100003, 'eu', 19, 'last') },
      ]);
      expect(changes(accountsTopic)).toEqual([
        { key: '{"id":"1"}', kind: 'delete', old: { id: '1' }, new: null },
        { key: '{"id":"300001"}', kind: 'insert', old: null, new: { id: '300001', tier: 3 } },
        { key: '{"id":"300002"}', kind: 'update', old: { id: '4' }, new: { id: '300002', tier: 4 } },
        { key: '{"id":"2"}', kind: 'update', old: null, new: { id: '2', tier: 9 } },
        { key: '{"id":"300004"}', kind: 'insert', old: null, new: { id: '300004', tier: 1 } },
      ]);

      // Under random writes, the topics folded by key are the filtered source.
      await writeChanges(source.client, { orders, accounts }, { count: 200, seed: 7, firstId: 200_000 });
      const same = async () =>
        JSON.stringify(folded(ordersTopic, orderColumns)) === JSON.stringify(await expected.orders()) &&
        JSON.stringify(folded(accountsTopic, ['id', 'tier'])) === JSON.stringify(await expected.accounts());
      await waitFor(same, 60_000, 'the changes under writes').catch(() => {});
      expectSameRows(folded(ordersTopic, orderColumns), await expected.orders());
      expectSameRows(folded(accountsTopic, ['id', 'tier']), await expected.accounts());
    } finally {
      await collector.stop().catch(() => {});
      expect(await mirror.stop()).toBe('stopped');
    }
  });
});

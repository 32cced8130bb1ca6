// A partitioned source table is one table at every destination: its initial
// load reads each partition once, and the changes of every partition (at any
// depth, the default partition too; a row moved between partitions; partitions
// created and attached while the mirror runs) arrive under the partitioned
// table's name, through a kill -9 of the engine under writes. What
// PostgreSQL does not publish (a partition truncated, detached, dropped, or
// attached with rows) is found by the mirror's look and, under each schema
// change policy, resynced, held or left as it is (docs/engine.md,
// "Partitioned tables"). Run on PostgreSQL 13, 15 and 18 sources.
import { type ClickHouseClient, createClient } from '@clickhouse/client';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Peer } from '../../engine/src/resources/peer.ts';
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
import { createHarness, type Harness, type RunningMirror, startMirror } from '../support/mirror-harness.ts';
import { seededIntegers } from '../support/seeded-random.ts';
import { emulatorConfig, SnowflakeAdmin, uniqueName } from '../support/snowflake-peer.ts';
import { sourcePostgres } from '../support/testenv.ts';

/** A row as compared: id, k, v as text (v may be null), in (id, k) order. */
type Row = readonly [string, string, string | null];

const seedRows = 3000;

/**
 * `name`, partitioned by range of k: a leaf for 0–99, a sub-partitioned
 * 100–299 (two leaves), a default partition for the rest; `seedRows` rows
 * spread over all four leaves.
 */
async function createPartitioned(client: pg.Client, name: string): Promise<void> {
  const table = pg.escapeIdentifier(name);
  const part = (suffix: string) => pg.escapeIdentifier(`${name}_${suffix}`);
  await client.query(`
    CREATE TABLE ${table} (id bigint, k int, v text, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);
    CREATE TABLE ${part('low')} PARTITION OF ${table} FOR VALUES FROM (0) TO (100);
    CREATE TABLE ${part('mid')} PARTITION OF ${table} FOR VALUES FROM (100) TO (300) PARTITION BY RANGE (k);
    CREATE TABLE ${part('mid_a')} PARTITION OF ${part('mid')} FOR VALUES FROM (100) TO (200);
    CREATE TABLE ${part('mid_b')} PARTITION OF ${part('mid')} FOR VALUES FROM (200) TO (300);
    CREATE TABLE ${part('rest')} PARTITION OF ${table} DEFAULT;
    INSERT INTO ${table} SELECT g, g % 400, 'seed ' || g FROM generate_series(1, ${seedRows}) g;
    ANALYZE ${table}`);
}

async function sourceRows(client: pg.Client, from: string): Promise<Row[]> {
  const result = await client.query<{ id: string; k: string; v: string | null }>(
    // By the columns' values, not the text the select list makes of them.
    `SELECT t.id::text AS id, t.k::text AS k, t.v FROM ${from} AS t ORDER BY t.id, t.k`,
  );
  return result.rows.map((row) => [row.id, row.k, row.v] as const);
}

/**
 * Asserts two row sets equal, naming at most five rows that differ (a diff of
 * thousands of rows takes vitest minutes to print and hides the few that matter).
 */
function expectSameRows(actual: readonly Row[], expected: readonly Row[]): void {
  const key = (row: Row) => `${row[0]}/${row[1]}`;
  const actualByKey = new Map(actual.map((row) => [key(row), row]));
  const expectedByKey = new Map(expected.map((row) => [key(row), row]));
  const differences: { key: string; destination: Row | undefined; source: Row | undefined }[] = [];
  for (const id of new Set([...expectedByKey.keys(), ...actualByKey.keys()])) {
    const [destination, source] = [actualByKey.get(id), expectedByKey.get(id)];
    if (JSON.stringify(destination) !== JSON.stringify(source))
      differences.push({ key: id, destination, source });
  }
  expect({ rows: actual.length, differences: differences.slice(0, 5) }).toEqual({
    rows: expected.length,
    differences: [],
  });
}

function byKey(rows: readonly Row[]): Row[] {
  return [...rows].sort((a, b) => Number(a[0]) - Number(b[0]) || Number(a[1]) - Number(b[1]));
}

/** A destination as these tests use it: its peer, the mapping of a table, and the rows it holds. */
interface Target {
  readonly name: string;
  setUp(): Promise<void>;
  tearDown(): Promise<void>;
  peer(): Peer;
  destinationOf(table: string): { schema: string; table: string };
  rows(table: string): Promise<Row[]>;
  /** Made before the mirror starts, where the destination needs it. */
  prepare?(table: string): Promise<void>;
  /** What else to check of the changes as delivered. */
  checkDelivery?(table: string): Promise<void>;
  /**
   * A resync sends the rows again without deleting those it does not send
   * (Kafka: `snapshot` messages; docs/kafka.md), so a consumer's fold keeps
   * the rows of a truncated partition.
   */
  readonly resyncKeepsRemovedRows?: boolean;
}

function postgresTarget(harness: () => Harness): Target {
  return {
    name: 'PostgreSQL',
    async setUp() {},
    async tearDown() {},
    peer: () => ({ name: 'destination', kind: 'relational', config: harness().destination.config }),
    destinationOf: (table) => ({ schema: 'public', table }),
    rows: (table) => sourceRows(harness().destination.client, pg.escapeIdentifier(table)),
  };
}

function clickhouseTarget(): Target {
  const engine = clickhouseEngines[0];
  if (!engine) throw new Error('no ClickHouse engine');
  const database = `tributary_part_${randomSuffix()}`;
  const config = engine.config(database);
  let admin: ClickHouseClient;
  return {
    name: `ClickHouse (${engine.name})`,
    async setUp() {
      admin = createClient({
        url: `http://${config.host}:${config.httpPort}`,
        username: config.user,
        password: config.password,
      });
      await admin.command({ query: `CREATE DATABASE ${database}` });
    },
    async tearDown() {
      await admin?.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => {});
      await admin?.close();
    },
    peer: () => ({ name: 'analytics', kind: 'analytics', config }),
    destinationOf: (table) => ({ schema: database, table }),
    async rows(table) {
      const exists = await admin.query({
        query: `EXISTS TABLE ${database}.${table}`,
        format: 'JSONEachRow',
      });
      if (!Object.values((await exists.json<Record<string, number>>())[0] ?? {}).includes(1)) return [];
      const result = await admin.query({
        query: `SELECT toString(id) AS id, toString(k) AS k, v FROM ${database}.${table} FINAL
                WHERE _tributary_is_deleted = 0`,
        format: 'JSONEachRow',
      });
      const rows = await result.json<{ id: string; k: string; v: string | null }>();
      return byKey(rows.map((row) => [row.id, row.k, row.v] as const));
    },
  };
}

function kafkaTarget(): Target {
  const client = kafkaClient('PLAINTEXT');
  const topics = new Map<string, string>();
  const collectors = new Map<string, TopicCollector>();
  const topicOf = (table: string) => {
    const topic = topics.get(table) ?? randomTopic(table.replaceAll('_', '-'));
    topics.set(table, topic);
    return topic;
  };
  async function collector(table: string): Promise<TopicCollector> {
    let found = collectors.get(table);
    if (!found) {
      found = new TopicCollector(client);
      collectors.set(table, found);
      await found.start([topicOf(table)]);
    }
    return found;
  }
  return {
    name: 'Kafka',
    resyncKeepsRemovedRows: true,
    async setUp() {},
    async tearDown() {
      for (const found of collectors.values()) await found.stop();
      await deleteTopics(client, [...topics.values()]);
    },
    peer: () => ({ name: 'kafka', kind: 'stream', config: streamConfig('PLAINTEXT') }),
    destinationOf(table) {
      return { schema: 'public', table: topicOf(table) };
    },
    // The table's rows as a consumer folds the messages: in one partition, so in order, truncates too.
    async rows(table) {
      if (!topics.has(table)) return [];
      const state = new Map<string, Row>();
      for (const message of (await collector(table)).messages) {
        const value = JSON.parse(message.value ?? 'null') as {
          kind: string;
          // bigint as a string, int as a number (docs/kafka.md)
          new?: { id: string; k: number; v: string | null };
          old?: { id: string; k: number };
        };
        if (value.kind === 'truncate') state.clear();
        // A delete, or an update that changed the key (its old key then comes along).
        if (value.old) state.delete(`${value.old.id}/${value.old.k}`);
        if (value.new)
          state.set(`${value.new.id}/${value.new.k}`, [value.new.id, String(value.new.k), value.new.v]);
      }
      return byKey([...state.values()]);
    },
    async checkDelivery(table) {
      const messages = (await collector(table)).messages;
      expect(messages.length).toBeGreaterThan(seedRows);
      const sources = new Set(
        messages.map((message) => JSON.stringify(JSON.parse(message.value ?? '{}').source)),
      );
      expect([...sources]).toEqual([JSON.stringify({ schema: 'public', table })]);
    },
    // One partition per topic: the fold above needs the messages' total order.
    async prepare(table) {
      await createTopics(client, [topicOf(table)], 1);
    },
  };
}

function snowflakeTarget(): Target {
  const config = emulatorConfig(uniqueName('PART'));
  const schema = `trib_part_${randomSuffix()}`.toLowerCase();
  let admin: SnowflakeAdmin;
  return {
    name: 'Snowflake emulator',
    async setUp() {
      admin = new SnowflakeAdmin(config);
      await admin.rows(`CREATE SCHEMA IF NOT EXISTS "${config.database}"."${schema.toUpperCase()}"`);
    },
    async tearDown() {
      await admin
        ?.rows(`DROP SCHEMA IF EXISTS "${config.database}"."${schema.toUpperCase()}" CASCADE`)
        .catch(() => {});
      await admin?.close();
    },
    peer: () => ({ name: 'warehouse', kind: 'datawarehouse', config }),
    destinationOf: (table) => ({ schema, table }),
    async rows(table) {
      const rows = await admin
        .rows(
          `SELECT TO_VARCHAR("ID") AS "ID", TO_VARCHAR("K") AS "K", "V" FROM "${config.database}"."${schema.toUpperCase()}"."${table.toUpperCase()}" ORDER BY "ID", "K"`,
        )
        .catch(() => []);
      return byKey(
        rows.map((row) => [String(row.ID), String(row.K), (row.V ?? null) as string | null] as const),
      );
    },
  };
}

/**
 * Random single-row changes in their own transactions: inserts anywhere in
 * k's range (the default partition too), updates of v, updates that move a
 * row to another partition (a new k), deletes.
 */
async function writeChanges(
  client: pg.Client,
  table: string,
  options: { count: number; firstId: number; seed: number; ks?: readonly number[] },
): Promise<number> {
  const next = seededIntegers(options.seed);
  const quoted = pg.escapeIdentifier(table);
  const ks = options.ks ?? [0, 50, 99, 100, 150, 199, 200, 250, 299, 300, 350, 399, 777];
  const k = () => ks[next(ks.length)] ?? 0;
  let nextId = options.firstId;
  for (let index = 0; index < options.count; index++) {
    const id = 1 + next(nextId - 1);
    switch (next(4)) {
      case 0:
        await client.query(`INSERT INTO ${quoted} VALUES ($1, $2, $3)`, [nextId++, k(), `new ${index}`]);
        break;
      case 1:
        await client.query(`UPDATE ${quoted} SET v = $2 WHERE id = $1`, [id, `updated ${index}`]);
        break;
      case 2:
        await client.query(`UPDATE ${quoted} SET k = $2, v = $3 WHERE id = $1`, [id, k(), `moved ${index}`]);
        break;
      default:
        await client.query(`DELETE FROM ${quoted} WHERE id = $1`, [id]);
    }
  }
  return nextId;
}

describe('partitioned source tables', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('part');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('publishes via the root, loads each partition once and streams every partition’s changes as the table', async () => {
    const { source } = harness;
    await createPartitioned(source.client, 'events');
    const name = `part-${randomSuffix()}`;
    const spec = {
      name,
      tableMappings: [
        { source: { schema: 'public', table: 'events' }, destination: { schema: 'public', table: 'events' } },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      snapshotNumRowsPerPartition: 500,
      snapshotMaxParallelWorkers: 2,
    };
    let mirror = startMirror(harness, spec);
    const restart = async (running: RunningMirror) => {
      expect(await running.stop()).toBe('stopped');
      return startMirror(harness, spec);
    };
    const target = postgresTarget(() => harness);
    const expectEqual = async (expected: () => Promise<Row[]>, what: string) => {
      await waitFor(
        async () => JSON.stringify(await target.rows('events')) === JSON.stringify(await expected()),
        60_000,
        what,
      ).catch(() => {});
      expectSameRows(await target.rows('events'), await expected());
    };
    const root = () => sourceRows(source.client, 'events');
    try {
      await expectEqual(root, 'the initial load');
      // A partition's rows are counted in the catalog after its write commits, so
      // the count is whole once the load has ended (phase `running`), not as soon
      // as the rows are visible.
      await waitFor(
        async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
        30_000,
        'running',
      );
      // Every leaf was read on its own, and every row once.
      const [progress] = await harness.catalog.listSnapshotProgress(name);
      expect(progress?.rowsSynced).toBe(BigInt(seedRows));
      expect(progress?.partitionsTotal).toBeGreaterThanOrEqual(4);
      const publication = await source.client.query<{ pubviaroot: boolean }>(
        `SELECT pubviaroot FROM pg_publication p JOIN pg_publication_rel r ON r.prpubid = p.oid
         WHERE r.prrelid = 'events'::regclass`,
      );
      expect(publication.rows).toEqual([{ pubviaroot: true }]);

      let nextId = await writeChanges(source.client, 'events', {
        count: 200,
        firstId: seedRows + 1,
        seed: 1,
      });
      // A row moved from a leaf to a sub-partition's leaf and on to the default partition.
      await source.client.query(`UPDATE events SET k = 150 WHERE id = 5 AND k = 5`);
      await source.client.query(`UPDATE events SET k = 888 WHERE id = 5 AND k = 150`);
      await expectEqual(root, 'the changes of every partition');

      // Partitions created and attached while the mirror runs are part of the table.
      await source.client.query(
        `CREATE TABLE events_new PARTITION OF events FOR VALUES FROM (1000) TO (1100)`,
      );
      // Another column order: a table made elsewhere and attached.
      await source.client.query(`CREATE TABLE events_attached (v text, k int NOT NULL, id bigint NOT NULL)`);
      await source.client.query(
        `ALTER TABLE events ATTACH PARTITION events_attached FOR VALUES FROM (2000) TO (2100)`,
      );
      nextId = await writeChanges(source.client, 'events', {
        count: 120,
        firstId: nextId,
        seed: 2,
        ks: [1000, 1050, 2000, 2099, 5, 250],
      });
      await source.client.query(
        `INSERT INTO events_attached (id, k, v) VALUES ($1, 2001, 'into the partition')`,
        [nextId++],
      );
      await expectEqual(root, 'the changes of new and attached partitions');
      expect(
        (await source.client.query(`SELECT count(*)::int AS n FROM events_attached`)).rows[0]?.n,
      ).toBeGreaterThan(0);

      // A detached partition is a table of its own: its rows leave the table
      // (the mirror resyncs it), its later changes are not the mirror's.
      await source.client.query(`ALTER TABLE events DETACH PARTITION events_low`);
      // PostgreSQL 13's walsender goes on publishing a partition detached while it
      // streams as the partitioned table until it restarts: docs/engine.md says to
      // restart the mirror's stream after a detach there, as this does.
      if (sourcePostgres.major < 14) mirror = await restart(mirror);
      await source.client.query(`UPDATE events_low SET v = 'after the detach'`);
      await source.client.query(`INSERT INTO events VALUES ($1, 42, 'into the default partition')`, [
        nextId++,
      ]);
      await expectEqual(root, 'the changes after a detach');

      // TRUNCATE of the partitioned table empties it at the destination.
      await source.client.query(`TRUNCATE events`);
      await source.client.query(`INSERT INTO events VALUES ($1, 7, 'after the truncate')`, [nextId++]);
      await expectEqual(root, 'the truncate');
    } finally {
      expect(await mirror.stop()).toBe('stopped');
    }
  });

  it('switches a publication it created before it published via the root, and applies the changes published meanwhile', async () => {
    const { source } = harness;
    await createPartitioned(source.client, 'legacy');
    const name = `legacy-${randomSuffix()}`;
    const spec = {
      name,
      tableMappings: [
        { source: { schema: 'public', table: 'legacy' }, destination: { schema: 'public', table: 'legacy' } },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const target = postgresTarget(() => harness);
    const equal = async () =>
      JSON.stringify(await target.rows('legacy')) ===
      JSON.stringify(await sourceRows(source.client, 'legacy'));
    const first = startMirror(harness, spec);
    await waitFor(equal, 60_000, 'the initial load');
    await waitFor(
      async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
      30_000,
      'running',
    );
    expect(await first.stop()).toBe('stopped');
    // As a mirror made before publishing via the root left its publication.
    const setup = (await harness.catalog.getRuntime(name))?.setup;
    expect(setup?.publicationCreatedByMirror).toBe(true);
    const publication = pg.escapeIdentifier(setup?.publicationName ?? '');
    await source.client.query(`ALTER PUBLICATION ${publication} SET (publish_via_partition_root = false)`);
    await writeChanges(source.client, 'legacy', { count: 60, firstId: seedRows + 1, seed: 3 });
    const second = startMirror(harness, spec);
    try {
      await waitFor(equal, 60_000, 'the changes published under the partitions’ names');
      expectSameRows(await target.rows('legacy'), await sourceRows(source.client, 'legacy'));
      const viaRoot = await source.client.query<{ pubviaroot: boolean }>(
        `SELECT pubviaroot FROM pg_publication WHERE pubname = $1`,
        [setup?.publicationName],
      );
      expect(viaRoot.rows).toEqual([{ pubviaroot: true }]);
      const logs = await harness.catalog.listLogs({ mirror: name, levels: ['INFO'], offset: 0, limit: 200 });
      expect(
        logs.entries.some((entry) => entry.message.startsWith('changes of partition public.legacy_')),
      ).toBe(true);
    } finally {
      expect(await second.stop()).toBe('stopped');
    }
  });

  /** The mirror's log lines at `levels` that contain `text`, oldest first. */
  async function logLines(name: string, text: string, levels: ('INFO' | 'WARN')[] = ['INFO']) {
    const logs = await harness.catalog.listLogs({ mirror: name, levels, offset: 0, limit: 1000 });
    return logs.entries
      .map((entry) => entry.message)
      .filter((message) => message.includes(text))
      .reverse();
  }

  /** Waits until the destination table equals the source's, then asserts it row by row. */
  async function expectLevel(table: string, what: string, expected?: () => Promise<Row[]>) {
    const target = postgresTarget(() => harness);
    const wanted = expected ?? (() => sourceRows(harness.source.client, pg.escapeIdentifier(table)));
    await waitFor(
      async () => JSON.stringify(await target.rows(table)) === JSON.stringify(await wanted()),
      90_000,
      what,
    ).catch(() => {});
    expectSameRows(await target.rows(table), await wanted());
  }

  it('resyncs the table when a partition is truncated, attached with rows, detached or dropped, and not for a partition created or the whole table truncated', {
    timeout: 300_000,
  }, async () => {
    const { source } = harness;
    await createPartitioned(source.client, 'unpub');
    const name = `unpub-${randomSuffix()}`;
    const spec = {
      name,
      tableMappings: [
        { source: { schema: 'public', table: 'unpub' }, destination: { schema: 'public', table: 'unpub' } },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const resyncLines = () => logLines(name, 'the table is resynced online');
    /** Waits for resync line `count`, which names `leaf` and no other partition. */
    const expectResync = async (count: number, leaf: string, happened: string) => {
      await waitFor(async () => (await resyncLines()).length >= count, 90_000, `resync ${count}`);
      const line = (await resyncLines())[count - 1] ?? '';
      expect(line).toContain(`partition public.${leaf} ${happened}`);
      expect(line.match(/partition public\./g)).toHaveLength(1);
    };
    let mirror = startMirror(harness, spec);
    try {
      await expectLevel('unpub', 'the initial load');
      await waitFor(
        async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
        30_000,
        'running',
      );
      // A day's partition made and filled through the table, then the whole table
      // emptied and filled again: all published, nothing to resync.
      await source.client.query(`CREATE TABLE unpub_day PARTITION OF unpub FOR VALUES FROM (1000) TO (1100)`);
      await source.client.query(
        `INSERT INTO unpub SELECT g, 1000 + g % 100, 'day ' || g FROM generate_series(5001, 5100) g`,
      );
      await source.client.query(`TRUNCATE unpub`);
      await source.client.query(
        `INSERT INTO unpub SELECT g, g % 400, 'again ' || g FROM generate_series(1, 2000) g`,
      );
      await source.client.query(
        `INSERT INTO unpub SELECT g, 1000 + g % 100, 'day ' || g FROM generate_series(5001, 5100) g`,
      );
      await expectLevel('unpub', 'the published changes');

      // One partition truncated: PostgreSQL publishes nothing for it.
      await source.client.query(`TRUNCATE unpub_low`);
      await expectResync(1, 'unpub_low', 'was truncated');
      await expectLevel('unpub', 'the table resynced after a partition was truncated');

      // A table that holds rows attached as a partition.
      await source.client.query(`CREATE TABLE unpub_old (id bigint NOT NULL, k int NOT NULL, v text)`);
      await source.client.query(
        `INSERT INTO unpub_old SELECT g, 2000 + g % 100, 'old ' || g FROM generate_series(7001, 7050) g`,
      );
      await source.client.query(
        `ALTER TABLE unpub ATTACH PARTITION unpub_old FOR VALUES FROM (2000) TO (2100)`,
      );
      await expectResync(2, 'unpub_old', 'was attached with rows it held before');
      await expectLevel('unpub', 'the table resynced after a table with rows was attached');

      // A partition of a partition detached, then a partition dropped.
      await source.client.query(`ALTER TABLE unpub_mid DETACH PARTITION unpub_mid_b`);
      await expectResync(3, 'unpub_mid_b', 'was detached or dropped');
      if (sourcePostgres.major < 14) {
        // 13's walsender publishes a partition detached while it streams until it
        // restarts: the resync's new stream has, so later changes of it are not the table's.
        await waitFor(
          async () => (await harness.catalog.listTables(name))[0]?.state === 'streaming',
          60_000,
          'streaming',
        );
      }
      await source.client.query(`UPDATE unpub_mid_b SET v = 'after the detach'`);
      await expectLevel('unpub', 'the table resynced after a detach');
      await source.client.query(`DROP TABLE unpub_day`);
      await expectResync(4, 'unpub_day', 'was detached or dropped');
      await expectLevel('unpub', 'the table resynced after a drop');

      // While no engine runs: found at the next start.
      expect(await mirror.stop()).toBe('stopped');
      await source.client.query(`TRUNCATE unpub_rest`);
      mirror = startMirror(harness, spec);
      await expectResync(5, 'unpub_rest', 'was truncated');
      await expectLevel('unpub', 'the table resynced after a truncate while stopped');
      await waitFor(
        async () => (await harness.catalog.listTables(name))[0]?.state === 'streaming',
        60_000,
        'streaming',
      );
      expect(await resyncLines()).toHaveLength(5);
    } finally {
      expect(await mirror.stop()).toBe('stopped');
    }
  });

  it('under schemaChanges ignore keeps a truncated partition’s rows, and under hold waits for a resync', {
    timeout: 300_000,
  }, async () => {
    const { source } = harness;
    await createPartitioned(source.client, 'kept');
    await createPartitioned(source.client, 'waits');
    const name = `kept-${randomSuffix()}`;
    const spec = (schemaChanges: 'ignore' | 'hold', table: string) => ({
      name: `${name}-${schemaChanges}`,
      tableMappings: [{ source: { schema: 'public', table }, destination: { schema: 'public', table } }],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      schemaChanges,
    });
    const ignoring = startMirror(harness, spec('ignore', 'kept'));
    let holding = startMirror(harness, spec('hold', 'waits'));
    try {
      await expectLevel('kept', 'the initial load (ignore)');
      await expectLevel('waits', 'the initial load (hold)');
      for (const mirror of [`${name}-ignore`, `${name}-hold`]) {
        await waitFor(
          async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
          30_000,
          'running',
        );
      }
      const keptLow = await sourceRows(source.client, 'kept_low');
      await source.client.query(`TRUNCATE kept_low`);
      await source.client.query(`TRUNCATE waits_low`);
      await source.client.query(`INSERT INTO kept VALUES (9001, 7, 'after')`);
      await waitFor(
        async () =>
          (await logLines(`${name}-ignore`, 'partition public.kept_low was truncated', ['WARN'])).length > 0,
        60_000,
        'the ignored change said',
      );
      await expectLevel('kept', 'the truncated partition kept', async () =>
        byKey([...(await sourceRows(source.client, 'kept')), ...keptLow]),
      );
      await waitFor(
        async () => (await harness.catalog.listTables(`${name}-hold`))[0]?.state === 'held',
        60_000,
        'the table held',
      );
      const [held] = await harness.catalog.listTables(`${name}-hold`);
      expect(held?.problem?.message).toContain('partition public.waits_low was truncated');
      await source.client.query(`INSERT INTO waits VALUES (9001, 7, 'while held')`);
      expect(await holding.stop()).toBe('stopped');
      holding = startMirror(harness, {
        ...spec('hold', 'waits'),
        resyncTables: { 'public.waits': 'accept-1' },
      });
      await expectLevel('waits', 'the held table resynced');
      await waitFor(
        async () => (await harness.catalog.listTables(`${name}-hold`))[0]?.state === 'streaming',
        60_000,
        'streaming again',
      );
    } finally {
      expect(await ignoring.stop()).toBe('stopped');
      expect(await holding.stop()).toBe('stopped');
    }
  });

  it('says once which tables of a user-named publication it skips', async () => {
    const { source } = harness;
    await createPartitioned(source.client, 'named');
    await source.client.query(`CREATE TABLE beside (id int PRIMARY KEY)`);
    const publication = `named_pub_${randomSuffix()}`;
    await source.client.query(
      `CREATE PUBLICATION ${pg.escapeIdentifier(publication)} FOR TABLE named, beside WITH (publish_via_partition_root = true)`,
    );
    const name = `named-${randomSuffix()}`;
    const mirror = startMirror(harness, {
      name,
      publicationName: publication,
      tableMappings: [
        { source: { schema: 'public', table: 'named' }, destination: { schema: 'public', table: 'named' } },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    });
    const target = postgresTarget(() => harness);
    try {
      await waitFor(
        async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
        60_000,
        'running',
      );
      await source.client.query(`INSERT INTO beside VALUES (1), (2)`);
      await source.client.query(`INSERT INTO beside VALUES (3)`);
      await source.client.query(`INSERT INTO named VALUES (${seedRows + 1}, 5, 'after')`);
      await waitFor(
        async () =>
          JSON.stringify(await target.rows('named')) ===
          JSON.stringify(await sourceRows(source.client, 'named')),
        60_000,
        'the mapped table',
      );
      const logs = await harness.catalog.listLogs({ mirror: name, levels: ['INFO'], offset: 0, limit: 200 });
      expect(logs.entries.filter((entry) => entry.message.includes('public.beside'))).toHaveLength(1);
      expect(logs.entries.map((entry) => entry.message)).toContain(
        `changes of public.beside are skipped: publication ${publication} publishes it, but the mirror does not map it`,
      );
    } finally {
      expect(await mirror.stop()).toBe('stopped');
    }
  });
});

describe.each([
  { make: (harness: () => Harness) => postgresTarget(harness) },
  { make: () => clickhouseTarget() },
  { make: () => kafkaTarget() },
  { make: () => snowflakeTarget() },
])('a partitioned table under writes and a kill -9 of the engine', ({ make }) => {
  let harness: Harness;
  const target = make(() => harness);

  beforeAll(async () => {
    harness = await createHarness('part_kill');
    await target.setUp();
  });

  afterAll(async () => {
    await target.tearDown();
    await harness?.close();
  });

  it(`ends equal to the source row by row (${target.name})`, { timeout: 300_000 }, async () => {
    const { source } = harness;
    const table = `orders_${randomSuffix()}`.toLowerCase().replaceAll('-', '_');
    await createPartitioned(source.client, table);
    await target.prepare?.(table);
    const name = `part-kill-${randomSuffix()}`;
    const peer = target.peer();
    const configPath = writeEngineConfig(
      harness,
      {
        name,
        sourcePeer: 'source',
        destinationPeer: peer.name,
        tableMappings: [{ source: { schema: 'public', table }, destination: target.destinationOf(table) }],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        maxBatchSize: 50,
        snapshotNumRowsPerPartition: 1000,
      },
      { destination: peer },
    );
    const equal = async () =>
      JSON.stringify(await target.rows(table)) === JSON.stringify(await sourceRows(source.client, table));
    let engine = startEngine(name, configPath);
    try {
      await waitFor(equal, 120_000, 'the initial load');
      await waitFor(
        async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
        30_000,
        'running',
      );
      const [progress] = await harness.catalog.listSnapshotProgress(name);
      expect(progress?.rowsSynced).toBe(BigInt(seedRows));

      // Writes on, the engine killed once a batch of them is durable, then started again.
      const batchesBefore = (
        await harness.catalog.listBatches(name, { limit: 0, ascending: true, finishedOnly: true })
      ).batches.length;
      const writing = writeChanges(source.client, table, { count: 300, firstId: seedRows + 1, seed: 7 });
      await waitFor(
        async () =>
          (await harness.catalog.listBatches(name, { limit: 0, ascending: true, finishedOnly: true })).batches
            .length > batchesBefore,
        60_000,
        'a batch of the writes',
      );
      engine.kill('SIGKILL');
      await exited(engine);
      engine = startEngine(name, configPath);
      const nextId = await writing;
      await source.client.query(`UPDATE ${pg.escapeIdentifier(table)} SET k = 1234 WHERE id = 10`);
      await source.client.query(`INSERT INTO ${pg.escapeIdentifier(table)} VALUES ($1, 3, 'last')`, [nextId]);
      await waitFor(equal, 120_000, 'the changes to every partition').catch(() => {});
      expectSameRows(await target.rows(table), await sourceRows(source.client, table));
      await target.checkDelivery?.(table);

      // A partition truncated, which PostgreSQL does not publish: the mirror's
      // look finds it and resyncs the table at this destination too, under
      // writes, the engine killed once more after the finding.
      const low = pg.escapeIdentifier(`${table}_low`);
      const truncated = await sourceRows(source.client, low);
      await source.client.query(`TRUNCATE ${low}`);
      const writingAfter = writeChanges(source.client, table, { count: 200, firstId: nextId + 1, seed: 8 });
      await waitFor(
        async () =>
          (
            await harness.catalog.listLogs({ mirror: name, levels: ['INFO'], offset: 0, limit: 500 })
          ).entries.some((entry) => entry.message.startsWith(`partition public.${table}_low was truncated`)),
        60_000,
        'the truncated partition found',
      );
      engine.kill('SIGKILL');
      await exited(engine);
      engine = startEngine(name, configPath);
      await writingAfter;
      const expected = async () =>
        byKey([
          ...(await sourceRows(source.client, table)),
          ...(target.resyncKeepsRemovedRows ? truncated : []),
        ]);
      await waitFor(
        async () => JSON.stringify(await target.rows(table)) === JSON.stringify(await expected()),
        120_000,
        'the table resynced',
      ).catch(() => {});
      expectSameRows(await target.rows(table), await expected());
      await waitFor(
        async () => (await harness.catalog.listTables(name))[0]?.state === 'streaming',
        60_000,
        'streaming after the resync',
      );
    } finally {
      engine.kill('SIGTERM');
      await exited(engine);
    }
  });
});

// PostgreSQL to Kafka end to end: an in-process mirror's snapshot and changes
// as messages, and kill -9 of an engine process while it streams: every change
// must arrive at least once, in order per key.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KafkaDestination } from '../../engine/src/connectors/kafka/destination.ts';
import { tableFormat } from '../../engine/src/connectors/kafka/message-format.ts';
import { snapshotRecord } from '../../engine/src/connectors/kafka/script-records.ts';
import {
  createTopics,
  deleteTopics,
  kafkaClient,
  type Received,
  randomTopic,
  streamConfig,
  TopicCollector,
} from '../integration/kafka-support.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { checkedJsonExample, jsonShape } from '../support/doc-examples.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness, startMirror } from '../support/mirror-harness.ts';
import { typedColumn } from '../support/text-table.ts';

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });
const client = kafkaClient('PLAINTEXT');

interface Change {
  readonly kind: string;
  readonly id: number;
  readonly version: number | undefined;
  readonly message: Received;
}

function decode(message: Received): Change {
  const value = JSON.parse(message.value ?? 'null');
  const row = value.new ?? value.old ?? {};
  return { kind: value.kind, id: Number(row.id), version: row.version, message };
}

/**
 * Starts an in-process mirror of `table` into `topic` (initial load in
 * partitions of `partitionRows`) and waits until it streams changes; its
 * collector is not started yet.
 */
async function startRunning(
  harness: Harness,
  table: string,
  topic: string,
  partitionRows: number,
  mechanism: Parameters<typeof streamConfig>[0],
) {
  const spec = {
    name: `kafka-${randomSuffix()}`,
    tableMappings: [{ source: { schema: 'public', table }, destination: { schema: 'public', table: topic } }],
    doInitialSnapshot: true,
    idleTimeoutSeconds: 1,
    snapshotNumRowsPerPartition: partitionRows,
  };
  const mirror = startMirror(harness, spec, {
    wrapDestination: () =>
      new KafkaDestination(streamConfig(mechanism, 'StickyKey'), { mirror: spec.name, logger }),
  });
  const collector = new TopicCollector(client);
  try {
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      60_000,
      'running',
    );
  } catch (error) {
    await mirror.stop();
    throw error;
  }
  return { mirror, collector };
}

describe('PostgreSQL to Kafka', () => {
  let harness: Harness;
  const topics: string[] = [];

  beforeAll(async () => {
    harness = await createHarness('p2k');
  });

  afterAll(async () => {
    await deleteTopics(client, topics);
    await harness?.close();
  });

  it('streams the initial load and every change as messages keyed by the row key', async () => {
    const { source } = harness;
    const ordersTopic = randomTopic('orders');
    topics.push(ordersTopic);
    await source.client.query(
      `CREATE TABLE orders (id bigint PRIMARY KEY, customer text, amount numeric(12,2), tags text[],
         placed timestamptz, payload jsonb, big text)`,
    );
    await source.client.query(
      `INSERT INTO orders SELECT g, 'customer ' || g, g * 1.25, ARRAY['a', 'b'], '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 second',
         jsonb_build_object('n', g), NULL FROM generate_series(1, 2000) g`,
    );
    // Stored out of line, uncompressed: an update that leaves it alone sends the unchanged-TOAST marker.
    await source.client.query(`ALTER TABLE orders ALTER COLUMN big SET STORAGE EXTERNAL`);
    const { mirror, collector } = await startRunning(harness, 'orders', ordersTopic, 500, 'SCRAM-SHA-256');
    try {
      await source.client.query(
        `INSERT INTO orders (id, customer, amount, big) VALUES (3000, 'new', 7.5, repeat('x', 100000))`,
      );
      await source.client.query(`UPDATE orders SET amount = 8.25 WHERE id = 3000`);
      await source.client.query(`UPDATE orders SET id = 3001 WHERE id = 10`);
      await source.client.query(`DELETE FROM orders WHERE id = 11`);
      await source.client.query(`TRUNCATE orders`);
      await collector.start([ordersTopic]);
      await collector.untilCount(2000 + 5, 60_000);
      const changes = collector.messages.map(decode);
      const snapshot = changes.filter((change) => change.kind === 'snapshot');
      expect(snapshot).toHaveLength(2000);
      expect(new Set(snapshot.map((change) => change.id)).size).toBe(2000);
      for (const change of snapshot) expect(change.message.key).toBe(`{"id":"${change.id}"}`);
      const first = JSON.parse(snapshot.find((change) => change.id === 1)?.message.value ?? '{}');
      expect(first.new).toEqual({
        id: '1',
        customer: 'customer 1',
        amount: '1.25',
        tags: ['a', 'b'],
        placed: '2026-01-01T00:00:01Z',
        payload: '{"n": 1}',
        big: null,
      });

      const streamed = changes.filter((change) => change.kind !== 'snapshot');
      expect(streamed.map((change) => [change.kind, change.message.key])).toEqual([
        ['insert', '{"id":"3000"}'],
        ['update', '{"id":"3000"}'],
        ['update', '{"id":"3001"}'],
        ['delete', '{"id":"11"}'],
        ['truncate', null],
      ]);
      const [insert, update, keyChange, deleted, truncate] = streamed.map((change) =>
        JSON.parse(change.message.value ?? ''),
      );
      expect(insert.new.big).toHaveLength(100000);
      // The TOASTed column did not change: it is listed, not sent.
      expect(update.unchanged_columns).toEqual(['big']);
      expect(update.new.amount).toBe('8.25');
      expect(update.new).not.toHaveProperty('big');
      expect(keyChange.old).toEqual({ id: '10' });
      // docs/kafka.md shows an update whose key changed: same fields, same JSON types.
      expect(jsonShape(keyChange)).toEqual(
        jsonShape(checkedJsonExample('docs/kafka.md', 'test/e2e/pg-to-kafka.test.ts')),
      );
      expect(deleted.old).toEqual({ id: '11' });
      for (const message of [insert, update, keyChange, deleted, truncate]) {
        expect(message.lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
        expect(message.xid).toBeGreaterThan(0);
        expect(message.source).toEqual({ schema: 'public', table: 'orders' });
      }
      expect(Date.parse(insert.commit_time)).toBeGreaterThan(Date.now() - 120_000);
    } finally {
      await collector.stop();
      expect(await mirror.stop()).toBe('stopped');
    }
  });

  it('writes the messages of new rows (snapshot, inserts, updates) from the bytes the source sent as their values render', async () => {
    const { source } = harness;
    const topic = randomTopic('kinds');
    topics.push(topic);
    await source.client.query(
      `CREATE TABLE kinds (id bigint PRIMARY KEY, small int2, region int4, amount numeric, note text,
         label varchar(20), doc jsonb, at timestamp, at_utc timestamptz, flag boolean)`,
    );
    // Every kind message-json.ts has a byte rule for, at its edges: escapes, text past ASCII, NaN, infinities, BC, nulls.
    const edgeRows = (offset: number): (string | null)[][] => [
      [`${offset + 1}`, '0', '0', '0', '', '', '{}', '2026-01-01 00:00:00', '2026-01-01 00:00:00+00', 'f'],
      [
        `${offset + 2}`,
        '-32768',
        '-2147483648',
        'NaN',
        'tab\there "quoted" back\\slash\nline\rcr\bbs\fff\vvt \u0001 \u007f',
        'é ✓ 𝄞',
        '{"a": "b\\"c"}',
        'infinity',
        '-infinity',
        't',
      ],
      [
        `${offset + 3}`,
        '32767',
        '2147483647',
        '-12.345000',
        'ünïcödé',
        'x\\y',
        'null',
        '0044-03-15 12:00:00 BC',
        '2026-11-29 10:11:12.5+00',
        null,
      ],
      [
        `${offset + 4}`,
        null,
        null,
        null,
        null,
        null,
        null,
        '2026-11-29 10:11:12.000001',
        '2026-11-29 23:59:59.999999+05:30',
        null,
      ],
    ];
    const insert = async (rows: (string | null)[][]) => {
      for (const row of rows) {
        await source.client.query('INSERT INTO kinds VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)', row);
      }
    };
    await insert(edgeRows(0));
    await source.client.query(
      `INSERT INTO kinds SELECT g, g % 100, g, g * 0.01, 'note ' || g, 'label', jsonb_build_object('g', g),
         '2026-01-01'::timestamp + g * interval '1 ms', '2026-01-01'::timestamptz + g * interval '1 ms', g % 2 = 0
         FROM generate_series(101, 400) g`,
    );
    const { mirror, collector } = await startRunning(harness, 'kinds', topic, 100, 'PLAINTEXT');
    try {
      await insert(edgeRows(1000));
      // Updates without an old image (the key unchanged): their new rows go the same way.
      await source.client.query(
        `UPDATE kinds SET note = note || ' updated', flag = NOT flag WHERE id BETWEEN 1 AND 4`,
      );
      await collector.start([topic]);
      await collector.untilCount(304 + 4 + 4, 60_000);

      // The oracle: each row's text as the engine's sessions print it, rendered value by value (the document).
      const format = tableFormat({
        source: { schema: 'public', table: 'kinds' },
        destination: { schema: 'public', table: topic },
        columns: [
          typedColumn('id', 20),
          typedColumn('small', 21),
          typedColumn('region', 23),
          typedColumn('amount', 1700),
          typedColumn('note', 25),
          typedColumn('label', 1043),
          typedColumn('doc', 3802),
          typedColumn('at', 1114),
          typedColumn('at_utc', 1184),
          typedColumn('flag', 16),
        ],
        keyColumns: ['id'],
      });
      await source.client.query(`BEGIN; SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO'`);
      const { rows } = await source.client
        .query({
          text: 'SELECT * FROM kinds',
          // Each value's text output as it is, parsed by nothing.
          types: { getTypeParser: () => (text: string) => text },
          rowMode: 'array',
        })
        .finally(() => source.client.query('COMMIT'));
      const textById = new Map((rows as (string | null)[][]).map((row) => [row[0], row]));
      const newMember = (json: string) =>
        json.slice(json.indexOf(',"new":'), json.indexOf(',"unchanged_columns":'));
      // The rows' text is their last state: each key's last message (a key keeps its partition's order) is compared.
      const lastOfKey = new Map(collector.messages.map((message) => [message.key, message]));
      const kinds = new Map<string, number>();
      for (const message of lastOfKey.values()) {
        const value = message.value ?? '';
        const parsed = JSON.parse(value);
        kinds.set(parsed.kind, (kinds.get(parsed.kind) ?? 0) + 1);
        const expected = snapshotRecord(format, textById.get(parsed.new.id) ?? []);
        expect(message.key).toBe(expected.key);
        expect(newMember(value)).toBe(`,"new":${JSON.stringify(expected.document.new)}`);
      }
      expect(Object.fromEntries(kinds)).toEqual({ snapshot: 300, insert: 4, update: 4 });
      expect(collector.messages).toHaveLength(304 + 4 + 4);
      const second = collector.messages.find((message) => message.key === '{"id":"1002"}');
      expect(JSON.parse(second?.value ?? '{}').new).toMatchObject({
        amount: 'NaN',
        at: 'infinity',
        label: 'é ✓ 𝄞',
        note: 'tab\there "quoted" back\\slash\nline\rcr\bbs\fff\vvt \u0001 \u007f',
      });
    } finally {
      await collector.stop();
      expect(await mirror.stop()).toBe('stopped');
    }
  });

  it('delivers every change at least once and in order per key across kill -9s of the engine', async () => {
    const { source } = harness;
    const topic = randomTopic('ledger');
    topics.push(topic);
    await createTopics(client, [topic], 3);
    await source.client.query(`CREATE TABLE ledger (id int PRIMARY KEY, version int NOT NULL, note text)`);
    await source.client.query(`INSERT INTO ledger SELECT g, 1, 'seed' FROM generate_series(1, 500) g`);
    const versions = new Map<number, number>(Array.from({ length: 500 }, (_, i) => [i + 1, 1]));
    const deleted = new Set<number>();
    const mirror = `kafka-crash-${randomSuffix()}`;
    const configPath = writeEngineConfig(
      harness,
      {
        name: mirror,
        sourcePeer: 'source',
        destinationPeer: 'kafka',
        tableMappings: [
          { source: { schema: 'public', table: 'ledger' }, destination: { schema: 'public', table: topic } },
        ],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        maxBatchSize: 150,
      },
      { destination: { name: 'kafka', kind: 'stream', config: streamConfig('PLAIN') } },
    );

    let seed = Date.now() % 100_000;
    console.info(`kafka crash test seed ${seed}`);
    const next = () => {
      seed = (seed * 1_664_525 + 1_013_904_223) >>> 0;
      return seed / 2 ** 32;
    };
    let writing = true;
    let nextId = 501;
    const alive = () => [...versions.keys()].filter((id) => !deleted.has(id));
    const writer = async () => {
      while (writing) {
        await source.client.query('BEGIN');
        for (let i = 0; i < 1 + Math.floor(next() * 10); i++) {
          const ids = alive();
          const id = ids[Math.floor(next() * ids.length)] ?? 1;
          await source.client.query(`UPDATE ledger SET version = version + 1 WHERE id = $1`, [id]);
          versions.set(id, (versions.get(id) ?? 0) + 1);
        }
        if (next() < 0.5) {
          await source.client.query(`INSERT INTO ledger VALUES ($1, 1, 'new')`, [nextId]);
          versions.set(nextId++, 1);
        }
        if (next() < 0.2) {
          const ids = alive();
          const id = ids[Math.floor(next() * ids.length)] ?? 1;
          await source.client.query(`DELETE FROM ledger WHERE id = $1`, [id]);
          deleted.add(id);
        }
        await source.client.query('COMMIT');
      }
    };

    const first = startEngine(mirror, configPath);
    await waitFor(
      async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
      60_000,
      'running',
    );
    const writing_ = writer();
    let engine = first;
    for (let kill = 0; kill < 4; kill++) {
      if (kill > 0) engine = startEngine(mirror, configPath);
      await new Promise((resolve) => setTimeout(resolve, 1_500 + Math.floor(next() * 2_000)));
      engine.kill('SIGKILL');
      await exited(engine);
    }
    writing = false;
    await writing_;

    const final = startEngine(mirror, configPath);
    const collector = new TopicCollector(client);
    try {
      await collector.start([topic]);
      const caughtUp = () => {
        const last = new Map<number, Change>();
        for (const change of collector.messages.map(decode)) last.set(change.id, change);
        for (const [id, version] of versions) {
          const change = last.get(id);
          if (deleted.has(id) ? change?.kind !== 'delete' : change?.version !== version) return false;
        }
        return true;
      };
      await collector.until(caughtUp, 90_000, 'every final version');

      const byKey = new Map<number, Change[]>();
      for (const change of collector.messages.map(decode)) {
        const list = byKey.get(change.id) ?? [];
        list.push(change);
        byKey.set(change.id, list);
        // One key, one partition: order per key is the partition's order.
        expect(change.message.key).toBe(`{"id":${change.id}}`);
      }
      let duplicates = 0;
      for (const [id, version] of versions) {
        const changes = byKey.get(id) ?? [];
        const seen = changes
          .filter((change) => change.kind !== 'delete')
          .map((change) => change.version ?? 0);
        const firstSeen: number[] = [];
        for (const v of seen) if (!firstSeen.includes(v)) firstSeen.push(v);
        // Every version, first seen in the order it was written.
        expect(firstSeen).toEqual(Array.from({ length: version }, (_, i) => i + 1));
        duplicates += seen.length - firstSeen.length;
        if (deleted.has(id)) expect(changes.at(-1)?.kind).toBe('delete');
      }
      console.info(`kafka crash test: ${collector.messages.length} messages, ${duplicates} replayed`);
    } finally {
      await collector.stop();
      final.kill('SIGTERM');
      expect(await exited(final)).toBe(0);
    }
  });
});

// An online resync of a streaming table into Kafka (issue 39, point 3): the
// table's rows are sent again as `snapshot` messages among its changes on its
// topic, in order with them, under writes and a kill -9 of the engine during
// the resync. A consumer folding the topic from its start ends with the source
// table row by row: a snapshot message never takes a key back to an older row.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTopics,
  deleteTopics,
  kafkaClient,
  randomTopic,
  streamConfig,
  TopicCollector,
} from '../integration/kafka-support.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness } from '../support/mirror-harness.ts';

const seeded = 20_000;

type Row = readonly [string, string | null];

describe('an online resync into Kafka', () => {
  let harness: Harness;
  const client = kafkaClient('PLAINTEXT');
  const topic = randomTopic('resync');
  const collector = new TopicCollector(client);

  beforeAll(async () => {
    harness = await createHarness('rs_kafka');
    await createTopics(client, [topic], 1);
    await collector.start([topic]);
  });

  afterAll(async () => {
    await collector.stop();
    await deleteTopics(client, [topic]);
    await harness?.close();
  });

  /** The table as a consumer folds its one partition's messages, in order. */
  const folded = (from = 0): Row[] => {
    const state = new Map<string, Row>();
    for (const message of collector.messages.slice(from)) {
      const value = JSON.parse(message.value ?? 'null') as {
        kind: string;
        new?: { id: number; v: string | null };
        old?: { id: number };
      };
      if (value.kind === 'truncate') state.clear();
      if (value.old) state.delete(String(value.old.id));
      if (value.new) state.set(String(value.new.id), [String(value.new.id), value.new.v]);
    }
    return [...state.values()].sort((a, b) => Number(a[0]) - Number(b[0]));
  };
  const sourceRows = async (): Promise<Row[]> =>
    (
      await harness.source.client.query<{ id: string; v: string | null }>(
        `SELECT id::text, v FROM events ORDER BY events.id`,
      )
    ).rows.map((row) => [row.id, row.v] as const);
  const expectFoldedSource = async () => {
    await waitFor(
      async () => JSON.stringify(folded()) === JSON.stringify(await sourceRows()),
      120_000,
      'the topic folded to the source',
    ).catch(() => {});
    const [actual, expected] = [folded(), await sourceRows()];
    const actualById = new Map(actual.map((row) => [row[0], row]));
    const differing = expected.filter(
      (row) => JSON.stringify(actualById.get(row[0])) !== JSON.stringify(row),
    );
    expect({ rows: actual.length, differing: differing.slice(0, 5) }).toEqual({
      rows: expected.length,
      differing: [],
    });
  };

  it('sends the rows again among the changes, in order, across a kill -9', { timeout: 600_000 }, async () => {
    const { source } = harness;
    await source.client.query(`DROP TABLE IF EXISTS events`);
    await source.client.query(`CREATE TABLE events (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO events SELECT g, 'v' || g FROM generate_series(1, ${seeded}) g`);
    const mirror = `rs-kafka-${randomSuffix()}`;
    const spec = {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'kafka',
      tableMappings: [
        { source: { schema: 'public', table: 'events' }, destination: { schema: 'public', table: topic } },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const peer = { name: 'kafka', kind: 'stream' as const, config: streamConfig('PLAINTEXT') };
    const stateOf = async () =>
      (await harness.catalog.listTables(mirror)).find((entry) => entry.sourceTable === 'public.events')
        ?.state;
    const started = Date.now();
    const mark = (what: string) => console.info(`${what} after ${Date.now() - started} ms`);
    let running = startEngine(mirror, writeEngineConfig(harness, spec, { destination: peer }));
    await expectFoldedSource();
    mark('loaded');
    await waitFor(
      async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
      30_000,
      'running',
    );
    running.kill('SIGTERM');
    expect(await exited(running)).toBe(0);

    let writing = true;
    let next = seeded + 1;
    const writer = (async () => {
      while (writing) {
        const id = next++;
        await source.client.query('BEGIN');
        await source.client.query(`INSERT INTO events VALUES ($1, 'new')`, [id]);
        await source.client.query(`UPDATE events SET v = v || '+' WHERE id = $1`, [1 + (id % seeded)]);
        await source.client.query(`DELETE FROM events WHERE id = $1`, [1 + ((id * 7) % seeded)]);
        await source.client.query(`UPDATE events SET id = -id WHERE id = $1`, [1 + ((id * 13) % seeded)]);
        await source.client.query('COMMIT');
      }
    })();
    const messagesBefore = collector.messages.length;
    const withResync = writeEngineConfig(
      harness,
      { ...spec, resyncTables: { 'public.events': 'one' } },
      { destination: peer },
    );
    let stateAtKill: string | undefined;
    try {
      running = startEngine(mirror, withResync);
      await waitFor(async () => (await stateOf()) === 'resyncing', 60_000, 'resyncing');
      mark('resyncing');
      await new Promise((resolve) => setTimeout(resolve, 300));
      stateAtKill = await stateOf();
      running.kill('SIGKILL');
      await exited(running);
      running = startEngine(mirror, withResync);
      await waitFor(async () => (await stateOf()) === 'streaming', 300_000, 'resynced');
      mark('resynced');
    } finally {
      writing = false;
      await writer;
    }
    try {
      expect(stateAtKill).toBe('resyncing');
      await expectFoldedSource();
      mark('folded');
      // The resync's rows came as snapshot messages of the table, after the request.
      const sent = collector.messages
        .slice(messagesBefore)
        .map((message) => JSON.parse(message.value ?? '{}'));
      const snapshots = sent.filter((value) => value.kind === 'snapshot');
      expect(snapshots.length).toBeGreaterThan(seeded / 2);
      expect(new Set(snapshots.map((value) => JSON.stringify(value.source)))).toEqual(
        new Set([JSON.stringify({ schema: 'public', table: 'events' })]),
      );
      // Counted as the table's load, not as changes CDC applied.
      const table = (await harness.catalog.listTables(mirror)).find(
        (entry) => entry.sourceTable === 'public.events',
      );
      expect(Number(table?.inserts ?? 0n)).toBeLessThan(next - seeded + 1);
    } finally {
      running.kill('SIGTERM');
      await exited(running);
    }
  });
});

// A fault of one table into Kafka stays with that table (mirror-lifecycle.md,
// "A table's own fault"; kafka/destination.ts, refusedTable): a topic that
// refuses one table's message (its max.message.bytes below the row's size)
// stops that table alone (`errored`, the broker's reason and the topic in its
// problem), while the other table's changes go on to their topic and the
// mirror stays running; once the topic takes such messages, a resync sends
// the table's rows again as snapshot messages, the refused row among them,
// and the topic folded by key equals the source.
import { ConfigResourceTypes } from 'kafkajs';
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
import { waitFor } from '../support/databases.ts';
import { createHarness, type Harness, type SpecInput, startMirror } from '../support/mirror-harness.ts';

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });

describe('a fault of one table into Kafka', () => {
  let harness: Harness;
  const client = kafkaClient('PLAINTEXT');
  const plainTopic = randomTopic('tfk_plain');
  const smallTopic = randomTopic('tfk_small');
  const collector = new TopicCollector(client);

  beforeAll(async () => {
    harness = await createHarness('tf_kafka');
    await createTopics(client, [plainTopic], 1);
    const admin = client.admin();
    await admin.connect();
    try {
      await admin.createTopics({
        topics: [
          {
            topic: smallTopic,
            numPartitions: 1,
            replicationFactor: 1,
            // A record batch of the table's small rows fits; one row of 100 kB does not.
            configEntries: [{ name: 'max.message.bytes', value: '20000' }],
          },
        ],
        waitForLeaders: true,
      });
    } finally {
      await admin.disconnect();
    }
  });

  afterAll(async () => {
    await collector.stop().catch(() => {});
    await deleteTopics(client, [plainTopic, smallTopic]).catch(() => {});
    await harness?.close();
  });

  const stateOf = async (mirror: string, table: string) =>
    (await harness.catalog.listTables(mirror)).find((entry) => entry.sourceTable === table);
  const decoded = (topic: string) =>
    collector.messages
      .filter((message) => message.topic === topic)
      .map(
        (message) => JSON.parse(message.value ?? 'null') as { kind: string; new?: { id: number; v: string } },
      );
  /** The topic folded by key, as [id, v] by id. */
  const folded = (topic: string) => {
    const rows = new Map<number, string>();
    for (const value of decoded(topic)) {
      if (value.kind === 'delete') continue;
      if (value.new) rows.set(value.new.id, value.new.v);
    }
    return [...rows].sort((a, b) => a[0] - b[0]);
  };
  const sourceRows = async (table: string) =>
    (
      await harness.source.client.query<{ id: number; v: string }>(`SELECT id, v FROM ${table} ORDER BY id`)
    ).rows.map((row) => [row.id, row.v] as [number, string]);

  it('stops the table whose topic refuses its message, the other streaming on, and a resync sends it again', {
    timeout: 300_000,
  }, async () => {
    const { source } = harness;
    for (const table of ['plain_t', 'small_t']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text)`);
      await source.client.query(`INSERT INTO ${table} SELECT g, 'v' || g FROM generate_series(1, 20) g`);
    }
    const input: SpecInput = {
      name: `tf-kafka-${Date.now()}`,
      tableMappings: [
        {
          source: { schema: 'public', table: 'plain_t' },
          destination: { schema: 'public', table: plainTopic },
        },
        {
          source: { schema: 'public', table: 'small_t' },
          destination: { schema: 'public', table: smallTopic },
        },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const start = (spec: SpecInput) =>
      startMirror(harness, spec, {
        wrapDestination: () =>
          new KafkaDestination(streamConfig('PLAINTEXT'), { mirror: input.name, logger }),
      });
    let mirror = start(input);
    try {
      await collector.start([plainTopic, smallTopic]);
      await collector.until(
        () => decoded(plainTopic).length >= 20 && decoded(smallTopic).length >= 20,
        120_000,
        'the initial load',
      );
      await waitFor(
        async () => (await harness.catalog.getRuntime(input.name))?.phase === 'running',
        60_000,
        'running',
      );

      // One row larger than the topic takes.
      await source.client.query(`INSERT INTO small_t VALUES (100, repeat('x', 100000))`);
      await source.client.query(`INSERT INTO plain_t VALUES (100, 'beside the refused row')`);
      await waitFor(
        async () => (await stateOf(input.name, 'public.small_t'))?.state === 'errored',
        60_000,
        'errored',
      );
      const stopped = await stateOf(input.name, 'public.small_t');
      expect(stopped?.problem?.kind).toBe('config');
      expect(stopped?.problem?.message).toContain('(MESSAGE_TOO_LARGE)');
      expect(stopped?.problem?.message).toContain(
        `topic ${smallTopic} refused a message larger than the topic's max.message.bytes (or the broker's message.max.bytes) allows, writing the changes of public.small_t`,
      );
      expect(stopped?.behindLsn).not.toBeNull();
      expect((await harness.catalog.getRuntime(input.name))?.phase).toBe('running');

      // The other table goes on.
      await source.client.query(`INSERT INTO plain_t VALUES (101, 'streams on')`);
      await source.client.query(`UPDATE plain_t SET v = 'changed' WHERE id <= 3`);
      const plainRows = await sourceRows('plain_t');
      await collector.until(
        () => JSON.stringify(folded(plainTopic)) === JSON.stringify(plainRows),
        60_000,
        'plain_t to go on',
      );
      expect(folded(plainTopic)).toEqual(plainRows);
      expect((await stateOf(input.name, 'public.plain_t'))?.state).toBe('streaming');

      // The cause fixed, a resync sends the table again, the refused row among its snapshot messages.
      const admin = client.admin();
      await admin.connect();
      try {
        await admin.alterConfigs({
          validateOnly: false,
          resources: [
            {
              type: ConfigResourceTypes.TOPIC,
              name: smallTopic,
              configEntries: [{ name: 'max.message.bytes', value: '1000000' }],
            },
          ],
        });
      } finally {
        await admin.disconnect();
      }
      await mirror.stop();
      mirror = start({ ...input, resyncTables: { 'public.small_t': 'fixed-1' } });
      await waitFor(
        async () => (await stateOf(input.name, 'public.small_t'))?.state === 'streaming',
        120_000,
        'small_t streaming again',
      );
      await source.client.query(`UPDATE small_t SET v = 'streamed' WHERE id = 1`);
      const smallRows = await sourceRows('small_t');
      await collector.until(
        () => JSON.stringify(folded(smallTopic)) === JSON.stringify(smallRows),
        120_000,
        'small_t to equal the source',
      );
      expect(folded(smallTopic)).toEqual(smallRows);
      expect(decoded(smallTopic).some((value) => value.kind === 'snapshot' && value.new?.id === 100)).toBe(
        true,
      );
    } finally {
      await mirror.stop().catch(() => {});
    }
  });
});

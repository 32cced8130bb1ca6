// The Kafka destination against the test broker: every listener, the message
// format, checkpoints, and each partitioner's distribution.
import diagnosticsChannel from 'node:diagnostics_channel';
import { Readable } from 'node:stream';
import kafkajs from 'kafkajs';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KafkaDestination } from '../../engine/src/connectors/kafka/destination.ts';
import type { KafkaHeld } from '../../engine/src/connectors/kafka/held-messages.ts';
import { keyPartition, type PartitionerName } from '../../engine/src/connectors/kafka/partitioners.ts';
import {
  type ChangeBatch,
  type DestinationTable,
  type RowChange,
  unchangedToast,
} from '../../engine/src/connectors/records.ts';
import { rowOfCells } from '../../engine/src/connectors/rows.ts';
import type { StreamConfig } from '../../engine/src/resources/peer.ts';
import { heldBatch } from '../support/batches.ts';
import {
  createTopics,
  deleteTopics,
  kafkaClient,
  type Listener,
  type Received,
  randomTopic,
  storedBatches,
  streamConfig,
  TopicCollector,
} from './kafka-support.ts';

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });
const admin = kafkaClient('PLAINTEXT');

function destination(listener: Listener, partitioner: PartitionerName = '', extra: { script?: string } = {}) {
  return new KafkaDestination(streamConfig(listener, partitioner), {
    mirror: `m-${randomTopic('x')}`,
    logger,
    ...(extra.script ? { script: { name: 'test-script', lang: 'lua' as const, source: extra.script } } : {}),
  });
}

function ordersTable(topic: string, keyColumns: string[] = ['id']): DestinationTable {
  const column = (name: string, typeOid: number, typeName: string) => ({
    name,
    typeOid,
    typeModifier: -1,
    typeName,
    notNull: false,
  });
  return {
    source: { schema: 'public', table: 'orders' },
    destination: { schema: 'public', table: topic },
    columns: [
      column('id', 20, 'bigint'),
      column('amount', 1700, 'numeric'),
      column('placed', 1184, 'timestamptz'),
      column('doc', 3802, 'jsonb'),
    ],
    keyColumns,
  };
}

const transaction = (xid: number) => ({
  xid,
  commitLsn: BigInt(0x1000 + xid),
  commitTimeMicros: 1_767_225_600_000_000n + BigInt(xid),
});

function batch(
  target: KafkaDestination,
  table: DestinationTable,
  batchId: bigint,
  changes: RowChange[],
): ChangeBatch<KafkaHeld> {
  return heldBatch(target, { mirror: '', batchId, endLsn: 0x2000n + batchId }, [{ table, changes }]);
}

const values = (messages: readonly Received[]) =>
  messages.map((message) => (message.value === null ? null : JSON.parse(message.value)));

describe('Kafka destination', () => {
  const topics: string[] = [];

  afterAll(async () => {
    await deleteTopics(admin, topics);
  });

  it.each<Listener>(['PLAINTEXT', 'PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'])(
    'writes snapshot rows and changes, and keeps its checkpoint, over %s',
    async (listener) => {
      const topic = randomTopic(`dest-${listener.toLowerCase()}`);
      topics.push(topic);
      const table = ordersTable(topic);
      const target = destination(listener);
      const mirror = `mirror-${topic}`;
      try {
        await target.setupTables([table]);
        const copied = await target.writeSnapshotPartition(
          table,
          Readable.from(['1\t1.50\t2026-01-01 00:00:00.5+00\t{"a": [1, 2]}\n', '2\t\\N\t\\N\t\\N\n']),
        );
        expect(copied).toBe(2);
        expect(await target.readCheckpoint(mirror)).toBeUndefined();
        const changes: RowChange[] = [
          {
            kind: 'insert',
            transaction: transaction(1),
            newRow: rowOfCells(['3', '9223372036854775807.5', null, null]),
          },
          {
            kind: 'update',
            transaction: transaction(2),
            oldKey: null,
            newRow: rowOfCells(['3', '2', null, unchangedToast]),
          },
          {
            kind: 'update',
            transaction: transaction(2),
            oldKey: rowOfCells(['2', null, null, null]),
            newRow: rowOfCells(['4', null, null, null]),
          },
          { kind: 'delete', transaction: transaction(3), oldKey: rowOfCells(['1', null, null, null]) },
          { kind: 'truncate', transaction: transaction(4) },
        ];
        await target.syncBatch({ ...batch(target, table, 1n, changes), mirror });
        expect(await target.readCheckpoint(mirror)).toEqual({ batchId: 1n, lsn: 0x2001n });
        // A replayed batch is recognised and not sent again.
        await target.syncBatch({ ...batch(target, table, 1n, changes), mirror });

        const collector = new TopicCollector(kafkaClient(listener));
        await collector.start([topic]);
        try {
          await collector.untilCount(7);
          // Nothing more arrives (the replay was skipped).
          await new Promise((resolve) => setTimeout(resolve, 500));
          const { messages } = collector;
          expect(messages).toHaveLength(7);
          expect(messages.map((m) => m.key)).toEqual([
            '{"id":"1"}',
            '{"id":"2"}',
            '{"id":"3"}',
            '{"id":"3"}',
            '{"id":"4"}',
            '{"id":"1"}',
            null,
          ]);
          expect(messages.every((m) => m.partition === 0)).toBe(true);
          const [snapshot, , insert, update, keyChange, deleted, truncated] = values(messages);
          expect(snapshot).toEqual({
            kind: 'snapshot',
            source: { schema: 'public', table: 'orders' },
            target: topic,
            lsn: null,
            commit_time: null,
            xid: null,
            old: null,
            new: { id: '1', amount: '1.50', placed: '2026-01-01T00:00:00.5Z', doc: '{"a": [1, 2]}' },
            unchanged_columns: [],
          });
          expect(insert).toMatchObject({
            kind: 'insert',
            lsn: '0/1001',
            commit_time: '2026-01-01T00:00:00.000001Z',
            xid: 1,
            new: { id: '3', amount: '9223372036854775807.5' },
          });
          expect(update).toMatchObject({ kind: 'update', old: null, unchanged_columns: ['doc'] });
          expect(update.new).toEqual({ id: '3', amount: '2', placed: null });
          expect(keyChange).toMatchObject({ kind: 'update', old: { id: '2' }, new: { id: '4' } });
          expect(deleted).toMatchObject({ kind: 'delete', old: { id: '1' }, new: null, xid: 3 });
          expect(truncated).toMatchObject({ kind: 'truncate', old: null, new: null, xid: 4 });
        } finally {
          await collector.stop();
        }
        await target.removeCheckpoint(mirror);
        expect(await target.readCheckpoint(mirror)).toBeUndefined();
      } finally {
        await target.close();
      }
    },
  );

  it('keeps no admin client or fetcher open between its uses, and readies its producer as CDC starts', async () => {
    // Admin work is rare (the check, the checkpoint read at start, a topic not
    // seen before): each task gets clients of its own, closed after it. The
    // library announces every client it makes on a diagnostics channel.
    const topic = randomTopic('dest-admin');
    topics.push(topic);
    const table = ordersTable(topic);
    const made: { type: string; instance: { isActive(): boolean } }[] = [];
    const onInstance = (message: unknown) => {
      const { type, instance } = message as (typeof made)[number];
      if (type === 'admin' || type === 'consumer') made.push({ type, instance });
    };
    diagnosticsChannel.subscribe('plt:kafka:instances', onInstance);
    const open = () => made.filter(({ instance }) => instance.isActive()).map(({ type }) => type);
    const mirror = `mirror-${topic}`;
    const target = new KafkaDestination(streamConfig('PLAINTEXT'), { mirror, logger });
    try {
      await target.check();
      expect(made.map(({ type }) => type)).toEqual(['admin']);
      expect(open()).toEqual([]);
      await target.setupTables([table]);
      expect(await target.producerReady()).toBeUndefined();
      expect(await target.readCheckpoint(mirror)).toBeUndefined();
      expect(open()).toEqual([]);
      // Reading the checkpoint as CDC starts also readied the producer: it has its producer id.
      expect(typeof (await target.producerReady())).toBe('bigint');
      const insert: RowChange = {
        kind: 'insert',
        transaction: transaction(1),
        newRow: rowOfCells(['1', '2', null, null]),
      };
      await target.syncBatch({ ...batch(target, table, 1n, [insert]), mirror });
      expect(await target.readCheckpoint(mirror)).toEqual({ batchId: 1n, lsn: 0x2001n });
      expect(open()).toEqual([]);
      // The check, the topics, two checkpoint reads: admins, and a fetcher for the read that found a topic.
      expect(made.filter(({ type }) => type === 'admin').length).toBeGreaterThanOrEqual(3);
      expect(made.filter(({ type }) => type === 'consumer').length).toBeGreaterThanOrEqual(1);
    } finally {
      diagnosticsChannel.unsubscribe('plt:kafka:instances', onInstance);
      await target.close();
    }
  });

  describe('partitioners on a 4-partition topic', () => {
    const partitionCount = 4;
    const batches = 3;
    const perBatch = 40;

    async function distribute(
      partitioner: PartitionerName,
      options: { script?: string; keyless?: boolean } = {},
    ) {
      const topic = randomTopic(`part-${partitioner.toLowerCase() || 'default'}`);
      topics.push(topic);
      await createTopics(admin, [topic], partitionCount);
      const table = ordersTable(topic, options.keyless ? [] : ['id']);
      const target = destination('PLAINTEXT', partitioner, options.script ? { script: options.script } : {});
      try {
        await target.setupTables([table]);
        for (let b = 0; b < batches; b++) {
          const changes: RowChange[] = Array.from({ length: perBatch }, (_, i) => ({
            kind: 'insert',
            transaction: transaction(b + 1),
            newRow: rowOfCells([String(b * perBatch + i), '1', null, null]),
          }));
          await target.syncBatch({
            ...batch(target, table, BigInt(b + 1), changes),
            mirror: `mirror-${topic}`,
          });
        }
      } finally {
        await target.close();
      }
      const collector = new TopicCollector(admin);
      await collector.start([topic]);
      try {
        await collector.untilCount(batches * perBatch);
        return collector.messages.map((message) => {
          const value = JSON.parse(message.value ?? 'null');
          return { ...message, id: Number(value.new.id), batch: value.xid as number };
        });
      } finally {
        await collector.stop();
      }
    }

    const counts = (messages: readonly { partition: number }[]) => {
      const perPartition = new Array(partitionCount).fill(0);
      for (const message of messages) perPartition[message.partition]++;
      return perPartition;
    };

    it("'' (kafkajs's default) and StickyKey put each key where the Java client would", async () => {
      for (const partitioner of ['', 'StickyKey'] as const) {
        const messages = await distribute(partitioner);
        for (const message of messages) {
          expect(message.partition).toBe(keyPartition(Buffer.from(message.key ?? ''), partitionCount));
        }
        expect(counts(messages).every((count) => count > 10)).toBe(true);
      }
    });

    it('StickyKey keeps key-less messages on one partition per batch', async () => {
      const messages = await distribute('StickyKey', { keyless: true });
      const perBatch = new Map<number, Set<number>>();
      for (const message of messages) {
        expect(message.key).toBeNull();
        perBatch.set(message.batch, (perBatch.get(message.batch) ?? new Set()).add(message.partition));
      }
      expect([...perBatch.values()].map((partitions) => partitions.size)).toEqual([1, 1, 1]);
    });

    it('RoundRobin rotates over every partition', async () => {
      const messages = await distribute('RoundRobin');
      expect(counts(messages)).toEqual([30, 30, 30, 30]);
      for (const message of messages) expect(message.partition).toBe(message.id % partitionCount);
    });

    it('Sticky sends each batch to one partition and the next batch elsewhere', async () => {
      const messages = await distribute('Sticky');
      const partitionOfBatch = new Map<number, Set<number>>();
      for (const message of messages) {
        partitionOfBatch.set(
          message.batch,
          (partitionOfBatch.get(message.batch) ?? new Set()).add(message.partition),
        );
      }
      const chosen = [...partitionOfBatch.values()].map((partitions) => {
        expect(partitions.size).toBe(1);
        return [...partitions][0];
      });
      expect(new Set(chosen).size).toBe(batches);
    });

    it('LeastBackup evens out what is in flight', async () => {
      const messages = await distribute('LeastBackup');
      expect(counts(messages)).toEqual([30, 30, 30, 30]);
    });

    it('Manual uses the partition the script chose', async () => {
      const messages = await distribute('Manual', {
        script: 'function onRecord(r) return { partition = tonumber(r.new.id) % 4 } end',
      });
      for (const message of messages) expect(message.partition).toBe(message.id % partitionCount);
      expect(counts(messages)).toEqual([30, 30, 30, 30]);
    });
  });

  describe('a truncate', () => {
    let topic: string;
    beforeAll(async () => {
      topic = randomTopic('truncate');
      topics.push(topic);
      await createTopics(admin, [topic], 3);
    });

    it('reaches every partition of the topic', async () => {
      const table = ordersTable(topic);
      const target = destination('PLAINTEXT');
      try {
        await target.setupTables([table]);
        await target.syncBatch({
          ...batch(target, table, 1n, [{ kind: 'truncate', transaction: transaction(9) }]),
          mirror: topic,
        });
      } finally {
        await target.close();
      }
      const collector = new TopicCollector(admin);
      await collector.start([topic]);
      try {
        await collector.untilCount(3);
        expect(collector.messages.map((m) => m.partition).sort()).toEqual([0, 1, 2]);
        expect(collector.messages.every((m) => m.key === null && m.value?.includes('"truncate"'))).toBe(true);
      } finally {
        await collector.stop();
      }
    });
  });

  const compressedRows = 50;
  const compressedKeys = Array.from({ length: compressedRows }, (_, index) => `{"id":"${index + 1}"}`);
  /** Writes inserts of ids 1…compressedRows (id n with amount `${n - 1}.25`) to a new topic with `compression`; returns it. */
  async function writeCompressed(compression: StreamConfig['compression']): Promise<string> {
    const topic = randomTopic(`compressed-${compression}`);
    topics.push(topic);
    const table = ordersTable(topic);
    const target = new KafkaDestination(
      { ...streamConfig('PLAINTEXT'), compression },
      { mirror: `m-${topic}`, logger },
    );
    const changes: RowChange[] = Array.from({ length: compressedRows }, (_, index) => ({
      kind: 'insert',
      transaction: transaction(index + 1),
      newRow: rowOfCells([String(index + 1), `${index}.25`, null, null]),
    }));
    try {
      await target.setupTables([table]);
      await target.syncBatch({ ...batch(target, table, 1n, changes), mirror: `m-${topic}` });
    } finally {
      await target.close();
    }
    return topic;
  }
  it.each(['gzip', 'zstd'] as const)(
    'compresses its requests with %s, and a consumer reads the messages back',
    async (compression) => {
      const topic = await writeCompressed(compression);
      // The consumer decodes record batches with the codec their attributes name:
      // counting its calls shows the batches were stored compressed with it.
      const type = compression === 'gzip' ? kafkajs.CompressionTypes.GZIP : kafkajs.CompressionTypes.ZSTD;
      const codec = kafkajs.CompressionCodecs[type];
      let decompressed = 0;
      kafkajs.CompressionCodecs[type] = () => {
        const inner = codec();
        return {
          compress: inner.compress,
          decompress: (buffer: Buffer) => {
            decompressed++;
            return inner.decompress(buffer);
          },
        };
      };
      const collector = new TopicCollector(admin);
      try {
        await collector.start([topic]);
        await collector.untilCount(compressedRows);
        expect(decompressed).toBeGreaterThan(0);
        expect(collector.messages.map((m) => m.key)).toEqual(compressedKeys);
        expect(values(collector.messages).map((value) => value.new.amount)).toEqual(
          compressedKeys.map((_, index) => `${index}.25`),
        );
      } finally {
        kafkajs.CompressionCodecs[type] = codec;
        await collector.stop();
      }
    },
  );

  it.each(['gzip', 'lz4', 'snappy', 'zstd'] as const)(
    'stores its record batches compressed with %s, as Kafka itself reads them',
    async (compression) => {
      const topic = await writeCompressed(compression);
      // The destination creates the topic with the broker's num.partitions, 1 here.
      const stored = await storedBatches(topic, 0);
      expect(stored.length).toBeGreaterThan(0);
      expect(new Set(stored.map((stored) => stored.codec))).toEqual(new Set([compression]));
      const records = stored.flatMap((stored) => stored.records);
      expect(records.map((record) => record.key).sort()).toEqual([...compressedKeys].sort());
      for (const record of records) {
        const id = Number(JSON.parse(record.key).id);
        expect(JSON.parse(record.payload).new).toEqual({
          id: String(id),
          amount: `${id - 1}.25`,
          placed: null,
          doc: null,
        });
      }
    },
  );

  it('writes a header a script repeats once per value', async () => {
    const topic = randomTopic('headers');
    topics.push(topic);
    const table = ordersTable(topic);
    const target = destination('PLAINTEXT', '', {
      script: `function onRecord(r) return { value = 'v', headers = { tag = { 'a', 'b' }, one = 'x' } } end`,
    });
    try {
      await target.setupTables([table]);
      await target.syncBatch({
        ...batch(target, table, 1n, [
          { kind: 'insert', transaction: transaction(1), newRow: rowOfCells(['1', null, null, null]) },
        ]),
        mirror: topic,
      });
    } finally {
      await target.close();
    }
    const collector = new TopicCollector(admin);
    try {
      await collector.start([topic]);
      await collector.untilCount(1);
      // kafkajs hands a repeated header over as the list of its values.
      expect(collector.messages[0]?.headers).toEqual({ tag: 'a,b', one: 'x' });
    } finally {
      await collector.stop();
    }
  });
});

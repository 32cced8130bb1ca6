// Kafka producers compared on the destination's own messages, by hand:
// `node bench/kafka-producers.ts` with the test Kafka up. Not a test: it prints
// figures, asserts nothing.
//
// Every round sends the same BENCH_MESSAGES insert changes (formatted as the
// destination formats them, the formatting inside the timed part) into a fresh
// 1-partition topic through each variant, variants alternating round by round:
//
//   destination       KafkaDestination.syncBatch (its producer, @platformatic/kafka;
//                     its requests of ≤ 512 KiB / 500 messages; its checkpoint)
//   destination-2000  the same with requests of ≤ 2,000 messages, -250 of 250
//   kafkajs-2000      bare kafkajs, idempotent, acks=all, requests of ≤ 512 KiB /
//                     2,000 messages, one in flight while the next is built
//   kafkajs-500       the same with requests of ≤ 500 messages (kafkajs groups a
//                     request's messages per partition in quadratic time)
//   platformatic      @platformatic/kafka, idempotent, acks=all, requests of
//                     ≤ 512 KiB / 2,000 messages, one in flight while the next is
//                     built
//   …-gzip/-lz4/-zstd compressed variants (BENCH_COMPRESSION=1)
//
// Reported per variant: median messages/s (wall clock) with min–max, and median
// CPU microseconds per message of this process (process.cpuUsage, user+system).
// BENCH_MESSAGES defaults to 100,000, BENCH_ROUNDS to 3; BENCH_VARIANTS (names,
// comma-separated) keeps only those variants.
import { loadavg } from 'node:os';
import {
  type CompressionAlgorithmValue,
  ProduceAcks,
  Producer,
  stringSerializers,
} from '@platformatic/kafka';
import type { Message } from 'kafkajs';
import kafkajs from 'kafkajs';
import pino from 'pino';
import { defaultChunkBytes, recordOverheadBytes } from '../engine/src/connectors/kafka/apply.ts';
import { maxChunkMessages } from '../engine/src/connectors/kafka/chunk-sender.ts';
import { KafkaDestination } from '../engine/src/connectors/kafka/destination.ts';
import type { KafkaHeld } from '../engine/src/connectors/kafka/held-messages.ts';
import { tableFormat } from '../engine/src/connectors/kafka/message-format.ts';
import { changeRecord } from '../engine/src/connectors/kafka/script-records.ts';
import type { ChangeBatch, DestinationTable, RowChange } from '../engine/src/connectors/records.ts';
import { rowOfCells } from '../engine/src/connectors/rows.ts';
import type { StreamConfig } from '../engine/src/resources/peer.ts';
import { createTopics, deleteTopics, kafkaClient, streamConfig } from '../test/integration/kafka-support.ts';
import { kafka } from '../test/support/testenv.ts';

const messageCount = Number(process.env.BENCH_MESSAGES ?? 100_000);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const logger = pino({ level: 'warn' });
const runId = Math.random().toString(36).slice(2, 8);
const prefix = `bench-producers-${runId}`;

function table(topic: string): DestinationTable {
  const column = (name: string, typeOid: number, typeName: string) => ({
    name,
    typeOid,
    typeModifier: -1,
    typeName,
    notNull: false,
  });
  return {
    source: { schema: 'public', table: 'bench' },
    destination: { schema: 'public', table: topic },
    columns: [
      column('id', 20, 'bigint'),
      column('account', 23, 'integer'),
      column('amount', 1700, 'numeric'),
      column('note', 25, 'text'),
      column('created', 1184, 'timestamptz'),
    ],
    keyColumns: ['id'],
  };
}

function changes(): RowChange[] {
  const out: RowChange[] = [];
  for (let i = 0; i < messageCount; i++) {
    const transaction = {
      xid: 1000 + Math.floor(i / 10),
      commitLsn: BigInt(0x1000000 + i),
      commitTimeMicros: 1_767_225_600_000_000n + BigInt(i),
    };
    out.push({
      kind: 'insert',
      transaction,
      newRow: rowOfCells([
        String(i + 1),
        String(i % 1000),
        `${i % 10000}.${String(i % 100).padStart(2, '0')}`,
        `note ${i} lorem ipsum dolor sit amet`,
        '2026-11-24 04:00:00.123456+00',
      ]),
    });
  }
  return out;
}

/** The destination's key and value of every change, built inside the timed part. */
function* formatted(target: DestinationTable, rows: readonly RowChange[]) {
  const format = tableFormat(target);
  for (const change of rows) {
    const record = changeRecord(format, change);
    yield { key: record.key, value: record.json };
  }
}

type Variant = (topic: string, rows: readonly RowChange[]) => Promise<void>;

/**
 * Sends formatted messages as the destination cuts its requests (by bytes and
 * by count), with one request in flight: the next chunk is built while the
 * previous one is sent.
 */
async function sendInChunks<M>(
  formattedMessages: Iterable<{ key: string | null; value: string }>,
  maxMessages: number,
  toMessage: (formatted: { key: string | null; value: string }) => M,
  send: (messages: M[]) => Promise<unknown>,
): Promise<void> {
  let inFlight: Promise<unknown> | undefined;
  let chunk: M[] = [];
  let bytes = 0;
  const flush = async () => {
    const messages = chunk;
    chunk = [];
    bytes = 0;
    await inFlight;
    inFlight = send(messages);
  };
  for (const message of formattedMessages) {
    chunk.push(toMessage(message));
    bytes += recordOverheadBytes + (message.key?.length ?? 0) + message.value.length;
    if (bytes >= defaultChunkBytes || chunk.length >= maxMessages) await flush();
  }
  if (chunk.length > 0) await flush();
  await inFlight;
}

function viaDestination(chunkMessages: number, compression: StreamConfig['compression'] = 'none'): Variant {
  return async (topic, rows) => {
    const target = table(topic);
    const destination = new KafkaDestination(
      { ...streamConfig('PLAINTEXT'), compression },
      {
        mirror: `${prefix}-${topic}`,
        logger,
        chunkMessages,
      },
    );
    try {
      await destination.setupTables([target]);
      await destination.readCheckpoint(`${prefix}-${topic}`);
      const held = destination.changeBuffer(target);
      for (const row of rows) held.add(row);
      const batch: ChangeBatch<KafkaHeld> = {
        mirror: `${prefix}-${topic}`,
        batchId: 1n,
        endLsn: 0x2000000n,
        tables: [{ table: target, held }],
        rowCount: rows.length,
      };
      await timed(() => destination.syncBatch(batch));
    } finally {
      await destination.close();
    }
  };
}

function viaKafkajs(chunkMessages: number, compression: kafkajs.CompressionTypes): Variant {
  return async (topic, rows) => {
    const producer = kafkaClient('PLAINTEXT').producer({
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: kafkajs.Partitioners.DefaultPartitioner,
    });
    await producer.connect();
    try {
      await timed(() =>
        sendInChunks(
          formatted(table(topic), rows),
          chunkMessages,
          ({ key, value }): Message => ({ key, value, partition: 0 }),
          (messages) => producer.sendBatch({ acks: -1, compression, topicMessages: [{ topic, messages }] }),
        ),
      );
    } finally {
      await producer.disconnect();
    }
  };
}

function viaPlatformatic(compression: CompressionAlgorithmValue | undefined): Variant {
  return async (topic, rows) => {
    const producer = new Producer({
      clientId: `${prefix}-platformatic`,
      bootstrapBrokers: [kafka.plaintextBroker],
      serializers: stringSerializers,
      idempotent: true,
      acks: ProduceAcks.ALL,
      ...(compression ? { compression } : {}),
      autocreateTopics: false,
    });
    try {
      await timed(() =>
        sendInChunks(
          formatted(table(topic), rows),
          2_000,
          ({ key, value }) => ({ topic, key: key ?? '', value, partition: 0 }),
          (messages) => producer.send({ messages }),
        ),
      );
    } finally {
      await producer.close();
    }
  };
}

let lastWallMs = 0;
let lastCpuUs = 0;

async function timed(run: () => Promise<void>): Promise<void> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await run();
  lastWallMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  lastCpuUs = used.user + used.system;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
};

async function main(): Promise<void> {
  const variants = new Map<string, Variant>([
    ['destination', viaDestination(maxChunkMessages)],
    ['destination-2000', viaDestination(2_000)],
    ['destination-250', viaDestination(250)],
    ['kafkajs-2000', viaKafkajs(2_000, kafkajs.CompressionTypes.None)],
    ['kafkajs-500', viaKafkajs(500, kafkajs.CompressionTypes.None)],
  ]);
  const compress = process.env.BENCH_COMPRESSION === '1';
  if (compress) {
    variants.set('destination-gzip', viaDestination(maxChunkMessages, 'gzip'));
    variants.set('destination-zstd', viaDestination(maxChunkMessages, 'zstd'));
    variants.set('kafkajs-gzip', viaKafkajs(maxChunkMessages, kafkajs.CompressionTypes.GZIP));
  }
  variants.set('platformatic', viaPlatformatic(undefined));
  if (compress) {
    for (const codec of ['gzip', 'lz4', 'zstd'] as const) {
      variants.set(`platformatic-${codec}`, viaPlatformatic(codec));
    }
  }
  const only = process.env.BENCH_VARIANTS?.split(',');
  if (only) for (const name of [...variants.keys()]) if (!only.includes(name)) variants.delete(name);
  const rows = changes();
  const admin = kafkaClient('PLAINTEXT');
  const topics: string[] = [];
  const results = new Map<string, { rate: number[]; cpu: number[] }>();
  const loads = [loadavg()];
  try {
    for (let round = 0; round < rounds; round++) {
      const order = [...variants.keys()];
      if (round % 2 === 1) order.reverse();
      for (const name of order) {
        const topic = `${prefix}-${name}-${round}`;
        topics.push(topic);
        await createTopics(admin, [topic], 1);
        await variants.get(name)?.(topic, rows);
        const entry = results.get(name) ?? { rate: [], cpu: [] };
        entry.rate.push(messageCount / (lastWallMs / 1000));
        entry.cpu.push(lastCpuUs / messageCount);
        results.set(name, entry);
        console.log(
          `round ${round + 1} ${name}: ${Math.round(messageCount / (lastWallMs / 1000))} msg/s, ` +
            `${(lastCpuUs / messageCount).toFixed(2)} µs CPU/msg`,
        );
      }
      loads.push(loadavg());
    }
  } finally {
    await deleteTopics(admin, topics).catch(() => {});
  }
  console.log(
    `\n${messageCount} messages × ${rounds} rounds; load average ${loads.map((l) => l[0]?.toFixed(2)).join(' → ')}`,
  );
  console.log('| variant | messages/s (median, min–max) | CPU µs/message (median) |');
  console.log('| --- | --- | --- |');
  for (const [name, { rate, cpu }] of results) {
    const k = (value: number) => `${(value / 1000).toFixed(1)} k`;
    console.log(
      `| ${name} | ${k(median(rate))} (${k(Math.min(...rate))}–${k(Math.max(...rate))}) | ${median(cpu).toFixed(2)} |`,
    );
  }
}

await main();

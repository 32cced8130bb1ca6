// Reading back what a system wrote to a Kafka topic: every message once, to
// check each id arrived exactly once and to take the append times.
import { randomUUID } from 'node:crypto';
import type { Admin } from '@platformatic/kafka';
import { createStreamAdmin } from '../../engine/src/connectors/kafka/client.ts';
import { createTopics, kafkaClient, streamConfig } from '../../test/integration/kafka-support.ts';
import { until } from '../lib/stats.ts';

export async function createTopic(topic: string): Promise<void> {
  await createTopics(kafkaClient('PLAINTEXT'), [topic], 1);
}

export async function deleteTopic(topic: string): Promise<void> {
  const admin = kafkaClient('PLAINTEXT').admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: [topic], timeout: 15_000 });
  } catch {
    // Already gone, or never made: nothing to clean.
  } finally {
    await admin.disconnect();
  }
}

/** One admin client for every count of a group's runs (closeMessageCounter ends it). */
let counter: Promise<Admin> | undefined;

/**
 * The number of messages in the topic (one partition, from offset 0). The
 * runs poll it every 50 ms on the thread the engine runs on, so one client
 * serves every poll: a kafkajs client made per poll cost 2.4 ms of CPU each
 * (about 4% of a core at that rate, taken from the engine), a poll on an open
 * connection 0.65 ms.
 */
export async function messageCount(topic: string): Promise<number> {
  counter ??= createStreamAdmin(streamConfig('PLAINTEXT'), { clientId: 'bench-counter' });
  const admin = await counter;
  const [listed] = await admin.listOffsets({
    topics: [{ name: topic, partitions: [{ partitionIndex: 0, timestamp: -1n }] }],
  });
  return Number(listed?.partitions[0]?.offset ?? 0n);
}

/** Closes the client of messageCount, so that nothing keeps the process alive. */
export async function closeMessageCounter(): Promise<void> {
  const closing = counter;
  counter = undefined;
  await (await closing)?.close();
}

export interface TopicContents {
  readonly messageCount: number;
  readonly distinctIds: number;
  /** Producer timestamps (CreateTime, ms) of the first and the last message. */
  readonly firstMs: number;
  readonly lastMs: number;
  /** Per message: its timestamp − the row's `created` value, ms (when asked for). */
  readonly latenciesMs: number[];
}

/** The row of a message, in Tributary's format (`new`) or Debezium's (`after`). */
function rowOf(value: string): Record<string, unknown> | undefined {
  const document = JSON.parse(value) as { new?: Record<string, unknown>; after?: Record<string, unknown> };
  return document.new ?? document.after;
}

/** A message as a reader of a run's topic needs it. */
export interface TopicMessage {
  readonly key: string | null;
  readonly value: string | null;
  /** The producer timestamp (CreateTime), ms. */
  readonly timestampMs: number;
}

/** Reads the topic (one partition) from its start until `expected` messages came, each handed to `visit` in order. */
export async function consumeTopic(
  topic: string,
  expected: number,
  visit: (message: TopicMessage) => void,
): Promise<void> {
  const consumer = kafkaClient('PLAINTEXT').consumer({
    groupId: `bench-${randomUUID()}`,
    maxBytes: 16 << 20,
  });
  let count = 0;
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        for (const message of batch.messages) {
          count++;
          visit({
            key: message.key?.toString() ?? null,
            value: message.value?.toString() ?? null,
            timestampMs: Number(message.timestamp),
          });
        }
      },
    });
    await until(`read ${topic}`, async () => count >= expected, 10 * 60_000, 200);
  } finally {
    await consumer.disconnect();
  }
}

/** Reads the topic's `expected` messages from its start. */
export async function readTopic(
  topic: string,
  expected: number,
  withLatency: boolean,
): Promise<TopicContents> {
  const ids = new Set<string>();
  const latenciesMs: number[] = [];
  let count = 0;
  let firstMs = Number.POSITIVE_INFINITY;
  let lastMs = Number.NEGATIVE_INFINITY;
  await consumeTopic(topic, expected, (message) => {
    count++;
    firstMs = Math.min(firstMs, message.timestampMs);
    lastMs = Math.max(lastMs, message.timestampMs);
    const key = JSON.parse(message.key ?? 'null') as { id?: unknown } | null;
    ids.add(String(key?.id));
    if (withLatency && message.value) {
      const created = rowOf(message.value)?.created;
      latenciesMs.push(message.timestampMs - Date.parse(String(created)));
    }
  });
  return { messageCount: count, distinctIds: ids.size, firstMs, lastMs, latenciesMs };
}

/** Throws unless the topic holds `rowCount` messages with `rowCount` distinct ids. */
export function expectEveryIdOnce(what: string, contents: TopicContents, rowCount: number): void {
  if (contents.messageCount !== rowCount || contents.distinctIds !== rowCount) {
    throw new Error(
      `${what}: ${contents.messageCount} messages with ${contents.distinctIds} distinct ids, ${rowCount} expected`,
    );
  }
}

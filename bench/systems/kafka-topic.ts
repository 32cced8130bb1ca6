// Reading back what a system wrote to a Kafka topic: every message once, to
// check each id arrived exactly once and to take the append times.
import { randomUUID } from 'node:crypto';
import { createTopics, kafkaClient } from '../../test/integration/kafka-support.ts';
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

/** The number of messages in the topic (one partition, from offset 0). */
export async function messageCount(topic: string): Promise<number> {
  const admin = kafkaClient('PLAINTEXT').admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.reduce((sum, partition) => sum + Number(partition.high), 0);
  } finally {
    await admin.disconnect();
  }
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

/** Reads the topic's `expected` messages from its start. */
export async function readTopic(
  topic: string,
  expected: number,
  withLatency: boolean,
): Promise<TopicContents> {
  const consumer = kafkaClient('PLAINTEXT').consumer({
    groupId: `bench-${randomUUID()}`,
    maxBytes: 16 << 20,
  });
  const ids = new Set<string>();
  const latenciesMs: number[] = [];
  let count = 0;
  let firstMs = Number.POSITIVE_INFINITY;
  let lastMs = Number.NEGATIVE_INFINITY;
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        for (const message of batch.messages) {
          count++;
          const timestamp = Number(message.timestamp);
          firstMs = Math.min(firstMs, timestamp);
          lastMs = Math.max(lastMs, timestamp);
          const key = JSON.parse(message.key?.toString() ?? 'null') as { id?: unknown } | null;
          ids.add(String(key?.id));
          if (withLatency && message.value) {
            const created = rowOf(message.value.toString())?.created;
            latenciesMs.push(timestamp - Date.parse(String(created)));
          }
        }
      },
    });
    await until(`read ${topic}`, async () => count >= expected, 10 * 60_000, 200);
  } finally {
    await consumer.disconnect();
  }
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

// Mirror checkpoints in a compacted topic: Kafka cannot make a batch's messages
// and its checkpoint durable together, so the checkpoint (key: the mirror) is
// written after every message of the batch is acknowledged. A crash between
// the two replays the batch: consumers then see its messages twice, which
// at-least-once delivery allows. A batch cut inside a transaction also records
// the position of its last change in it, written the same way: after the
// messages up to that change are acknowledged.
import { randomUUID } from 'node:crypto';
import type { Producer } from '@platformatic/kafka';
import type { Admin, Kafka } from 'kafkajs';
import { EngineError } from '../../errors.ts';
import { formatLsn } from '../../model/lsn.ts';
import { classifyKafkaError } from '../classify/index.ts';
import type { Checkpoint } from '../records.ts';
import { checkpointTopic } from './topics.ts';

/** The checkpoint topic's settings: one partition (it holds one small message per mirror), compacted. */
export const checkpointTopicConfig = {
  topic: checkpointTopic,
  numPartitions: 1,
  configEntries: [{ name: 'cleanup.policy', value: 'compact' }],
};

interface StoredCheckpoint {
  readonly batch_id: string;
  readonly lsn: string;
  readonly lsn_text?: string;
  readonly written_at?: string;
  /** The position inside the next transaction, when the batch ended inside it. */
  readonly txn_commit_lsn?: string;
  readonly txn_change_lsn?: string;
  readonly txn_change_rank?: number;
}

type BufferProducer = Producer<Buffer, Buffer, Buffer, Buffer>;

export async function writeCheckpoint(
  producer: BufferProducer,
  mirror: string,
  checkpoint: Checkpoint,
): Promise<void> {
  const stored: StoredCheckpoint = {
    batch_id: checkpoint.batchId.toString(),
    lsn: checkpoint.lsn.toString(),
    lsn_text: formatLsn(checkpoint.lsn),
    written_at: new Date().toISOString(),
    ...(checkpoint.transactionPosition
      ? {
          txn_commit_lsn: checkpoint.transactionPosition.commitLsn.toString(),
          txn_change_lsn: checkpoint.transactionPosition.changeLsn.toString(),
          txn_change_rank: checkpoint.transactionPosition.changeRank,
        }
      : {}),
  };
  await producer.send({
    compression: 'none',
    messages: [
      {
        topic: checkpointTopic,
        key: Buffer.from(mirror),
        value: Buffer.from(JSON.stringify(stored)),
        partition: 0,
      },
    ],
  });
}

/** A tombstone: compaction then forgets the mirror's checkpoint. */
export async function deleteCheckpoint(producer: BufferProducer, mirror: string): Promise<void> {
  // A null value: the send writes it as Kafka's null, which compaction reads as a tombstone.
  await producer.send({
    compression: 'none',
    messages: [
      { topic: checkpointTopic, key: Buffer.from(mirror), value: null as unknown as Buffer, partition: 0 },
    ],
  });
}

/**
 * The last checkpoint of `mirror`: the topic is read from its start to its
 * current end by a throw-away consumer group (kafkajs has no group-less
 * consumer), deleted afterwards.
 */
export async function readCheckpoint(
  kafka: Kafka,
  admin: Admin,
  mirror: string,
  timeoutMs: number,
): Promise<Checkpoint | undefined> {
  if (!(await admin.listTopics()).includes(checkpointTopic)) return undefined;
  const ends = new Map<number, bigint>();
  for (const offsets of await admin.fetchTopicOffsets(checkpointTopic)) {
    if (BigInt(offsets.high) > BigInt(offsets.low)) ends.set(offsets.partition, BigInt(offsets.high));
  }
  if (ends.size === 0) return undefined;

  const groupId = `tributary-checkpoint-reader-${randomUUID()}`;
  const consumer = kafka.consumer({ groupId, allowAutoTopicCreation: false, maxWaitTimeInMs: 200 });
  let last: Buffer | null | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    await consumer.connect();
    await consumer.subscribe({ topic: checkpointTopic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(
        () =>
          reject(new EngineError('destination_write', `destination: reading ${checkpointTopic} timed out`)),
        timeoutMs,
      );
      consumer
        .run({
          autoCommit: false,
          eachBatch: async ({ batch }) => {
            for (const message of batch.messages) {
              if (message.key?.toString() === mirror) last = message.value;
            }
            const end = ends.get(batch.partition);
            // Compaction leaves gaps, never removes the last message: stop at the end seen above.
            if (end !== undefined && !batch.isEmpty() && BigInt(batch.lastOffset()) + 1n >= end) {
              ends.delete(batch.partition);
            }
            if (ends.size === 0) resolve();
          },
        })
        .catch(reject);
    });
  } catch (error) {
    throw classifyKafkaError(error, `destination: read checkpoint from ${checkpointTopic}`);
  } finally {
    clearTimeout(timer);
    await consumer.disconnect().catch(() => {});
    await admin.deleteGroups([groupId]).catch(() => {});
  }
  if (!last) return undefined;
  let stored: StoredCheckpoint;
  try {
    stored = JSON.parse(last.toString('utf8')) as StoredCheckpoint;
    const checkpoint: Checkpoint = { batchId: BigInt(stored.batch_id), lsn: BigInt(stored.lsn) };
    if (stored.txn_commit_lsn === undefined || stored.txn_change_lsn === undefined) return checkpoint;
    return {
      ...checkpoint,
      transactionPosition: {
        commitLsn: BigInt(stored.txn_commit_lsn),
        changeLsn: BigInt(stored.txn_change_lsn),
        changeRank: stored.txn_change_rank ?? 0,
      },
    };
  } catch (cause) {
    throw new EngineError('destination_write', `destination: the checkpoint of ${mirror} is not readable`, {
      cause,
    });
  }
}

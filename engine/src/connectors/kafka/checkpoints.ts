// Mirror checkpoints in a compacted topic: Kafka cannot make a batch's messages
// and its checkpoint durable together, so the checkpoint (key: the mirror) is
// written after every message of the batch is acknowledged. A crash between
// the two replays the batch: consumers then see its messages twice, which
// at-least-once delivery allows. A batch cut inside a transaction also records
// the position of its last change in it, written the same way: after the
// messages up to that change are acknowledged.
//
// CheckpointStore's contract: `stored` answers the mirror's last checkpoint,
// read from the topic once and then remembered as this destination writes or
// removes it (one engine writes a mirror's checkpoints); `write` resolves once
// the checkpoint message is acknowledged. Each fails with a classified
// EngineError (a failed write replaces the producer, transport.ts).
import type { Admin, Consumer, Producer } from '@platformatic/kafka';
import { EngineError } from '../../errors.ts';
import { formatLsn } from '../../model/lsn.ts';
import { classifyKafkaError } from '../classify/index.ts';
import type { Checkpoint } from '../records.ts';
import { connectionErrorOf } from './client.ts';
import { checkpointTopic, type KnownTopics } from './topics.ts';
import type { KafkaTransport } from './transport.ts';

const checkpointReadTimeoutMs = 60_000;

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

/** A fetched record batch: where it starts and its records' offsets from there. */
export interface FetchedBatch {
  readonly firstOffset: bigint;
  readonly lastOffsetDelta: number;
  readonly records: readonly {
    readonly offsetDelta: number;
    readonly key: Buffer | null;
    readonly value: Buffer | null;
  }[];
}

/** What a scan of fetched batches found: the mirror's last value, and where to fetch next. */
export interface ScanResult {
  /** The last value seen under the mirror's key (null: a tombstone), or undefined when none. */
  readonly last: Buffer | null | undefined;
  readonly nextOffset: bigint;
}

/**
 * Reads `batches` (in offset order) for the mirror's messages below `end`,
 * after what `previous` found. Compaction leaves gaps in offsets, never removes
 * a batch's end, so the next fetch starts after the last batch read.
 */
export function scanCheckpointBatches(
  batches: readonly FetchedBatch[],
  mirror: string,
  end: bigint,
  previous: ScanResult,
): ScanResult {
  const key = Buffer.from(mirror);
  let { last, nextOffset } = previous;
  for (const batch of batches) {
    for (const record of batch.records) {
      const offset = batch.firstOffset + BigInt(record.offsetDelta);
      if (offset < nextOffset || offset >= end) continue;
      if (record.key?.equals(key)) last = record.value;
    }
    const after = batch.firstOffset + BigInt(batch.lastOffsetDelta) + 1n;
    if (after > nextOffset) nextOffset = after;
  }
  return { last, nextOffset };
}

const partitionFetchBytes = 1024 * 1024;

/**
 * The last checkpoint of `mirror`: every partition of the topic is fetched
 * from its start to the end it had when the read began, without a consumer
 * group (the fetcher never joins one).
 */
export async function readCheckpoint(
  admin: Admin,
  fetcher: Consumer<Buffer, Buffer, Buffer, Buffer>,
  mirror: string,
  timeoutMs: number,
): Promise<Checkpoint | undefined> {
  if (!(await admin.listTopics()).includes(checkpointTopic)) return undefined;
  const deadline = Date.now() + timeoutMs;
  let last: Buffer | null | undefined;
  try {
    // Tracked, the topic is in the metadata each fetch reads: brokers before
    // Kafka 3.1 (Fetch v12 and older) are asked for it by name, not by id.
    fetcher.topics.track(checkpointTopic);
    const metadata = await fetcher.metadata({ topics: [checkpointTopic], forceUpdate: true });
    const topic = metadata.topics.get(checkpointTopic);
    if (!topic) return undefined;
    const topics = [checkpointTopic];
    const starts = (await fetcher.listOffsets({ topics, timestamp: -2n })).get(checkpointTopic) ?? [];
    const ends = (await fetcher.listOffsets({ topics, timestamp: -1n })).get(checkpointTopic) ?? [];
    for (const [partition, end] of ends.entries()) {
      let scan: ScanResult = { last, nextOffset: starts[partition] ?? 0n };
      while (scan.nextOffset < end) {
        if (Date.now() > deadline) {
          throw new EngineError('destination_write', `destination: reading ${checkpointTopic} timed out`);
        }
        const response = await fetcher.fetch({
          node: topic.partitions[partition]?.leader ?? -1,
          topics: [
            {
              topicId: topic.id,
              partitions: [
                {
                  partition,
                  currentLeaderEpoch: -1,
                  fetchOffset: scan.nextOffset,
                  lastFetchedEpoch: -1,
                  partitionMaxBytes: partitionFetchBytes,
                },
              ],
            },
          ],
          maxWaitTime: 200,
          minBytes: 1,
          maxBytes: partitionFetchBytes,
        });
        const fetched = response.responses[0]?.partitions.find((p) => p.partitionIndex === partition);
        scan = scanCheckpointBatches(fetched?.records ?? [], mirror, end, scan);
      }
      last = scan.last;
    }
  } catch (error) {
    throw classifyKafkaError(error, `destination: read checkpoint from ${checkpointTopic}`);
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

export class CheckpointStore {
  readonly #transport: KafkaTransport;
  readonly #topics: KnownTopics;
  /** The last checkpoint read or written: undefined until known, null when there is none. */
  #checkpoint: Checkpoint | null | undefined;

  constructor(transport: KafkaTransport, topics: KnownTopics) {
    this.#transport = transport;
    this.#topics = topics;
  }

  /** The mirror's last checkpoint, read from the topic (no consumer group). */
  async read(mirror: string): Promise<Checkpoint | undefined> {
    return this.#transport.withAdmin((admin) =>
      this.#transport.withFetcher(async (fetcher) => {
        try {
          const checkpoint = await readCheckpoint(admin, fetcher, mirror, checkpointReadTimeoutMs);
          this.#checkpoint = checkpoint ?? null;
          return checkpoint;
        } catch (error) {
          const connectionError = connectionErrorOf(fetcher) ?? connectionErrorOf(admin);
          throw classifyKafkaError(
            error,
            'destination: read checkpoint',
            'destination_write',
            connectionError,
          );
        }
      }),
    );
  }

  /** The last checkpoint known, read first if it is not. */
  async stored(mirror: string): Promise<Checkpoint | null> {
    if (this.#checkpoint === undefined) await this.read(mirror);
    return this.#checkpoint ?? null;
  }

  /** Writes the checkpoint after its batch's messages are acknowledged; `what` names the batch. */
  async write(mirror: string, checkpoint: Checkpoint, what: string): Promise<void> {
    try {
      await writeCheckpoint(await this.#transport.producer(), mirror, checkpoint);
    } catch (error) {
      throw await this.#transport.producerFailure(error, `${what}: write checkpoint`);
    }
    this.#checkpoint = checkpoint;
  }

  /** Writes the mirror's tombstone (the checkpoint topic is created first when missing). */
  async remove(mirror: string): Promise<void> {
    try {
      await this.#topics.ensure([]);
      await deleteCheckpoint(await this.#transport.producer(), mirror);
      this.#checkpoint = null;
    } catch (error) {
      throw await this.#transport.producerFailure(error, 'destination: remove checkpoint');
    }
  }
}

// The partitioners a stream peer names (`partitioner`), with the meanings the
// Go client franz-go gives them; '' is kafkajs's default partitioner, which
// matches the Java client's for keyed messages (docs/kafka.md).
//
// The destination picks every message's partition itself and hands the
// producer explicit partitions, so that partition choice does not depend on the
// client's internals and LeastBackup can see what is in flight.
import { randomBytes } from 'node:crypto';
import { EngineError } from '../../errors.ts';
import type { partitioners } from '../../resources/peer.ts';

export type PartitionerName = (typeof partitioners)[number];

/**
 * Kafka's murmur2 (org.apache.kafka.common.utils.Utils#murmur2), the hash the
 * Java client's and kafkajs's default partitioners apply to keys.
 */
export function murmur2(data: Uint8Array): number {
  const m = 0x5bd1e995;
  const length = data.length;
  let h = 0x9747b28c ^ length;
  const tail = length & ~3;
  for (let i = 0; i < tail; i += 4) {
    let k =
      (data[i] ?? 0) | ((data[i + 1] ?? 0) << 8) | ((data[i + 2] ?? 0) << 16) | ((data[i + 3] ?? 0) << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
  }
  const remaining = length & 3;
  if (remaining >= 3) h ^= (data[tail + 2] ?? 0) << 16;
  if (remaining >= 2) h ^= (data[tail + 1] ?? 0) << 8;
  if (remaining >= 1) {
    h ^= data[tail] ?? 0;
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

/** The partition of a keyed message under the Java client's rule: positive murmur2 modulo the count. */
export function keyPartition(key: Uint8Array, partitionCount: number): number {
  return (murmur2(key) & 0x7fffffff) % partitionCount;
}

/** One partition of a topic, as the brokers' metadata gives it. */
export interface PartitionMetadata {
  readonly partitionId: number;
  /** The leader broker's id; -1 while the partition has none. */
  readonly leader: number;
}

export interface TopicPartitions {
  readonly topic: string;
  /** Every partition of the topic, sorted by id. */
  readonly partitions: readonly PartitionMetadata[];
}

/** Chooses partitions for the messages of one produced batch (a synced batch or a snapshot chunk). */
export interface BatchAssigner {
  assign(topic: TopicPartitions, key: Buffer | null, requested: number | undefined): number;
}

/** One partitioner for the life of a destination; shared by concurrent batches. */
export class PartitionStrategy {
  readonly name: PartitionerName;
  readonly #rotation = new Map<string, number>();
  readonly #sticky = new Map<string, number>();
  /** LeastBackup: messages handed to the producer and not yet settled, by topic and partition. */
  readonly #backlog = new Map<string, number[]>();
  /** '' without a key: the next of each topic's counters, which start at random. */
  readonly #unkeyedCounters = new Map<string, number>();

  constructor(name: PartitionerName) {
    this.name = name;
  }

  /** Starts a batch: Sticky choices hold for the messages of one batch. */
  batch(): BatchAssigner {
    const stickyInBatch = new Map<string, number>();
    const sticky = (topic: TopicPartitions): number => {
      let partition = stickyInBatch.get(topic.topic);
      if (partition === undefined) {
        // A new batch moves to the next partition; the first starts at a random one.
        const previous = this.#sticky.get(topic.topic);
        const count = topic.partitions.length;
        const index = previous === undefined ? Math.floor(Math.random() * count) : (previous + 1) % count;
        this.#sticky.set(topic.topic, index);
        partition = topic.partitions[index]?.partitionId ?? 0;
        stickyInBatch.set(topic.topic, partition);
      }
      return partition;
    };
    return {
      assign: (topic, key, requested) => {
        const count = topic.partitions.length;
        switch (this.name) {
          case 'Manual': {
            const partition = requested ?? 0;
            if (!topic.partitions.some((metadata) => metadata.partitionId === partition)) {
              throw new EngineError(
                'script',
                `the script chose partition ${partition} of topic ${topic.topic}, which has ${count} partition(s)`,
              );
            }
            return partition;
          }
          case 'RoundRobin':
            return topic.partitions[this.#next(topic.topic, count)]?.partitionId ?? 0;
          case 'Sticky':
            return sticky(topic);
          case 'StickyKey':
            return key ? keyPartition(key, count) : sticky(topic);
          case 'LeastBackup':
            return this.#leastBackedUp(topic);
          case '':
            // Keyed: the same murmur2 rule as kafkajs's default, without its slow 64-bit emulation.
            if (key) return keyPartition(key, count);
            return this.#unkeyedDefault(topic);
        }
      },
    };
  }

  /** The broker acknowledged (or refused) `count` messages assigned to `partition`: LeastBackup stops counting them. */
  settled(topic: string, partition: number, count: number): void {
    if (this.name !== 'LeastBackup') return;
    const backlog = this.#backlogOf(topic, partition + 1);
    backlog[partition] = Math.max(0, (backlog[partition] ?? 0) - count);
  }

  /**
   * kafkajs's DefaultPartitioner for a message without a key (its
   * src/producer/partitioners/legacy/partitioner.js, the meaning `''` has kept
   * since the engine produced with kafkajs): round robin over the
   * partitions that have a leader, from a random start per topic; over every
   * partition when none has one.
   */
  #unkeyedDefault(topic: TopicPartitions): number {
    const counter = ((this.#unkeyedCounters.get(topic.topic) ?? randomBytes(4).readUInt32BE(0)) + 1) >>> 0;
    this.#unkeyedCounters.set(topic.topic, counter);
    const position = counter & 0x7fffffff;
    const led = topic.partitions.filter((partition) => partition.leader >= 0);
    if (led.length > 0) return led[position % led.length]?.partitionId ?? 0;
    return position % topic.partitions.length;
  }

  #next(topic: string, count: number): number {
    const index = this.#rotation.get(topic) ?? 0;
    this.#rotation.set(topic, (index + 1) % count);
    return index % count;
  }

  #backlogOf(topic: string, size: number): number[] {
    let backlog = this.#backlog.get(topic);
    if (!backlog) {
      backlog = [];
      this.#backlog.set(topic, backlog);
    }
    while (backlog.length < size) backlog.push(0);
    return backlog;
  }

  /** The partition with the fewest messages in flight; ties go round in turn. */
  #leastBackedUp(topic: TopicPartitions): number {
    const count = topic.partitions.length;
    const backlog = this.#backlogOf(topic.topic, Math.max(...topic.partitions.map((p) => p.partitionId)) + 1);
    const start = this.#next(topic.topic, count);
    let best = topic.partitions[start]?.partitionId ?? 0;
    for (let offset = 1; offset < count; offset++) {
      const candidate = topic.partitions[(start + offset) % count]?.partitionId ?? 0;
      if ((backlog[candidate] ?? 0) < (backlog[best] ?? 0)) best = candidate;
    }
    backlog[best] = (backlog[best] ?? 0) + 1;
    return best;
  }
}

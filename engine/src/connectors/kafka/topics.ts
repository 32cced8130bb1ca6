// Topics: a mapping's destination identifier becomes its default topic, every
// name the destination writes to is checked against Kafka's rules before the
// broker sees it, and `KnownTopics` creates the topics that are missing and
// keeps the partitions of those written to.
//
// KnownTopics' contract:
// - `ensure` creates each missing topic (and the checkpoint topic) with the
//   broker's default partition count and replication factor, waits until every
//   partition of the topics asked for has a leader, and caches their
//   partitions. Idempotent; a topic another writer created meanwhile is not an
//   error. It fails with a classified EngineError.
// - `get` answers from the cache only (the hot path: no promise); `forget`
//   empties it after a failed send, since partitions may have moved.
import type { Admin, ClusterMetadata } from '@platformatic/kafka';
import type { Logger } from 'pino';
import { EngineError } from '../../errors.ts';
import type { TableName } from '../../resources/mirror.ts';
import { classifyKafkaError, kafkaErrorName } from '../classify/index.ts';
import { connectionErrorOf } from './client.ts';
import type { TopicPartitions } from './partitioners.ts';
import { type KafkaTransport, requestTimeoutMs } from './transport.ts';

/** The compacted topic holding one checkpoint per mirror (key: the mirror name). */
export const checkpointTopic = '_tributary_checkpoints';

/** The checkpoint topic's settings: one partition (it holds one small message per mirror), compacted. */
export const checkpointTopicConfig = {
  topics: [checkpointTopic],
  partitions: 1,
  configs: [{ name: 'cleanup.policy', value: 'compact' }],
};

/**
 * The default topic of a mapping's destination: the table name when the schema
 * is `public` (which is also what a bare identifier such as `orders` parses
 * to), `schema.table` otherwise.
 */
export function defaultTopicName(destination: TableName): string {
  return destination.schema === 'public' ? destination.table : `${destination.schema}.${destination.table}`;
}

// Kafka's own rule (org.apache.kafka.common.internals.Topic#validate).
const legalTopic = /^[a-zA-Z0-9._-]{1,249}$/;

/**
 * Why a mapping or a script cannot write to topic `name`, or undefined when it
 * can: Kafka's name rule, and no internal topic. A record in the checkpoint
 * topic would forge another mirror's checkpoint (it is keyed by mirror name), and
 * Kafka's own `__` topics (`__consumer_offsets`, `__transaction_state`) are the
 * brokers' state.
 */
export function topicNameProblem(name: string): string | undefined {
  if (name === '.' || name === '..') return 'a topic cannot be named "." or ".."';
  if (!legalTopic.test(name)) {
    return 'a topic name is 1 to 249 characters among ASCII letters, digits, ".", "_" and "-"';
  }
  if (name === checkpointTopic)
    return `${checkpointTopic} holds the mirrors' checkpoints and is not written to`;
  if (name.startsWith('__')) return 'topics starting with "__" are internal to Kafka and are not written to';
  return undefined;
}

/** What the brokers answer about a topic created a moment ago, until its partitions have leaders. */
const topicsSettling = new Set(['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE']);

export class KnownTopics {
  readonly #transport: KafkaTransport;
  readonly #logger: Logger;
  readonly #topics = new Map<string, TopicPartitions>();

  constructor(transport: KafkaTransport, logger: Logger) {
    this.#transport = transport;
    this.#logger = logger;
  }

  /** The cached partitions of a topic, if it was ensured since the last `forget`. */
  get(name: string): TopicPartitions | undefined {
    return this.#topics.get(name);
  }

  /** The partitions of a topic, created first when it does not exist. */
  async of(name: string): Promise<TopicPartitions> {
    await this.ensure([name]);
    const topic = this.#topics.get(name);
    if (!topic) throw new EngineError('destination_write', `destination: topic ${name} has no partitions`);
    return topic;
  }

  forget(): void {
    this.#topics.clear();
  }

  /** Creates the topics (and the checkpoint topic) that do not exist and caches their partitions. */
  async ensure(names: readonly string[]): Promise<void> {
    await this.#transport.withAdmin((admin) => this.#ensureWith(admin, names));
  }

  async #ensureWith(admin: Admin, names: readonly string[]): Promise<void> {
    const wanted = [...new Set(names)];
    try {
      const existing = new Set(await admin.listTopics());
      const missing = wanted.filter((name) => !existing.has(name) && name !== checkpointTopic);
      // Partitions and replication: the broker's num.partitions and default.replication.factor.
      if (missing.length > 0) await admin.createTopics({ topics: missing });
      if (!existing.has(checkpointTopic)) {
        await admin.createTopics(checkpointTopicConfig);
        missing.push(checkpointTopic);
      }
      if (missing.length > 0) this.#logger.info({ topics: missing }, 'created topics');
      // Created topics are waited on too, for their leaders, before anything is sent to them.
      const unknown = [...new Set([...names.filter((name) => !this.#topics.has(name)), ...missing])];
      if (unknown.length > 0) await this.#loadPartitions(admin, unknown);
    } catch (error) {
      // Another writer may have created a topic between the list and the create.
      if (kafkaErrorName(error) === 'TOPIC_ALREADY_EXISTS') return this.#ensureWith(admin, names);
      const what = `destination: create topics ${names.join(', ')}`;
      throw classifyKafkaError(error, what, 'destination_write', connectionErrorOf(admin));
    }
  }

  /**
   * Caches the partitions of `names` once each has a leader: a topic just
   * created gets its leaders a moment later, and a partition without one
   * would refuse the first send.
   */
  async #loadPartitions(admin: Admin, names: readonly string[]): Promise<void> {
    const deadline = Date.now() + requestTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      let metadata: ClusterMetadata | undefined;
      try {
        metadata = await admin.metadata({ topics: [...names], forceUpdate: true });
      } catch (error) {
        // A topic just created may be unknown to the broker answering for a moment.
        if (!topicsSettling.has(kafkaErrorName(error) ?? '') || Date.now() > deadline) throw error;
      }
      const ready =
        metadata !== undefined &&
        names.every((name) => metadata.topics.get(name)?.partitions.every((p) => p.leader >= 0));
      if (metadata !== undefined && (ready || Date.now() > deadline)) {
        for (const [name, topic] of metadata.topics) {
          const partitions = topic.partitions.map((partition, partitionId) => ({
            partitionId,
            leader: partition.leader,
          }));
          if (partitions.length > 0) this.#topics.set(name, { topic: name, partitions });
        }
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(50 * 2 ** attempt, 500)));
    }
  }
}

// Topic names: a mapping's destination identifier becomes its default topic,
// and every name the destination writes to is checked against Kafka's rules
// before the broker sees it.
import type { TableName } from '../../resources/mirror.ts';

/** The compacted topic holding one checkpoint per mirror (key: the mirror name). */
export const checkpointTopic = '_tributary_checkpoints';

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

/** Why `name` cannot be a Kafka topic, or undefined when it can. */
export function topicNameProblem(name: string): string | undefined {
  if (name === '.' || name === '..') return 'a topic cannot be named "." or ".."';
  if (!legalTopic.test(name)) {
    return 'a topic name is 1 to 249 characters among ASCII letters, digits, ".", "_" and "-"';
  }
  return undefined;
}

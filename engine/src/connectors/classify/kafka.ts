// Errors of @platformatic/kafka, the engine's one Kafka client (producer,
// admin, checkpoint fetcher). It wraps the broker's error in retry and
// response errors (`errors`, `cause`); the innermost one decides. A message
// never carries the driver's text, which can quote topic data; that goes to
// `cause`. Kafka is only ever a destination.
import { EngineError, type ErrorKind, isEngineError } from '../../errors.ts';
import { networkErrorCodes, notAnError } from './network.ts';
import { tlsFailureOf } from './tls.ts';

interface KafkaError {
  /** The broker's error name (a ProtocolError's). */
  readonly apiId?: string;
  /** The library's `PLT_KFK_…` code, or a socket's. */
  readonly code?: string;
  readonly errors?: readonly unknown[];
  readonly cause?: unknown;
}

// Broker error names: https://kafka.apache.org/protocol#protocol_error_codes
const permissionTypes = new Set([
  'TOPIC_AUTHORIZATION_FAILED',
  'GROUP_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'TRANSACTIONAL_ID_AUTHORIZATION_FAILED',
]);
const configTypes = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_TOPIC_EXCEPTION',
  'INVALID_REPLICATION_FACTOR',
  'INVALID_PARTITIONS',
  'POLICY_VIOLATION',
  'INVALID_CONFIG',
]);

/** The innermost error: retries and responses keep theirs in `errors`, wrappers in `cause`. */
function rootOf(error: unknown): KafkaError {
  let current = error as KafkaError;
  for (let depth = 0; depth < 10; depth++) {
    const inner = current.errors?.[0] ?? current.cause;
    if (inner === undefined || inner === null || typeof inner !== 'object') break;
    current = inner as KafkaError;
  }
  return current;
}

/** The broker's name of the error (e.g. `TOPIC_ALREADY_EXISTS`), when the broker refused. */
export function kafkaErrorName(error: unknown): string | undefined {
  return error !== null && typeof error === 'object' ? rootOf(error).apiId : undefined;
}

/** Whether any error on the way to the innermost is the library's authentication error. */
function failedAuthentication(error: unknown): boolean {
  let current = error as KafkaError;
  for (let depth = 0; depth < 10 && current && typeof current === 'object'; depth++) {
    if (current.code === 'PLT_KFK_AUTHENTICATION') return true;
    current = (current.errors?.[0] ?? current.cause) as KafkaError;
  }
  return false;
}

function kindOf(
  error: unknown,
  fallback: ErrorKind,
  connectionError?: unknown,
): { kind: ErrorKind; detail: string | undefined } {
  const root = rootOf(error);
  // A request failed by a connection closing carries no reason; the
  // connection's own error, when it reported one, says why (a TLS alert).
  if (root.code === 'PLT_KFK_NETWORK' && root.cause === undefined && connectionError instanceof Error) {
    return kindOf(connectionError, fallback);
  }
  const type = root.apiId;
  if (type === 'SASL_AUTHENTICATION_FAILED' || failedAuthentication(error)) {
    return { kind: 'auth', detail: 'authentication failed' };
  }
  if (type && permissionTypes.has(type)) return { kind: 'permission', detail: type };
  if (type && configTypes.has(type)) return { kind: 'config', detail: type };
  const tls = tlsFailureOf(root.code);
  if (tls) return tls;
  if (root.code === 'PLT_KFK_NETWORK' || (root.code && networkErrorCodes.has(root.code))) {
    return { kind: 'connection', detail: 'cannot reach the brokers' };
  }
  if (root.code === 'PLT_KFK_TIMEOUT') {
    return { kind: fallback, detail: 'request timed out' };
  }
  return { kind: fallback, detail: type };
}

/**
 * Broker refusals that belong to the topic a message went to (its size, its
 * record, its ACL), not to the brokers or the batch: what each means.
 */
const topicRefusals: Readonly<Record<string, string>> = {
  MESSAGE_TOO_LARGE:
    "a message larger than the topic's max.message.bytes (or the broker's message.max.bytes) allows",
  INVALID_RECORD: 'a record the topic does not take (a compacted topic takes no message without a key)',
  TOPIC_AUTHORIZATION_FAILED: "a write the peer's user has no WRITE permission on the topic for",
};

interface ProduceResponseError {
  readonly response?: {
    readonly responses?: readonly {
      readonly name?: string;
      readonly partitionResponses?: readonly { readonly errorCode?: number }[];
    }[];
  };
}

/**
 * The topics a produce request was refused for, and why, when the broker's
 * refusal is one a topic owns (topicRefusals); undefined otherwise. Read from
 * the produce response the error carries (per topic, per partition).
 */
export function topicRefusal(error: unknown): { topics: string[]; reason: string } | undefined {
  const reason = topicRefusals[kafkaErrorName(error) ?? ''];
  if (reason === undefined) return undefined;
  const topics = new Set<string>();
  const visit = (node: unknown, depth: number): void => {
    if (node === null || typeof node !== 'object' || depth > 10) return;
    for (const response of (node as ProduceResponseError).response?.responses ?? []) {
      const refused = response.partitionResponses?.some((partition) => (partition.errorCode ?? 0) !== 0);
      if (refused && response.name !== undefined) topics.add(response.name);
    }
    const { errors, cause } = node as KafkaError;
    for (const inner of errors ?? []) visit(inner, depth + 1);
    visit(cause, depth + 1);
  };
  visit(error, 0);
  return topics.size > 0 ? { topics: [...topics], reason } : undefined;
}

/**
 * `what` says what was being done, e.g. "destination: send batch 12";
 * `connectionError` is the last error the failing client's connections
 * reported (kafka/client.ts, connectionErrorOf), read when the failure itself
 * is a bare close.
 */
export function classifyKafkaError(
  error: unknown,
  what: string,
  fallback: ErrorKind = 'destination_write',
  connectionError?: unknown,
): EngineError {
  if (isEngineError(error)) return error;
  if (!(error instanceof Error)) return notAnError(error, what, fallback);
  const { kind, detail } = kindOf(error, fallback, connectionError);
  return new EngineError(kind, `${what} failed${detail ? ` (${detail})` : ''}`, { cause: error });
}

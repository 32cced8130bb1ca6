// Errors of kafkajs (admin, checkpoint reader) and @platformatic/kafka (the
// producer). Both wrap the broker's error in retry and aggregate errors; the
// innermost one decides. A message never carries the driver's
// text, which can quote topic data; that goes to `cause`. Kafka is only ever a
// destination.
import { EngineError, type ErrorKind, isEngineError } from '../../errors.ts';
import { networkErrorCodes, notAnError } from './network.ts';
import { tlsFailureOf } from './tls.ts';

interface KafkaJsError {
  readonly name?: string;
  /** kafkajs: the broker's error name. */
  readonly type?: string;
  /** @platformatic/kafka: the broker's error name. */
  readonly apiId?: string;
  readonly code?: string;
  readonly originalError?: unknown;
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

/**
 * The innermost error kafkajs wrapped: retriers keep it in `originalError`
 * (KafkaJSNumberOfRetriesExceeded in `cause` too), aggregates in `errors`.
 */
function rootOf(error: unknown): KafkaJsError {
  let current = error as KafkaJsError;
  for (let depth = 0; depth < 10; depth++) {
    const inner = current.originalError ?? current.errors?.[0] ?? current.cause;
    if (inner === undefined || inner === null || typeof inner !== 'object') break;
    current = inner as KafkaJsError;
  }
  return current;
}

/** Whether any error on the way to the innermost is @platformatic/kafka's authentication error. */
function failedAuthentication(error: unknown): boolean {
  let current = error as KafkaJsError;
  for (let depth = 0; depth < 10 && current && typeof current === 'object'; depth++) {
    if (current.code === 'PLT_KFK_AUTHENTICATION') return true;
    current = (current.originalError ?? current.errors?.[0] ?? current.cause) as KafkaJsError;
  }
  return false;
}

function kindOf(error: unknown, fallback: ErrorKind): { kind: ErrorKind; detail: string | undefined } {
  const root = rootOf(error);
  const type = root.type ?? root.apiId;
  if (
    root.name === 'KafkaJSSASLAuthenticationError' ||
    type === 'SASL_AUTHENTICATION_FAILED' ||
    failedAuthentication(error)
  ) {
    return { kind: 'auth', detail: 'authentication failed' };
  }
  if (type && permissionTypes.has(type)) return { kind: 'permission', detail: type };
  if (type && configTypes.has(type)) return { kind: 'config', detail: type };
  const tls = tlsFailureOf(root.code);
  if (tls) return tls;
  if (
    root.name === 'KafkaJSConnectionError' ||
    root.code === 'PLT_KFK_NETWORK' ||
    (root.code && networkErrorCodes.has(root.code))
  ) {
    return { kind: 'connection', detail: 'cannot reach the brokers' };
  }
  if (root.name === 'KafkaJSRequestTimeoutError' || root.code === 'PLT_KFK_TIMEOUT') {
    return { kind: fallback, detail: 'request timed out' };
  }
  return { kind: fallback, detail: type };
}

/** `what` says what was being done, e.g. "destination: send batch 12". */
export function classifyKafkaError(
  error: unknown,
  what: string,
  fallback: ErrorKind = 'destination_write',
): EngineError {
  if (isEngineError(error)) return error;
  if (!(error instanceof Error)) return notAnError(error, what, fallback);
  const { kind, detail } = kindOf(error, fallback);
  return new EngineError(kind, `${what} failed${detail ? ` (${detail})` : ''}`, { cause: error });
}

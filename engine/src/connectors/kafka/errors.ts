// Turns kafkajs errors into EngineError kinds. kafkajs wraps the broker's error
// in retry and aggregate errors; the innermost one decides. A message never
// carries the driver's text, which can quote topic data; that goes to `cause`.
import { EngineError, type ErrorKind, isEngineError } from '../../errors.ts';
import { networkErrorCodes, tlsFailureOf } from '../classify.ts';

interface KafkaJsError {
  readonly name?: string;
  readonly type?: string;
  readonly code?: string;
  readonly originalError?: unknown;
  readonly cause?: unknown;
  readonly errors?: readonly unknown[];
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

/** The innermost error kafkajs wrapped (retries exceeded keeps the last one as `cause`). */
function rootOf(error: unknown): KafkaJsError {
  let current = error as KafkaJsError;
  for (let depth = 0; depth < 10; depth++) {
    const inner = current.originalError ?? current.cause ?? current.errors?.[0];
    if (inner === undefined || inner === null || typeof inner !== 'object') break;
    current = inner as KafkaJsError;
  }
  return current;
}

function kindOf(error: unknown, fallback: ErrorKind): { kind: ErrorKind; detail: string | undefined } {
  const root = rootOf(error);
  if (root.name === 'KafkaJSSASLAuthenticationError')
    return { kind: 'auth', detail: 'authentication failed' };
  if (root.type && permissionTypes.has(root.type)) return { kind: 'permission', detail: root.type };
  if (root.type && configTypes.has(root.type)) return { kind: 'config', detail: root.type };
  const tls = tlsFailureOf(root.code);
  if (tls) return tls;
  if (root.name === 'KafkaJSConnectionError' || (root.code && networkErrorCodes.has(root.code))) {
    return { kind: 'connection', detail: 'cannot reach the brokers' };
  }
  if (root.name === 'KafkaJSRequestTimeoutError') return { kind: fallback, detail: 'request timed out' };
  return { kind: fallback, detail: root.type };
}

/** `what` says what was being done, e.g. "destination: send batch 12". */
export function classifyKafkaError(
  error: unknown,
  what: string,
  fallback: ErrorKind = 'destination_write',
): EngineError {
  if (isEngineError(error)) return error;
  if (!(error instanceof Error)) return new EngineError(fallback, `${what} failed`, { cause: error });
  const { kind, detail } = kindOf(error, fallback);
  return new EngineError(kind, `${what} failed${detail ? ` (${detail})` : ''}`, { cause: error });
}

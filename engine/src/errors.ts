// The engine's one error type. Every failure that leaves a connector or the
// pipeline is an EngineError of a closed set of kinds; `errorPolicy` says, per
// kind, whether the mirror retries on its own and what the operator should do.
// Driver-specific errors are turned into these kinds in one place
// (connectors/classify.ts), never by string matching scattered around.

export const errorKinds = [
  'connection',
  'auth',
  'ssh_tunnel',
  'tls',
  'permission',
  'config',
  'source_setup',
  'slot_invalidated',
  'wal_removed',
  'replica_identity',
  'schema_mismatch',
  'decode',
  'destination_write',
  'busy',
  'script',
  'internal',
] as const;

export type ErrorKind = (typeof errorKinds)[number];

/**
 * timed: a fault that can go away by itself; the mirror retries it with capped
 * exponential backoff (pipeline/supervisor.ts) and shows it meanwhile.
 * manual and never: only a person can remove it; the mirror fails with the
 * remedy (manual: a resume retries it after the fix; never: data is lost and the
 * mirror must be resynced).
 */
export type RetryPolicy = 'timed' | 'manual' | 'never';

export interface ErrorPolicy {
  readonly retry: RetryPolicy;
  /** One line an operator can act on, shown in logs, status conditions and events. */
  readonly remedy: string;
}

export const errorPolicy = {
  connection: { retry: 'timed', remedy: 'check that the peer host and port are reachable from the engine' },
  auth: { retry: 'manual', remedy: 'check the peer user and password (or key) and update the peer' },
  ssh_tunnel: { retry: 'timed', remedy: 'check the peer ssh_config: host, port, user and key or password' },
  tls: {
    retry: 'manual',
    remedy:
      'check the peer TLS fields: root_ca must hold the CA that signed the server certificate, tls_host (or host) a name in it, and disable_tls only for a server that accepts connections without TLS',
  },
  permission: {
    retry: 'timed',
    remedy:
      'grant the peer user the privilege on the object named in the message; the mirror retries by itself meanwhile',
  },
  config: { retry: 'manual', remedy: 'fix the mirror or peer configuration named in the message' },
  source_setup: { retry: 'manual', remedy: 'fix the source database setting named in the message' },
  slot_invalidated: {
    retry: 'never',
    remedy:
      'the replication slot is invalidated or gone and changes since the last sync are lost; resync: drop the mirror and create it again with do_initial_snapshot, and raise max_slot_wal_keep_size if it was exceeded',
  },
  wal_removed: {
    retry: 'never',
    remedy:
      'the source removed WAL the mirror still needed; resync: drop the mirror and create it again with do_initial_snapshot, and raise max_slot_wal_keep_size',
  },
  replica_identity: {
    retry: 'manual',
    remedy:
      'give the table a primary key (or REPLICA IDENTITY USING INDEX on a unique index of NOT NULL columns); REPLICA IDENTITY FULL is enough only for a Kafka destination; then resume the mirror',
  },
  schema_mismatch: {
    retry: 'manual',
    remedy: 'align the destination table with the source table named in the message',
  },
  decode: {
    retry: 'never',
    remedy: 'report this decode failure with the source PostgreSQL version; data was not acknowledged',
  },
  destination_write: {
    retry: 'timed',
    remedy: 'check the destination is up and has space; the batch will be retried',
  },
  busy: {
    retry: 'timed',
    remedy:
      'the server is short of a resource (connections, locks, disk, memory) or timed out; the mirror retries by itself, free the resource if this lasts',
  },
  script: { retry: 'manual', remedy: 'fix the script named in the message and resume the mirror' },
  internal: {
    retry: 'timed',
    remedy: 'report this error; the mirror retries from its last durable checkpoint',
  },
} as const satisfies Record<ErrorKind, ErrorPolicy>;

export class EngineError extends Error {
  readonly kind: ErrorKind;

  constructor(kind: ErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EngineError';
    this.kind = kind;
  }

  get policy(): ErrorPolicy {
    return errorPolicy[this.kind];
  }
}

export function isEngineError(error: unknown): error is EngineError {
  return error instanceof EngineError;
}

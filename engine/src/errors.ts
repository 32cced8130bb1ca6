// The engine's one error type. Every failure that leaves a connector or the
// pipeline is an EngineError of a closed set of kinds; `errorPolicy` says, per
// kind, whether the mirror retries on its own and what the operator should do.
// Driver-specific errors are turned into these kinds in one module
// (connectors/classify/), never by string matching scattered around.
//
// Where a fault's remedy differs between the two ends of a mirror the kind
// says which end it is on: source_auth, source_permission and source_schema are
// the source's, schema_mismatch and destination_write the destination's;
// source_setup, slot_invalidated, wal_removed, replica_identity and decode can
// only arise at the source, engine_resource only in the engine process itself. The other kinds read the same on either side (and
// in a peer check, which has no side); their message names the side.

export const errorKinds = [
  'connection',
  'auth',
  'source_auth',
  'ssh_tunnel',
  'tls',
  'permission',
  'source_permission',
  'config',
  'source_setup',
  'slot_invalidated',
  'wal_removed',
  'replica_identity',
  'schema_mismatch',
  'source_schema',
  'decode',
  'destination_write',
  'busy',
  'engine_resource',
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
  source_auth: {
    retry: 'manual',
    remedy:
      "check the source peer user and password and that the source's pg_hba.conf lets that user open both normal and replication connections from the engine; update the peer or the source, then resume",
  },
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
  source_permission: {
    retry: 'timed',
    remedy:
      'give the source peer user what the message names: SELECT on the table, the REPLICATION attribute, or ownership of the table for the publication; the mirror retries by itself meanwhile',
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
  source_schema: {
    retry: 'manual',
    remedy:
      'the source table or column named in the message is gone or was renamed; restore it or remove the table from the mirror, then resume',
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
  engine_resource: {
    retry: 'timed',
    remedy:
      "the engine's own file system or memory refused it (read-only or full temporary directory, out of memory): give the engine a writable temporary directory with free space (TMPDIR; in Kubernetes an emptyDir volume) or more memory; the mirror retries by itself meanwhile",
  },
  script: { retry: 'manual', remedy: 'fix the script named in the message and resume the mirror' },
  internal: {
    retry: 'timed',
    remedy: 'report this error; the mirror retries from its last durable checkpoint',
  },
} as const satisfies Record<ErrorKind, ErrorPolicy>;

export class EngineError extends Error {
  readonly kind: ErrorKind;
  /**
   * The source table (`schema.table`) the fault belongs to, when it is that
   * table's alone (`tableFault`): the mirror stops that table and goes on
   * with the others (pipeline/table-faults.ts).
   */
  readonly table: string | undefined;

  constructor(kind: ErrorKind, message: string, options?: { cause?: unknown; table?: string }) {
    super(message, options);
    this.name = 'EngineError';
    this.kind = kind;
    this.table = options?.table;
  }

  get policy(): ErrorPolicy {
    return errorPolicy[this.kind];
  }
}

export function isEngineError(error: unknown): error is EngineError {
  return error instanceof EngineError;
}

/**
 * Kinds a fault of one table's write can be (a value or a shape the
 * destination refuses for that table, its table gone): kept to that table.
 * Every other kind (the destination down, short of a resource, a password)
 * is the mirror's, whichever table's write met it.
 */
const tableFaultKinds: ReadonlySet<ErrorKind> = new Set(['schema_mismatch']);

/**
 * `error`, met writing `sourceTable`'s changes, as a fault of that table
 * alone when its kind is one a table can own (else as it is).
 */
export function tableFault(error: EngineError, sourceTable: string): EngineError {
  if (!tableFaultKinds.has(error.kind) || error.table !== undefined) return error;
  const fault = new EngineError(error.kind, error.message, { cause: error.cause, table: sourceTable });
  if (error.stack !== undefined) fault.stack = error.stack;
  return fault;
}

// PostgreSQL (`pg`) errors, by SQLSTATE, socket error code and, where the
// SQLSTATE is shared, the server's wording. Used for the source and for a
// PostgreSQL destination: the side decides the kind where its remedy differs.
import { EngineError, type ErrorKind, isEngineError } from '../../errors.ts';
import { networkErrorCodes, notAnError, onSide, type Side, sideOf } from './network.ts';

interface PgDriverError {
  code?: string;
  message: string;
  detail?: string;
  constraint?: string;
}

/**
 * SQLSTATE classes 22 (data exception) and 23 (integrity constraint
 * violation): a destination that refuses a row (a CHECK, NOT NULL, foreign
 * key or unique constraint, a value out of its column type's range). The
 * destination table does not fit the source's rows: schema_mismatch.
 */
function refusedValue(code: string | undefined): boolean {
  return code !== undefined && (code.startsWith('22') || code.startsWith('23'));
}

/**
 * A unique violation on a system catalog's index (`pg_type_typname_nsp_index`,
 * `pg_class_relname_nsp_index`, `pg_namespace_nspname_index`): two sessions
 * creating the same table or schema at once, which `IF NOT EXISTS` does not
 * guard against. No row was refused; the step succeeds when retried.
 */
function concurrentCreate(code: string | undefined, constraint: string | undefined): boolean {
  return code === '23505' && constraint?.startsWith('pg_') === true && constraint.endsWith('_index');
}

/**
 * How PostgreSQL 13–18 says a logical slot can no longer be read: 13–15 answer
 * `cannot read from logical replication slot "…"`, 16–17 `can no longer get
 * changes from replication slot "…"`, 18 `can no longer access replication slot
 * "…"`, all SQLSTATE 55000 with a detail "This slot has been invalidated
 * because …" (18: "This replication slot has been invalidated due to …").
 * See src/backend/replication/logical/logical.c and slot.c of each release.
 */
const slotLostMessage =
  /(cannot read from logical replication slot|can no longer (get changes from|access) replication slot|replication slot .* (can no longer be used|has been invalidated))/i;
const slotInvalidatedDetail = /slot has been invalidated/i;
const slotMissingMessage = /replication slot .* does not exist/i;
const slotExistsMessage = /replication slot .* already exists/i;

/**
 * OpenSSL's verification results as Node names them (`error.code` of a failed
 * handshake), and Node's own name check: the server is not who the peer says.
 */
const certificateErrorCodes: ReadonlySet<string> = new Set([
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'INVALID_CA',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** pg_hba.conf refusing a connection for want of TLS: "…, no encryption" (PostgreSQL 12+, auth.c). */
const refusedWithoutTls = /pg_hba\.conf.*, no encryption$/;

/** Why a TLS failure happened, in the peer's own field names. */
function tlsProblem(error: PgDriverError, tlsMode: string | undefined): string | undefined {
  const code = error.code ?? '';
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return 'the server certificate does not carry the expected name; set tls_host to a name it carries';
  }
  if (certificateErrorCodes.has(code)) {
    return tlsMode === 'verify-full'
      ? 'the server certificate could not be verified; root_ca must hold the CA that signed it (without root_ca only public CAs are trusted)'
      : 'the server certificate could not be verified';
  }
  if (code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_')) return 'the TLS handshake failed';
  if (error.message === 'The server does not support SSL connections') {
    return 'the server does not offer TLS; require_tls, root_ca and skip_cert_verification need a server with ssl = on';
  }
  if (code === '28000' && refusedWithoutTls.test(error.message)) {
    return tlsMode === 'disable'
      ? 'the server refuses connections without TLS for this user; remove disable_tls'
      : 'the server refuses connections without TLS for this user';
  }
  return undefined;
}

/**
 * SQLSTATEs of a server short of a resource or of time, which heal by
 * themselves: disk_full, out_of_memory, too_many_connections,
 * configuration_limit_exceeded, serialization_failure, deadlock_detected,
 * lock_not_available (lock_timeout), query_canceled (statement_timeout).
 */
const busyCodes: ReadonlyMap<string, string> = new Map([
  ['53100', 'the server is out of disk space; free or add space and the mirror continues'],
  ['53200', 'the server is out of memory'],
  ['53300', 'the server has no connection slot left for this user'],
  ['53400', 'a server configuration limit was exceeded'],
  ['40001', 'a serialization failure'],
  ['40P01', 'a deadlock with another session'],
  [
    '55P03',
    'waited too long for a lock another session holds on a table this step writes (pg_locks shows who)',
  ],
  ['57014', 'the statement was canceled (statement timeout or an administrator)'],
]);

/** Kinds of objects PostgreSQL names in `permission denied for <kind> <name>`. */
const deniedObject =
  /^permission denied for (table|relation|schema|sequence|database|function|view) (.{1,200})$/;

function pgErrorKind(error: PgDriverError, tlsMode: string | undefined): ErrorKind {
  const code = error.code ?? '';
  if (networkErrorCodes.has(code)) return 'connection';
  if (tlsProblem(error, tlsMode)) return 'tls';
  // SQLSTATE classes: https://www.postgresql.org/docs/current/errcodes-appendix.html
  if (code === '28P01' || code === '28000') return 'auth';
  if (code === '42501') return 'permission';
  if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return 'connection';
  if (code === '58P01' && /WAL segment .* has already been removed/.test(error.message)) return 'wal_removed';
  if (
    code === '55000' &&
    (slotLostMessage.test(error.message) || slotInvalidatedDetail.test(error.detail ?? ''))
  ) {
    return 'slot_invalidated';
  }
  // undefined_object: only a missing slot is the mirror's loss; other objects are setup errors.
  if (code === '42704' && slotMissingMessage.test(error.message)) return 'slot_invalidated';
  // duplicate_object: a slot someone else made under the mirror's name between the
  // mirror's look and its CREATE_REPLICATION_SLOT; it is not the mirror's to take.
  if (code === '42710' && slotExistsMessage.test(error.message)) return 'config';
  if (code === '42P01' || code === '42703') return 'schema_mismatch';
  if (busyCodes.has(code)) return 'busy';
  if (
    /Connection terminated|connection timeout|Client has encountered a connection error/i.test(error.message)
  ) {
    return 'connection';
  }
  return 'internal';
}

export interface PgErrorContext {
  /** The privileges the step needs, named in a permission fault. */
  readonly privileges?: string;
  /** Which end of the mirror the connection serves; read from `what` when absent. */
  readonly side?: Side;
  /** The connection's TLS mode (postgres/driver/tls.ts), which decides what a TLS failure means. */
  readonly tlsMode?: string;
}

/**
 * Wraps an error thrown by `pg` (source or destination) into an EngineError.
 * `what` says what was being done, e.g. "source: create replication slot".
 * The driver's message goes to `cause`, not into the message, because it may
 * quote row values.
 */
export function classifyPgError(
  error: unknown,
  what: string,
  fallback: ErrorKind = 'internal',
  context: PgErrorContext = {},
): EngineError {
  if (isEngineError(error)) return error;
  if (!(error instanceof Error)) return notAnError(error, what, fallback);
  const kind = pgErrorKind(error as PgDriverError, context.tlsMode);
  const side = context.side ?? sideOf(what);
  const code = (error as PgDriverError).code;
  const constraint = (error as PgDriverError).constraint;
  const racedCreate = concurrentCreate(code, constraint);
  const resolved = racedCreate
    ? 'busy'
    : side !== 'source' && refusedValue(code)
      ? 'schema_mismatch'
      : onSide(kind === 'internal' ? fallback : kind, side);
  let message = `${what} failed${code ? ` (${code})` : ''}`;
  if (racedCreate) message += ': another session created the same object at the same time';
  // The constraint's name (never the row's values, which the driver's detail quotes).
  else if (refusedValue(code) && constraint) message += `: constraint ${constraint} refused a row`;
  if (resolved === 'permission' || resolved === 'source_permission') {
    // The object's name (never a value) is safe to show; the privileges come
    // from what was being done, since PostgreSQL does not say which one it checked.
    const denied = deniedObject.exec(error.message);
    if (denied) message += `: permission denied for ${denied[1]} ${denied[2]}`;
    if (context.privileges) message += `; it needs ${context.privileges}`;
  }
  if (resolved === 'tls') message += `: ${tlsProblem(error as PgDriverError, context.tlsMode)}`;
  // A fixed description, never the driver's text: what ran short is what to free.
  const shortOf = resolved === 'busy' && code ? busyCodes.get(code) : undefined;
  if (shortOf) message += `: ${shortOf}`;
  return new EngineError(resolved, message, { cause: error });
}

/** A row of pg_replication_slots as far as slot loss goes; undefined when the slot does not exist. */
export interface SlotState {
  /** `reserved`, `extended`, `unreserved` or `lost` (PostgreSQL 13+). */
  readonly walStatus: string | null;
  /** PostgreSQL 17+: why the slot was invalidated (`wal_removed`, `rows_removed`, …); null when it was not. */
  readonly invalidationReason: string | null;
  /**
   * PostgreSQL 16+: the logical slot was invalidated: on 16 for any reason
   * (removed WAL too), on 17+ for a conflict with recovery. On 16 it is the
   * only sign of a slot invalidated by a conflict on a standby: its `wal_status`
   * may still read `reserved`, and there is no `invalidation_reason`. Null before 16.
   */
  readonly conflicting: boolean | null;
}

/**
 * The slot's loss as an EngineError, or undefined while it is usable. A missing
 * slot, `wal_status = lost`, `conflicting` and any `invalidation_reason` all mean the changes
 * since the last acknowledged position are gone: nothing the engine retries
 * brings them back.
 */
export function classifySlotState(slotName: string, state: SlotState | undefined): EngineError | undefined {
  if (!state) {
    return new EngineError(
      'slot_invalidated',
      `source: replication slot ${slotName} does not exist; changes since the last sync cannot be recovered`,
    );
  }
  if (state.invalidationReason) {
    return new EngineError(
      'slot_invalidated',
      `source: replication slot ${slotName} was invalidated (${state.invalidationReason})`,
    );
  }
  if (state.walStatus === 'lost') {
    return new EngineError(
      'slot_invalidated',
      `source: replication slot ${slotName} lost WAL it needed (wal_status lost)`,
    );
  }
  if (state.conflicting) {
    return new EngineError(
      'slot_invalidated',
      `source: replication slot ${slotName} was invalidated (pg_replication_slots.conflicting)`,
    );
  }
  return undefined;
}

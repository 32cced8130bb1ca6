// The one place that inspects driver errors and turns them into EngineError
// kinds (see errors.ts for what each kind means to the retry policy).
import { EngineError, type ErrorKind, isEngineError } from '../errors.ts';

interface PgDriverError {
  code?: string;
  message: string;
  detail?: string;
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

/** Socket and resolver error codes that mean the server could not be reached. */
export const networkErrorCodes: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EPIPE',
  'EAI_AGAIN',
]);

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
const busyCodes: ReadonlySet<string> = new Set([
  '53100',
  '53200',
  '53300',
  '53400',
  '40001',
  '40P01',
  '55P03',
  '57014',
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
  context: {
    readonly privileges?: string;
    /** The connection's TLS mode (postgres/tls.ts), which decides what a TLS failure means. */
    readonly tlsMode?: string;
  } = {},
): EngineError {
  if (isEngineError(error)) return error;
  if (!(error instanceof Error)) return new EngineError(fallback, `${what}: ${String(error)}`);
  const kind = pgErrorKind(error as PgDriverError, context.tlsMode);
  const resolved = kind === 'internal' ? fallback : kind;
  const code = (error as PgDriverError).code;
  let message = `${what} failed${code ? ` (${code})` : ''}`;
  if (resolved === 'permission') {
    // The object's name (never a value) is safe to show; the privileges come
    // from what was being done, since PostgreSQL does not say which one it checked.
    const denied = deniedObject.exec(error.message);
    if (denied) message += `: permission denied for ${denied[1]} ${denied[2]}`;
    if (context.privileges) message += `; it needs ${context.privileges}`;
  }
  if (resolved === 'tls') message += `: ${tlsProblem(error as PgDriverError, context.tlsMode)}`;
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

/** ClickHouse server error codes (src/Common/ErrorCodes.cpp) and what they mean to the retry policy. */
const clickhouseCodeKinds: Readonly<Record<number, ErrorKind>> = {
  16: 'schema_mismatch', // NO_SUCH_COLUMN_IN_TABLE
  47: 'schema_mismatch', // UNKNOWN_IDENTIFIER
  60: 'schema_mismatch', // UNKNOWN_TABLE
  81: 'config', // UNKNOWN_DATABASE
  159: 'connection', // TIMEOUT_EXCEEDED
  164: 'permission', // READONLY
  192: 'auth', // UNKNOWN_USER
  193: 'auth', // WRONG_PASSWORD
  194: 'auth', // REQUIRED_PASSWORD
  202: 'busy', // TOO_MANY_SIMULTANEOUS_QUERIES
  209: 'connection', // SOCKET_TIMEOUT
  210: 'connection', // NETWORK_ERROR
  241: 'busy', // MEMORY_LIMIT_EXCEEDED
  242: 'destination_write', // TABLE_IS_READ_ONLY
  252: 'destination_write', // TOO_MANY_PARTS
  497: 'permission', // ACCESS_DENIED
  516: 'auth', // AUTHENTICATION_FAILED
};

/**
 * Wraps an error from @clickhouse/client into an EngineError. The server's
 * code comes from the client's ClickHouseError, or from the message text of
 * servers older than the client's parser (18.x writes `Code: 60, e.displayText() = …`).
 */
export function classifyClickHouseError(
  error: unknown,
  what: string,
  fallback: ErrorKind = 'internal',
): EngineError {
  if (isEngineError(error)) return error;
  if (!(error instanceof Error)) return new EngineError(fallback, `${what}: ${String(error)}`);
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && networkErrorCodes.has(code)) {
    return new EngineError('connection', `${what} failed (${code})`, { cause: error });
  }
  const serverCode =
    typeof code === 'string' && /^\d+$/.test(code)
      ? Number(code)
      : Number(/Code: (\d+)/.exec(error.message)?.[1]);
  const kind = Number.isInteger(serverCode) ? (clickhouseCodeKinds[serverCode] ?? fallback) : fallback;
  const shown = Number.isInteger(serverCode) ? ` (code ${serverCode})` : '';
  return new EngineError(kind, `${what} failed${shown}`, { cause: error });
}

/**
 * Node's codes for a server certificate it could not verify: OpenSSL's X.509
 * verification results (https://docs.openssl.org/3.0/man1/openssl-verification-options/)
 * and Node's own host name check.
 */
const untrustedServerCodes: ReadonlySet<string> = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * TLS alerts a server sends when it refuses the client's certificate (or the
 * lack of one), as Node names them: `ERR_SSL_SSL/TLS_ALERT_BAD_CERTIFICATE`,
 * `ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED`, ….
 */
const refusedClientAlert =
  /^ERR_SSL_.*ALERT_(BAD_CERTIFICATE|CERTIFICATE_UNKNOWN|UNKNOWN_CA|CERTIFICATE_REQUIRED|CERTIFICATE_EXPIRED|UNSUPPORTED_CERTIFICATE|CERTIFICATE_REVOKED)$/;

/**
 * What a failed TLS handshake means to the operator, from the socket error's
 * code; undefined when the code is not a certificate problem. Both are
 * configuration: retrying does not make a certificate trusted.
 */
export function tlsFailureOf(code: string | undefined): { kind: ErrorKind; detail: string } | undefined {
  if (!code) return undefined;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return {
      kind: 'config',
      detail: `the server's certificate does not name the host connected to (${code})`,
    };
  }
  if (untrustedServerCodes.has(code)) {
    return {
      kind: 'config',
      detail: `the server's certificate is not trusted (${code}); set rootCa to the CA that signed it`,
    };
  }
  if (refusedClientAlert.test(code)) {
    return {
      kind: 'auth',
      detail: `the server refused the client certificate (${code}); set certificate and privateKey to a pair its CA signed`,
    };
  }
  return undefined;
}

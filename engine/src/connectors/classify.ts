// The one place that inspects driver errors and turns them into EngineError
// kinds (see errors.ts for what each kind means to the retry policy).
import { EngineError, type ErrorKind, isEngineError } from '../errors.ts';

interface PgDriverError {
  code?: string;
  message: string;
}

const networkCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EPIPE',
  'EAI_AGAIN',
]);

function pgErrorKind(error: PgDriverError): ErrorKind {
  const code = error.code ?? '';
  if (networkCodes.has(code)) return 'connection';
  // SQLSTATE classes: https://www.postgresql.org/docs/current/errcodes-appendix.html
  if (code === '28P01' || code === '28000') return 'auth';
  if (code === '42501') return 'permission';
  if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return 'connection';
  if (code === '58P01' && /WAL segment .* has already been removed/.test(error.message)) return 'wal_removed';
  if (
    code === '55000' &&
    /replication slot .* (can no longer be used|has been invalidated)/i.test(error.message)
  ) {
    return 'slot_invalidated';
  }
  if (code === '42P01' || code === '42703') return 'schema_mismatch';
  if (code === '53100' || code === '53200' || code === '53300' || code === '40001' || code === '40P01') {
    return 'destination_write';
  }
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
export function classifyPgError(error: unknown, what: string, fallback: ErrorKind = 'internal'): EngineError {
  if (isEngineError(error)) return error;
  if (!(error instanceof Error)) return new EngineError(fallback, `${what}: ${String(error)}`);
  const kind = pgErrorKind(error as PgDriverError);
  const resolved = kind === 'internal' ? fallback : kind;
  const code = (error as PgDriverError).code;
  return new EngineError(resolved, `${what} failed${code ? ` (${code})` : ''}`, { cause: error });
}

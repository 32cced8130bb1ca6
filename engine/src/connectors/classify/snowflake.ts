// snowflake-sdk errors. The driver names its errors by where they arose
// (NetworkError, OperationFailedError, …) and gives server errors Snowflake's
// own code and a SQLSTATE; its own codes are 4xxxxx (lib/error_code.js).
// Snowflake is only ever a destination.
import { EngineError, type ErrorKind, isEngineError } from '../../errors.ts';
import { classifyLocalResourceError } from './local.ts';
import { hasNetworkCode, notAnError } from './network.ts';

interface SnowflakeDriverError {
  readonly name?: string;
  readonly code?: unknown;
  readonly sqlState?: unknown;
}

/** The driver's own codes that mean no answer came: ERR_SF_NETWORK_COULD_NOT_CONNECT, ERR_LARGE_RESULT_SET_NETWORK_COULD_NOT_CONNECT. */
const unreachableCodes: ReadonlySet<string> = new Set(['401001', '402001']);

/**
 * Server codes of a refused login (https://docs.snowflake.com/en/user-guide/key-pair-auth-troubleshooting):
 * 390100 incorrect user name or password, 390144 JWT token invalid (wrong key or
 * fingerprint), 390101/390102 user locked or disabled.
 */
const authCodes: ReadonlySet<string> = new Set(['390100', '390101', '390102', '390144']);

/** Server codes of an object the peer names that does not exist: 390201 database, 390189 role, 000606 no warehouse. */
const configCodes: ReadonlySet<string> = new Set(['390201', '390189', '000606']);

/** Server codes of a name the table lacks: 000904 invalid identifier (a column gone). */
const missingNameCodes: ReadonlySet<string> = new Set(['000904']);

/**
 * SQLSTATE classes 22 (data exception: 100072 NULL in a NOT NULL column,
 * 100038 a value not of the column's type, 100046 a number out of range) and
 * 23 (integrity constraint violation): the destination table refuses a row
 * the source has, as the PostgreSQL classifier reads the same classes.
 */
function refusedValue(sqlState: string): boolean {
  return sqlState.startsWith('22') || sqlState.startsWith('23');
}

/** SQLSTATEs (ODBC/ANSI, as Snowflake sends them) and what they mean to the retry policy. */
const sqlStateKinds: Readonly<Record<string, ErrorKind>> = {
  '28000': 'auth',
  '42501': 'permission',
  // 002003 "object does not exist or not authorized" comes as 02000.
  '02000': 'schema_mismatch',
  '42S02': 'schema_mismatch',
  '42S22': 'schema_mismatch',
  '57014': 'busy',
};

function snowflakeErrorKind(error: SnowflakeDriverError, fallback: ErrorKind): ErrorKind {
  const code = error.code === undefined || error.code === null ? '' : String(error.code);
  const sqlState = typeof error.sqlState === 'string' ? error.sqlState : '';
  if (error.name === 'NetworkError' || unreachableCodes.has(code) || hasNetworkCode(error))
    return 'connection';
  if (error.name === 'InvalidParameterError' || error.name === 'MissingParameterError') return 'config';
  if (authCodes.has(code)) return 'auth';
  if (configCodes.has(code)) return 'config';
  if (missingNameCodes.has(code) || refusedValue(sqlState)) return 'schema_mismatch';
  return sqlStateKinds[sqlState] ?? fallback;
}

/** `what` says what was being done, e.g. "destination: log in". */
export function classifySnowflakeError(
  error: unknown,
  what: string,
  fallback: ErrorKind = 'destination_write',
): EngineError {
  if (isEngineError(error)) return error;
  if (!(error instanceof Error)) return notAnError(error, what, fallback);
  // The batch files live on the engine's own disk (a PUT reads them there).
  const local = classifyLocalResourceError(error, what);
  if (local) return local;
  const driverError = error as SnowflakeDriverError;
  const kind = snowflakeErrorKind(driverError, fallback);
  const code = driverError.code === undefined || driverError.code === null ? '' : String(driverError.code);
  return new EngineError(kind, `${what} failed${code ? ` (${code})` : ''}`, { cause: error });
}

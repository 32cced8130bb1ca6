// @clickhouse/client errors, by the server's error code. ClickHouse is only
// ever a destination.
import { EngineError, type ErrorKind, isEngineError } from '../../errors.ts';
import { hasNetworkCode, notAnError } from './network.ts';

/** ClickHouse server error codes (src/Common/ErrorCodes.cpp) and what they mean to the retry policy. */
const clickhouseCodeKinds: Readonly<Record<number, ErrorKind>> = {
  // A value the column cannot take, found by the server's parser: sending it
  // again fails again.
  6: 'schema_mismatch', // CANNOT_PARSE_TEXT
  27: 'schema_mismatch', // CANNOT_PARSE_INPUT_ASSERTION_FAILED
  38: 'schema_mismatch', // CANNOT_PARSE_DATE
  41: 'schema_mismatch', // CANNOT_PARSE_DATETIME
  69: 'schema_mismatch', // ARGUMENT_OUT_OF_BOUND (a Decimal too big)
  72: 'schema_mismatch', // CANNOT_PARSE_NUMBER
  321: 'schema_mismatch', // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
  376: 'schema_mismatch', // CANNOT_PARSE_UUID
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
  if (!(error instanceof Error)) return notAnError(error, what, fallback);
  const code = (error as { code?: unknown }).code;
  if (hasNetworkCode(error)) {
    const shown = typeof code === 'string' ? ` (${code})` : '';
    return new EngineError('connection', `${what} failed${shown}`, { cause: error });
  }
  const serverCode =
    typeof code === 'string' && /^\d+$/.test(code)
      ? Number(code)
      : Number(/Code: (\d+)/.exec(error.message)?.[1]);
  const kind = Number.isInteger(serverCode) ? (clickhouseCodeKinds[serverCode] ?? fallback) : fallback;
  const shown = Number.isInteger(serverCode) ? ` (code ${serverCode})` : '';
  return new EngineError(kind, `${what} failed${shown}`, { cause: error });
}

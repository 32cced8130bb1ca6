// The one module that inspects driver errors (pg, @clickhouse/client,
// @platformatic/kafka, snowflake-sdk, ssh2, sockets) and turns them into EngineError kinds; see
// errors.ts for what each kind means to the retry policy. One file per driver;
// connectors call the function of their driver, and `classifyError` serves a
// caller that does not know which driver threw (the mirror supervisor, the
// peer check).
import type { EngineError, ErrorKind } from '../../errors.ts';
import { classifyClickHouseError } from './clickhouse.ts';
import { classifyKafkaError } from './kafka.ts';
import { classifyLocalResourceError } from './local.ts';
import { classifyPgError } from './pg.ts';
import { classifySnowflakeError } from './snowflake.ts';
import { classifySshError, isSshError } from './ssh.ts';

export { classifyClickHouseError } from './clickhouse.ts';
export { classifyKafkaError, kafkaErrorName, topicRefusal } from './kafka.ts';
export { classifyLocalResourceError, isLocalResourceError } from './local.ts';
export { networkErrorCodes, type Side } from './network.ts';
export { classifyPgError, classifySlotState, type PgErrorContext, type SlotState } from './pg.ts';
export { classifySnowflakeError } from './snowflake.ts';
export { classifySshError } from './ssh.ts';
export { tlsFailureOf } from './tls.ts';

type Driver = 'pg' | 'clickhouse' | 'kafka' | 'snowflake' | 'ssh';

/** Snowflake's driver names its errors by origin and numbers them with six digits (lib/errors.js). */
const snowflakeErrorNames: ReadonlySet<string> = new Set([
  'NetworkError',
  'RequestFailedError',
  'UnexpectedContentError',
  'OperationFailedError',
  'LargeResultSetError',
  'ClientError',
]);

/** How a ClickHouse server's error text begins: `Code: 60. DB::Exception: …` (18.x: `Code: 60, e.displayText() = …`). */
const clickhouseServerText = /^Code: \d+[.,] /;

/** Which driver threw `error`, by the marks each leaves; pg (and plain socket errors) otherwise. */
function driverOf(error: unknown): Driver {
  if (!(error instanceof Error)) return 'pg';
  if (isSshError(error)) return 'ssh';
  // @platformatic/kafka prefixes every error code.
  const platformatic = (error as { code?: unknown }).code;
  if (typeof platformatic === 'string' && platformatic.startsWith('PLT_KFK_')) return 'kafka';
  // @clickhouse/client leaves `name` as Error; its class keeps its own name.
  // Servers older than its parser (18.x) come as a plain Error of their text.
  if (error.constructor.name === 'ClickHouseError' || clickhouseServerText.test(error.message)) {
    return 'clickhouse';
  }
  const code = (error as { code?: unknown }).code;
  const snowflakeCode = typeof code === 'number' || (typeof code === 'string' && /^\d{6}$/.test(code));
  if (snowflakeErrorNames.has(error.name) && snowflakeCode) return 'snowflake';
  return 'pg';
}

/**
 * Classifies an error whose driver the caller does not know. `what` says what
 * was being done; `fallback` is the kind when the error says nothing more.
 */
export function classifyError(error: unknown, what: string, fallback: ErrorKind = 'internal'): EngineError {
  // The engine's own file system or memory, whichever connector's call it was.
  const local = classifyLocalResourceError(error, what);
  if (local) return local;
  switch (driverOf(error)) {
    case 'ssh':
      return classifySshError(error, what);
    case 'kafka':
      return classifyKafkaError(error, what, fallback);
    case 'clickhouse':
      return classifyClickHouseError(error, what, fallback);
    case 'snowflake':
      return classifySnowflakeError(error, what, fallback);
    case 'pg':
      return classifyPgError(error, what, fallback);
  }
}

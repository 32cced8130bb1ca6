import snowflake from 'snowflake-sdk';
import type { DatawarehouseConfig } from '../../resources/peer.ts';
import { classifySnowflakeError } from '../classify/index.ts';

let configured = false;

/** Without this the driver writes a log file into the working directory. */
function configureDriver(): void {
  if (configured) return;
  const quiet = (): void => {};
  snowflake.configure({
    customLogger: { error: quiet, warn: quiet, info: quiet, debug: quiet, trace: quiet },
  });
  configured = true;
}

/**
 * Logs in with the key pair (SNOWFLAKE_JWT) and runs a trivial query. Fails
 * with an EngineError whose cause is the driver's error.
 */
export async function checkDatawarehousePeer(
  config: DatawarehouseConfig,
  timeoutMs: number,
): Promise<Record<string, never>> {
  configureDriver();
  const connection = snowflake.createConnection({
    account: config.accountId,
    username: config.username,
    authenticator: 'SNOWFLAKE_JWT',
    privateKey: config.privateKey,
    ...(config.password ? { privateKeyPass: config.password } : {}),
    database: config.database,
    warehouse: config.warehouse,
    role: config.role,
    timeout: timeoutMs,
    sfRetryMaxLoginRetries: 1,
    ...(config.accessUrl ? { accessUrl: config.accessUrl } : {}),
  });
  try {
    // Not connectAsync: its promise resolves when the login fails (the error
    // goes only to a callback), and the failure then shows as the next
    // statement's "terminated connection". connect() hands every failure to its callback.
    await new Promise<void>((resolve, reject) => {
      connection.connect((error) => (error ? reject(error) : resolve()));
    });
  } catch (error) {
    throw classifySnowflakeError(error, 'peer check: log in', 'connection');
  }
  try {
    await new Promise<void>((resolve, reject) => {
      connection.execute({ sqlText: 'SELECT 1', complete: (error) => (error ? reject(error) : resolve()) });
    });
    return {};
  } catch (error) {
    throw classifySnowflakeError(error, 'peer check: run a query', 'connection');
  } finally {
    await new Promise<void>((resolve) => connection.destroy(() => resolve()));
  }
}

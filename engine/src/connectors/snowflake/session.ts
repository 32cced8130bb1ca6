// One Snowflake session (a driver connection) as the connector uses it: run one
// statement, get its rows and affected-row count. A session carries at most one
// transaction, so the batch path holds one session for the whole batch and the
// snapshot path takes its own sessions from SessionPool. snowflake-sdk is loaded
// on first use: a deployment without Snowflake peers never pays for loading it.
import { EngineError } from '../../errors.ts';
import type { DatawarehouseConfig } from '../../resources/peer.ts';
import { classifySnowflakeError } from '../classify/index.ts';
import { loginPrivateKey } from './private-key.ts';

export type Row = Record<string, unknown>;

export interface StatementResult {
  readonly rows: readonly Row[];
  /** Rows inserted, updated or deleted, as Snowflake counts them. */
  readonly affectedRows: number;
}

/** What the connector needs of a session; the unit tests provide a fake. */
export interface SnowflakeSession {
  /**
   * Runs one statement. Rejects with the driver's error, unclassified.
   * `numbersAsStrings`: NUMBER columns come back as their exact text (ids
   * beyond 2^53).
   */
  execute(sqlText: string, options?: { readonly numbersAsStrings?: boolean }): Promise<StatementResult>;
  /** Ends the session. Safe to call twice. */
  close(): Promise<void>;
}

export interface SessionOptions {
  /** QUERY_TAG of every statement: names the mirror in Snowflake's query history. */
  readonly queryTag: string;
  /** Login timeout, in ms. */
  readonly connectTimeoutMs?: number;
}

type SnowflakeSdk = typeof import('snowflake-sdk');
let sdk: Promise<SnowflakeSdk> | undefined;

function loadSdk(): Promise<SnowflakeSdk> {
  sdk ??= import('snowflake-sdk').then(({ default: loaded }) => {
    // Without a logger of its own the driver writes snowflake.log into the working directory.
    const quiet = (): void => {};
    loaded.configure({
      customLogger: { error: quiet, warn: quiet, info: quiet, debug: quiet, trace: quiet },
    });
    return loaded;
  });
  return sdk;
}

/** Affected rows from a DML result row: Snowflake names them "number of rows inserted|updated|deleted". */
export function affectedRowCount(rows: readonly Row[]): number {
  let count = 0;
  for (const row of rows) {
    for (const [name, value] of Object.entries(row)) {
      if (/^number of rows (inserted|updated|deleted)$/.test(name)) count += Number(value);
    }
  }
  return count;
}

/** Logs in with the peer's key pair. Throws EngineError. */
export async function openSession(
  config: DatawarehouseConfig,
  options: SessionOptions,
): Promise<SnowflakeSession> {
  const privateKey = loginPrivateKey(config.privateKey, config.password);
  const snowflake = await loadSdk();
  const timeoutSeconds = config.queryTimeout;
  const connection = snowflake.createConnection({
    account: config.accountId,
    username: config.username,
    authenticator: 'SNOWFLAKE_JWT',
    privateKey,
    database: config.database,
    warehouse: config.warehouse,
    role: config.role,
    queryTag: options.queryTag,
    timeout: options.connectTimeoutMs ?? 30_000,
    sfRetryMaxLoginRetries: 1,
    // A mirror's sessions can sit idle between batches for longer than
    // Snowflake's four-hour session timeout: heartbeats keep them valid.
    clientSessionKeepAlive: true,
    ...(config.accessUrl ? { accessUrl: config.accessUrl } : {}),
  });
  try {
    // connect(), not connectAsync(): the latter resolves when the login fails.
    await new Promise<void>((resolve, reject) => {
      connection.connect((error) => (error ? reject(error) : resolve()));
    });
  } catch (error) {
    throw classifySnowflakeError(error, 'snowflake: log in', 'connection');
  }
  let closed = false;
  return {
    execute(sqlText: string, executeOptions = {}): Promise<StatementResult> {
      return new Promise((resolve, reject) => {
        // Snowflake cancels a statement after STATEMENT_TIMEOUT_IN_SECONDS; the
        // timer is the backstop for a server that does not (the emulator).
        let timer: NodeJS.Timeout | undefined;
        const statement = connection.execute({
          sqlText,
          ...(executeOptions.numbersAsStrings ? { fetchAsString: ['Number' as const] } : {}),
          parameters: { STATEMENT_TIMEOUT_IN_SECONDS: timeoutSeconds, QUERY_TAG: options.queryTag },
          complete: (error, _statement, rows) => {
            clearTimeout(timer);
            if (error) reject(error);
            else {
              const resultRows = (rows ?? []) as Row[];
              resolve({ rows: resultRows, affectedRows: affectedRowCount(resultRows) });
            }
          },
        });
        timer = setTimeout(
          () => {
            statement.cancel(() => {});
            reject(
              new EngineError('busy', `a statement did not finish within query_timeout (${timeoutSeconds}s)`),
            );
          },
          (timeoutSeconds + 5) * 1000,
        );
      });
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await new Promise<void>((resolve) => connection.destroy(() => resolve()));
    },
  };
}

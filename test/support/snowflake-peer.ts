// A Snowflake peer for tests: the emulator of the test environment (fakesnow
// behind its adapter, docs/snowflake-emulator.md), or a real account when the
// TRIBUTARY_SNOWFLAKE_* variables are set (docs/snowflake.md, "Testing against
// a real account"). Each suite gets a database (emulator) or schema prefix of its own.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  openSession,
  type Row,
  type SnowflakeSession,
} from '../../engine/src/connectors/snowflake/session.ts';
import type { DatawarehouseConfig } from '../../engine/src/resources/peer.ts';
import { snowflake } from './testenv.ts';

const env = process.env;

/** The real account's settings, when every variable is set. */
export function realAccount(): DatawarehouseConfig | undefined {
  const privateKey =
    env.TRIBUTARY_SNOWFLAKE_PRIVATE_KEY ??
    (env.TRIBUTARY_SNOWFLAKE_PRIVATE_KEY_PATH
      ? readFileSync(env.TRIBUTARY_SNOWFLAKE_PRIVATE_KEY_PATH, 'utf8')
      : undefined);
  const {
    TRIBUTARY_SNOWFLAKE_ACCOUNT: accountId,
    TRIBUTARY_SNOWFLAKE_USER: username,
    TRIBUTARY_SNOWFLAKE_WAREHOUSE: warehouse,
    TRIBUTARY_SNOWFLAKE_ROLE: role,
    TRIBUTARY_SNOWFLAKE_DATABASE: database,
  } = env;
  if (!accountId || !username || !privateKey || !warehouse || !role || !database) return undefined;
  return {
    accountId,
    username,
    privateKey,
    ...(env.TRIBUTARY_SNOWFLAKE_PRIVATE_KEY_PASSPHRASE
      ? { password: env.TRIBUTARY_SNOWFLAKE_PRIVATE_KEY_PASSPHRASE }
      : {}),
    warehouse,
    role,
    database,
    queryTimeout: 120,
  };
}

/** A fresh RSA key as PKCS#8 PEM, encrypted when a passphrase is given. */
export function testPrivateKey(passphrase?: string): string {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return passphrase
    ? privateKey.export({ format: 'pem', type: 'pkcs8', cipher: 'aes-256-cbc', passphrase }).toString()
    : privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
}

/**
 * The emulator's URL: the test environment's, or TRIBUTARY_TEST_SNOWFLAKE_URL (a
 * second emulator started by hand, e.g. to try an adapter change without
 * restarting the shared one).
 */
export const emulatorUrl = env.TRIBUTARY_TEST_SNOWFLAKE_URL ?? snowflake.url;

/** The emulator as a peer; it accepts any key (it does not check JWTs). */
export function emulatorConfig(
  database: string,
  extra: Partial<DatawarehouseConfig> = {},
): DatawarehouseConfig {
  return {
    accountId: 'tributary',
    username: 'tributary',
    privateKey: testPrivateKey(),
    database,
    warehouse: 'TEST_WH',
    role: 'TEST_ROLE',
    queryTimeout: 30,
    accessUrl: emulatorUrl,
    ...extra,
  };
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${randomBytes(4).toString('hex').toUpperCase()}`;
}

/** A session for the test's own queries. */
export class SnowflakeAdmin {
  readonly #session: Promise<SnowflakeSession>;

  constructor(config: DatawarehouseConfig) {
    this.#session = openSession(config, { queryTag: 'tributary tests' });
  }

  async rows(sql: string): Promise<Row[]> {
    return [...(await (await this.#session).execute(sql)).rows];
  }

  async close(): Promise<void> {
    await (await this.#session).close();
  }
}

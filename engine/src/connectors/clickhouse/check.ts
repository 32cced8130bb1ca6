import { randomBytes } from 'node:crypto';
import type { AnalyticsConfig } from '../../resources/peer.ts';
import { classifyClickHouseError } from '../classify/index.ts';
import { createAnalyticsClient } from './client.ts';
import { quoteIdentifier } from './sql.ts';

/**
 * Reads the server version, then proves the user can do what a mirror does in
 * `database`: create a table, insert into it, and drop it (a scratch table with
 * a random name). Fails on a wrong port, credentials, database or grant, with
 * an EngineError whose cause is the driver's error.
 */
export async function checkAnalyticsPeer(
  config: AnalyticsConfig,
  timeoutMs: number,
): Promise<{ version: string }> {
  const client = await createAnalyticsClient(config, timeoutMs);
  const step = async <T>(what: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw classifyClickHouseError(error, `peer check: ${what}`, 'connection');
    }
  };
  try {
    const rows = await step('read the server version', async () => {
      const result = await client.query({ query: 'SELECT version() AS version', format: 'JSONEachRow' });
      return result.json<{ version: string }>();
    });
    const scratch = `${quoteIdentifier(config.database)}.${quoteIdentifier(`_tributary_check_${randomBytes(6).toString('hex')}`)}`;
    await step(`create a scratch table in ${config.database}`, () =>
      client.command({ query: `CREATE TABLE ${scratch} (id UInt8) ENGINE = MergeTree ORDER BY id` }),
    );
    try {
      await step('insert into the scratch table', () =>
        client.command({ query: `INSERT INTO ${scratch} (id) VALUES (1)` }),
      );
    } finally {
      await step('drop the scratch table', () =>
        client.command({ query: `DROP TABLE IF EXISTS ${scratch}` }),
      );
    }
    return { version: rows[0]?.version ?? 'unknown' };
  } finally {
    await client.close();
  }
}

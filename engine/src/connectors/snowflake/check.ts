// The peer check of a Snowflake peer: the key is read and decrypted first (a
// wrong passphrase is reported as such: see private-key.ts), then the peer
// logs in with it (SNOWFLAKE_JWT) with its warehouse and role and runs a
// trivial query. Fails with an EngineError whose cause is the driver's error.
import type { DatawarehouseConfig } from '../../resources/peer.ts';
import { classifySnowflakeError } from '../classify/index.ts';
import { openSession } from './session.ts';

export async function checkDatawarehousePeer(
  config: DatawarehouseConfig,
  timeoutMs: number,
): Promise<Record<string, never>> {
  const session = await openSession(config, {
    queryTag: 'tributary peer check',
    connectTimeoutMs: timeoutMs,
  });
  try {
    await session.execute('SELECT 1');
    return {};
  } catch (error) {
    throw classifySnowflakeError(error, 'peer check: run a query', 'connection');
  } finally {
    await session.close();
  }
}

import type { RelationalConfig } from '../../../resources/peer.ts';
import { classifyPgError } from '../../classify/index.ts';
import { connectPostgres } from './connect.ts';

/** Connects (through the SSH tunnel when set) and reads the server version. */
export async function checkRelationalPeer(config: RelationalConfig): Promise<{ version: string }> {
  const connection = await connectPostgres(config, {
    applicationName: 'tributary:peer-check',
    connectTimeoutMs: 10_000,
  });
  try {
    const result = await connection.client.query<{ version: string }>(
      `SELECT current_setting('server_version') AS version`,
    );
    return { version: result.rows[0]?.version ?? 'unknown' };
  } catch (error) {
    throw classifyPgError(error, 'peer check: read the server version', 'connection');
  } finally {
    await connection.close();
  }
}

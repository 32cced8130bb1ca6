import type { AnalyticsConfig } from '../../resources/peer.ts';
import { createAnalyticsClient } from './client.ts';

/** Reads the server version; fails on a wrong port, credentials or database. */
export async function checkAnalyticsPeer(
  config: AnalyticsConfig,
  timeoutMs: number,
): Promise<{ version: string }> {
  const client = createAnalyticsClient(config, timeoutMs);
  try {
    const result = await client.query({ query: 'SELECT version() AS version', format: 'JSONEachRow' });
    const rows = await result.json<{ version: string }>();
    return { version: rows[0]?.version ?? 'unknown' };
  } finally {
    await client.close();
  }
}

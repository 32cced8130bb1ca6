import type { StreamConfig } from '../../resources/peer.ts';
import { classifyKafkaError } from '../classify/index.ts';
import { connectionErrorOf, createStreamAdmin } from './client.ts';

/**
 * Connects, authenticates and reads the cluster's brokers (a metadata request
 * for no topic). Kafka reports no version here.
 * Fails with an EngineError whose cause is the driver's error.
 */
export async function checkStreamPeer(
  config: StreamConfig,
  timeoutMs: number,
): Promise<Record<string, never>> {
  const admin = await createStreamAdmin(config, { clientId: 'tributary-peer-check', timeoutMs });
  try {
    await admin.metadata({ topics: [] });
    return {};
  } catch (error) {
    throw classifyKafkaError(error, 'peer check: connect', 'connection', connectionErrorOf(admin));
  } finally {
    await admin.close().catch(() => {});
  }
}

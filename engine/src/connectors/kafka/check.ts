import type { StreamConfig } from '../../resources/peer.ts';
import { classifyKafkaError } from '../classify/index.ts';
import { createStreamClient } from './client.ts';

/**
 * Authenticates and lists cluster metadata. Kafka reports no version here.
 * Fails with an EngineError whose cause is the driver's error.
 */
export async function checkStreamPeer(
  config: StreamConfig,
  timeoutMs: number,
): Promise<Record<string, never>> {
  const admin = (await createStreamClient(config, { clientId: 'tributary-peer-check', timeoutMs })).admin();
  try {
    await admin.connect();
  } catch (error) {
    throw classifyKafkaError(error, 'peer check: connect', 'connection');
  }
  try {
    await admin.describeCluster();
    return {};
  } catch (error) {
    throw classifyKafkaError(error, 'peer check: describe cluster', 'connection');
  } finally {
    await admin.disconnect();
  }
}

import type { StreamConfig } from '../../resources/peer.ts';
import { createStreamClient } from './client.ts';
import { classifyKafkaError } from './errors.ts';

/** Authenticates and lists cluster metadata. Kafka reports no version here. */
export async function checkStreamPeer(
  config: StreamConfig,
  timeoutMs: number,
): Promise<Record<string, never>> {
  const admin = createStreamClient(config, { clientId: 'tributary-peer-check', timeoutMs }).admin();
  try {
    await admin.connect();
    await admin.describeCluster();
    return {};
  } catch (error) {
    // The kind's remedy first (an untrusted certificate names rootCa), the driver's words after.
    throw classifyKafkaError(error, 'kafka', 'connection');
  } finally {
    await admin.disconnect();
  }
}

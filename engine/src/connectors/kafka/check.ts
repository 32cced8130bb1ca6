import type { StreamConfig } from '../../resources/peer.ts';
import { createStreamClient } from './client.ts';

/** Authenticates and lists cluster metadata. Kafka reports no version here. */
export async function checkStreamPeer(
  config: StreamConfig,
  timeoutMs: number,
): Promise<Record<string, never>> {
  const admin = createStreamClient(config, { clientId: 'tributary-peer-check', timeoutMs }).admin();
  await admin.connect();
  try {
    await admin.describeCluster();
    return {};
  } finally {
    await admin.disconnect();
  }
}

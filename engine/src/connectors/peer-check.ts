// Checks that a peer is reachable and usable, within a bounded time, and returns
// its server version where the kind has one. Used when a peer is created and by
// the peer reconciler's periodic re-check.
import { EngineError } from '../errors.ts';
import type { Peer, PeerKind, PeerOfKind } from '../resources/peer.ts';
import { classifyError } from './classify/index.ts';

export interface PeerCheckResult {
  /** The data store's version; only relational and analytics peers report one. */
  readonly version?: string;
}

type PeerChecker<Kind extends PeerKind> = (
  peer: PeerOfKind<Kind>,
  timeoutMs: number,
) => Promise<PeerCheckResult>;

// Each kind's driver is loaded when a peer of that kind is first checked: a
// deployment that never has a Snowflake peer never pays for loading its driver
// (the largest: about 1.7 s of start-up on a small machine).
const checkers = {
  relational: async (peer) => (await import('./postgres/driver/check.ts')).checkRelationalPeer(peer.config),
  analytics: async (peer, timeoutMs) =>
    (await import('./clickhouse/check.ts')).checkAnalyticsPeer(peer.config, timeoutMs),
  datawarehouse: async (peer, timeoutMs) =>
    (await import('./snowflake/check.ts')).checkDatawarehousePeer(peer.config, timeoutMs),
  stream: async (peer, timeoutMs) =>
    (await import('./kafka/check.ts')).checkStreamPeer(peer.config, timeoutMs),
} satisfies { [Kind in PeerKind]: PeerChecker<Kind> };

export const defaultPeerCheckTimeoutMs = 15_000;

/** Throws EngineError (with the driver's error as cause) when the peer is not usable. */
export async function checkPeer(peer: Peer, timeoutMs = defaultPeerCheckTimeoutMs): Promise<PeerCheckResult> {
  const checker = checkers[peer.kind] as PeerChecker<typeof peer.kind>;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new EngineError('connection', `no answer within ${Math.round(timeoutMs / 1000)}s`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([checker(peer, timeoutMs), timeout]);
  } catch (error) {
    // Each checker classifies its driver's errors; this keeps the promise for
    // anything that escaped one (a driver failing while it loads, say).
    throw classifyError(error, `peer check of ${peer.name}`, 'connection');
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The reason a check failed, for the peer-validation message the interface
 * returns: the driver's own words are allowed there (and useful), secrets are not.
 */
export function describeCheckFailure(error: unknown, secrets: readonly string[]): string {
  const parts: string[] = [];
  for (let current: unknown = error; current instanceof Error && parts.length < 3; current = current.cause) {
    if (current.message && !parts.includes(current.message)) parts.push(current.message);
  }
  let text = parts.join(': ') || String(error);
  for (const secret of secrets) if (secret.length >= 3) text = text.split(secret).join('********');
  return text;
}

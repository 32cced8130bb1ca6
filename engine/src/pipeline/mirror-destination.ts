// The destination a mirror writes to: the peer's connector (connectors/
// registry.ts), behind the pipeline's script stage (script-stage.ts) when the
// mirror has a script and the destination holds tables. A Kafka destination
// applies a script in its message form itself (connectors/kafka/
// script-records.ts), so it is not wrapped. A mirror without a script has no
// stage: its hot path is the destination's own.

import type { Destination } from '../connectors/destination.ts';
import { createDestination, type DestinationOptions } from '../connectors/registry.ts';
import type { Peer } from '../resources/peer.ts';
import { withScriptStage } from './script-stage.ts';

export function createMirrorDestination(peer: Peer, options: DestinationOptions): Destination {
  const destination = createDestination(peer, options);
  const { script, logger, log } = options;
  return script && peer.kind !== 'stream'
    ? withScriptStage(destination, { script, logger, log })
    : destination;
}

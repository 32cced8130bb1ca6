// Destination constructors by peer kind. `satisfies` makes the compiler refuse
// a peer kind that has no destination.
import type { Logger } from 'pino';
import type { MirrorSpec } from '../resources/mirror.ts';
import type { Peer, PeerKind } from '../resources/peer.ts';
import type { Destination } from './destination.ts';
import { PostgresDestination } from './postgres/destination.ts';

export interface DestinationOptions {
  readonly spec: MirrorSpec;
  readonly logger: Logger;
}

type DestinationFactory<Kind extends PeerKind> = (
  peer: Extract<Peer, { kind: Kind }>,
  options: DestinationOptions,
) => Destination;

const destinationFactories = {
  relational: (peer, { spec, logger }) =>
    new PostgresDestination(peer.config, {
      system: spec.system,
      mirrorColumns: { softDeleteColumn: spec.softDeleteColName, syncedAtColumn: spec.syncedAtColName },
      applicationName: `tributary:${spec.name}:destination`.slice(0, 63),
      logger,
    }),
} satisfies { [Kind in PeerKind]: DestinationFactory<Kind> };

export function createDestination(peer: Peer, options: DestinationOptions): Destination {
  const factory = destinationFactories[peer.kind] as DestinationFactory<typeof peer.kind>;
  return factory(peer, options);
}

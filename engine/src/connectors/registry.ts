// Source and destination constructors by peer kind. `satisfies` makes the
// compiler refuse a peer kind that says nothing about being either.
import type { Logger } from 'pino';
import type { LogLevel } from '../catalog/catalog.ts';
import { EngineError } from '../errors.ts';
import { warnUnverifiedHostKey } from '../net/ssh-tunnel.ts';
import type { MirrorSpec } from '../resources/mirror.ts';
import type { Peer, PeerKind } from '../resources/peer.ts';
import type { ScriptSource } from '../resources/script.ts';
import { ClickHouseDestination } from './clickhouse/destination.ts';
import type { Destination } from './destination.ts';
import { KafkaDestination } from './kafka/destination.ts';
import { PostgresDestination } from './postgres/destination/destination.ts';
import { PostgresSource } from './postgres/source/source.ts';
import { SnowflakeDestination } from './snowflake/destination.ts';
import type { Source } from './source.ts';

export interface DestinationOptions {
  readonly spec: MirrorSpec;
  readonly logger: Logger;
  /**
   * The mirror's record-transforming script, when `spec.script` names one: Kafka
   * runs it in its message form; every other destination is wrapped in the
   * pipeline's script stage by the pipeline (pipeline/mirror-destination.ts).
   */
  readonly script?: ScriptSource | undefined;
  /** Writes a line to the mirror's logs (a script's `print`); the process log when absent. */
  readonly log?: ((level: LogLevel, message: string) => void) | undefined;
}

type DestinationFactory<Kind extends PeerKind> = (
  peer: Extract<Peer, { kind: Kind }>,
  options: DestinationOptions,
) => Destination;

// null: the kind is not a destination in this build yet (its connector is missing).
const destinationFactories = {
  analytics: (peer, { spec, logger }) =>
    new ClickHouseDestination(peer.config, {
      mirror: spec.name,
      mirrorColumns: { softDeleteColumn: spec.softDeleteColName, syncedAtColumn: spec.syncedAtColName },
      tableMappings: spec.tableMappings,
      maxBatchSize: spec.maxBatchSize,
      logger,
    }),
  datawarehouse: (peer, { spec, logger }) =>
    new SnowflakeDestination(peer.config, {
      mirror: spec.name,
      mirrorColumns: { softDeleteColumn: spec.softDeleteColName, syncedAtColumn: spec.syncedAtColName },
      logger,
    }),
  stream: (peer, { spec, logger, script, log }) =>
    new KafkaDestination(peer.config, { mirror: spec.name, logger, script, log }),
  relational: (peer, { spec, logger, log }) => {
    warnUnverifiedHostKey(peer.name, peer.config.sshConfig, (message) =>
      log ? log('WARN', message) : logger.warn(message),
    );
    return new PostgresDestination(peer.config, {
      system: spec.system,
      mirrorColumns: { softDeleteColumn: spec.softDeleteColName, syncedAtColumn: spec.syncedAtColName },
      applicationName: `tributary:${spec.name}:destination`.slice(0, 63),
      logger,
    });
  },
} satisfies { [Kind in PeerKind]: DestinationFactory<Kind> | null };

/**
 * The kinds whose destination loads a streaming table again online
 * (`Destination.shadowTables`, pipeline/table-resync.ts): what the API accepts
 * a streaming table's resync for. In step with the destinations' own
 * `shadowTables` (registry.test.ts).
 */
const onlineResyncKinds: ReadonlySet<PeerKind> = new Set([
  'relational',
  'analytics',
  'datawarehouse',
  'stream',
]);

export function resyncsOnline(kind: PeerKind): boolean {
  return onlineResyncKinds.has(kind);
}

export function isSupportedDestination(kind: PeerKind): boolean {
  return destinationFactories[kind] !== null;
}

export function createDestination(peer: Peer, options: DestinationOptions): Destination {
  const factory = destinationFactories[peer.kind] as DestinationFactory<typeof peer.kind> | null;
  if (!factory) throw new EngineError('config', `${peer.kind} peers cannot be mirror destinations yet`);
  return factory(peer, options);
}

export interface SourceOptions {
  /** The mirror that reads the source: names its connections on the server. */
  readonly mirror: string;
}

type SourceFactory<Kind extends PeerKind> = (
  config: Extract<Peer, { kind: Kind }>['config'],
  options: SourceOptions,
) => Source;

// null: the kind cannot be a mirror's source.
const sourceFactories = {
  analytics: null,
  datawarehouse: null,
  stream: null,
  relational: (config, { mirror }) => new PostgresSource(config, { mirror }),
} satisfies { [Kind in PeerKind]: SourceFactory<Kind> | null };

export function isSupportedSource(kind: PeerKind): boolean {
  return sourceFactories[kind] !== null;
}

export function createSource(peer: Pick<Peer, 'kind' | 'config'>, options: SourceOptions): Source {
  const factory = sourceFactories[peer.kind] as SourceFactory<typeof peer.kind> | null;
  if (!factory) throw new EngineError('config', `${peer.kind} peers cannot be mirror sources`);
  return factory(peer.config as never, options);
}

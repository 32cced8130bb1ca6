// What the routes work with. Both modes provide it: standalone from its embedded
// store and catalog, cluster mode from the Kubernetes API and the catalog database.
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type {
  BrowsedColumn,
  BrowsedTable,
  Catalog,
  NewMirrorSource,
  Peer,
  PeerCheckResult,
  RelationalConfig,
  ResourceStore,
  TableName,
} from '../../../engine/src/index.ts';
import type { AuthConfig } from './auth.ts';

/**
 * A PostgreSQL peer's catalog as the mirror form reads it (routes/source-browsing.ts;
 * engine/src/connectors/postgres/source/browse.ts), with the secrets the peer runs with.
 */
export interface SourceBrowser {
  schemas(peer: Peer & { kind: 'relational' }): Promise<string[]>;
  tables(peer: Peer & { kind: 'relational' }, schema: string): Promise<BrowsedTable[]>;
  columns(peer: Peer & { kind: 'relational' }, schema: string, table: string): Promise<BrowsedColumn[]>;
}

/** The source browser over the peer as given, or as `withSecrets` makes it (standalone's secret files). */
export function sourceBrowser(
  browse: {
    schemas(config: RelationalConfig): Promise<string[]>;
    tables(config: RelationalConfig, schema: string): Promise<BrowsedTable[]>;
    columns(config: RelationalConfig, schema: string, table: string): Promise<BrowsedColumn[]>;
  },
  withSecrets: (peer: Peer) => Peer = (peer) => peer,
): SourceBrowser {
  const configOf = (peer: Peer & { kind: 'relational' }): RelationalConfig =>
    (withSecrets(peer) as Peer & { kind: 'relational' }).config;
  return {
    schemas: (peer) => browse.schemas(configOf(peer)),
    tables: (peer, schema) => browse.tables(configOf(peer), schema),
    columns: (peer, schema, table) => browse.columns(configOf(peer), schema, table),
  };
}

export interface FacadeContext {
  readonly store: ResourceStore;
  readonly catalog: Catalog;
  readonly checkPeer: (peer: Peer) => Promise<PeerCheckResult>;
  readonly findMissingTables: (
    source: RelationalConfig,
    tables: readonly TableName[],
  ) => Promise<TableName[]>;
  /** What the source says against a new mirror (engine/src/connectors/postgres/source/inspect.ts); [] when nothing. */
  readonly checkMirrorSource: (source: RelationalConfig, mirror: NewMirrorSource) => Promise<string[]>;
  /** The source browsing additions' reads; by default the peer's configuration as stored. */
  readonly browseSource?: SourceBrowser;
  /** Off in a hosted variant: scripts and mirrors with scripts are refused. */
  readonly scriptsEnabled: boolean;
  readonly auth: AuthConfig;
  readonly logger: Logger;
  /** Largest request body accepted, in bytes. */
  readonly bodyLimitBytes?: number;
  /** Served on /metrics beside the per-mirror gauges: standalone mode's in-process engines. */
  readonly engineMetrics?: Registry;
}

// What the routes work with. Both modes provide it: standalone from its embedded
// store and catalog, cluster mode from the Kubernetes API and the catalog database.
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type {
  Catalog,
  NewMirrorSource,
  Peer,
  PeerCheckResult,
  RelationalConfig,
  ResourceStore,
  TableName,
} from '../../../engine/src/index.ts';
import type { AuthConfig } from './auth.ts';

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
  /** Off in a hosted variant: scripts and mirrors with scripts are refused. */
  readonly scriptsEnabled: boolean;
  readonly auth: AuthConfig;
  readonly logger: Logger;
  /** Largest request body accepted, in bytes. */
  readonly bodyLimitBytes?: number;
  /** Served on /metrics beside the per-mirror gauges: standalone mode's in-process engines. */
  readonly engineMetrics?: Registry;
}

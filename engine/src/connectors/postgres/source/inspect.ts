import type { TableName } from '../../../resources/mirror.ts';
import type { PeerKind, RelationalConfig } from '../../../resources/peer.ts';
import { connectPostgres } from '../driver/connect.ts';
import { readTableInfo } from './table-info.ts';
import { checkNewMirrorSource } from './validate-source.ts';

/** The tables among `tables` that the source does not have (or the user cannot see). */
export async function findMissingTables(
  config: RelationalConfig,
  tables: readonly TableName[],
): Promise<TableName[]> {
  const connection = await connectPostgres(config, {
    applicationName: 'tributary:inspect',
    connectTimeoutMs: 10_000,
  });
  try {
    const missing: TableName[] = [];
    for (const table of tables) if (!(await readTableInfo(connection.client, table))) missing.push(table);
    return missing;
  } finally {
    await connection.close();
  }
}

/**
 * What a table without a key (REPLICA IDENTITY FULL) means per destination:
 * a stream of change events carries whole old rows and takes it; a table that
 * is upserted by key (PostgreSQL, ClickHouse's ReplacingMergeTree) cannot.
 */
export const keylessTablesAllowedByDestination = {
  relational: false,
  analytics: false,
  datawarehouse: false,
  stream: true,
} as const satisfies Record<PeerKind, boolean>;

export interface NewMirrorSource {
  readonly name: string;
  readonly tables: readonly TableName[];
  /** A user-given publication, which must exist and hold every table. */
  readonly publicationName?: string | undefined;
  /** The slot the mirror will use (given, or the installation's default). */
  readonly slotName: string;
  /** Without a user-given publication: the default-named one the mirror will create. */
  readonly defaultPublicationName: string;
  /** An existing slot (and default-named publication) is then the mirror's to use. */
  readonly adoptExistingSlot: boolean;
  /** The mirror asks for a failover slot (PostgreSQL 17+). */
  readonly failoverSlot?: boolean | undefined;
  readonly destinationKind: PeerKind;
  /** Row filters by source table (`schema.table`). */
  readonly rowFilters?: ReadonlyMap<string, string> | undefined;
}

/**
 * The problems a mirror about to be created would meet at the source, each
 * naming the table or setting and the fix; empty when there are none. Throws
 * (an EngineError) when the source cannot be reached.
 */
export async function checkMirrorSource(
  config: RelationalConfig,
  mirror: NewMirrorSource,
): Promise<string[]> {
  const connection = await connectPostgres(config, {
    applicationName: 'tributary:inspect',
    connectTimeoutMs: 10_000,
  });
  try {
    return await checkNewMirrorSource(connection.client, {
      tables: mirror.tables,
      publicationName: mirror.publicationName,
      slotName: mirror.slotName,
      defaultPublicationName:
        mirror.publicationName === undefined ? mirror.defaultPublicationName : undefined,
      adoptExistingSlot: mirror.adoptExistingSlot,
      failoverSlot: mirror.failoverSlot,
      keylessTablesAllowed: keylessTablesAllowedByDestination[mirror.destinationKind],
      rowFilters: mirror.rowFilters,
    });
  } finally {
    await connection.close();
  }
}

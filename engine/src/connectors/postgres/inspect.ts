import type { TableName } from '../../resources/mirror.ts';
import type { RelationalConfig } from '../../resources/peer.ts';
import { connectPostgres } from './connect.ts';
import { readTableInfo } from './table-info.ts';

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

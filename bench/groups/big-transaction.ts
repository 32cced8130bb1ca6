// One transaction of BENCH_BIG_ROWS inserts, PostgreSQL → PostgreSQL: how fast
// Tributary applies it once committed (from the start of CDC to the marker row
// committed after it being visible).
import { benchConfig } from '../lib/config.ts';
import { loadAverage } from '../lib/machine.ts';
import { sourceDatabase, targetDatabase, uniqueName } from '../lib/servers.ts';
import { summarize } from '../lib/stats.ts';
import { type Catalog, cdcUntil, destinationTables, mappings, mirrorSpec } from '../lib/tributary.ts';
import {
  expectSame,
  fingerprint,
  insertInOneTransaction,
  markerColumns,
  tableColumns,
} from '../lib/workload.ts';
import { postgresDestination } from './pg.ts';

export async function runBigTransactionGroup(catalog: Catalog): Promise<Record<string, unknown>> {
  const rows = benchConfig.bigTransactionRows;
  const runs: number[] = [];
  for (let round = 0; round < benchConfig.rounds; round++) {
    const source = await sourceDatabase('bench_big_src');
    const target = await targetDatabase('bench_big_dst');
    const destination = postgresDestination(target, 'bench-big-transaction');
    try {
      await source.client.query(`CREATE TABLE big (${tableColumns})`);
      await source.client.query(`CREATE TABLE big_marker (${markerColumns})`);
      await source.client.query('CREATE PUBLICATION big_pub FOR TABLE big, big_marker');
      const moves = [
        { sourceTable: 'big', destinationTable: 'big' },
        { sourceTable: 'big_marker', destinationTable: 'big_marker' },
      ];
      const tables = await destinationTables(source, moves);
      await destination.setupTables(tables);
      const slotName = uniqueName('bench_big');
      await source.client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slotName]);
      await insertInOneTransaction(source.client, 'big', rows);
      await source.client.query('INSERT INTO big_marker (id) VALUES (1)');
      const spec = mirrorSpec({
        name: uniqueName('bench-big').replace(/_/g, '-'),
        tableMappings: mappings(moves),
        doInitialSnapshot: false,
        idleTimeoutSeconds: 1,
      });
      const seconds = await cdcUntil(
        source,
        catalog,
        destination,
        spec,
        { slotName, publicationName: 'big_pub', tables },
        async () => (await target.client.query('SELECT 1 FROM big_marker WHERE id = 1')).rowCount === 1,
      );
      expectSame(
        'big transaction',
        await fingerprint(source.client, 'big'),
        await fingerprint(target.client, 'big'),
      );
      runs.push(rows / seconds);
      console.log(
        `  big transaction round ${round + 1}: ${Math.round(rows / seconds)} rows/s (${seconds.toFixed(1)} s)`,
      );
    } finally {
      await destination.close();
      await source.drop();
      await target.drop();
    }
  }
  return {
    big_transaction_rows_per_s: { rows, tributary: summarize(runs), loadAverage: loadAverage() },
  };
}

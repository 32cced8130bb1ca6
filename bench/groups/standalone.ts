// The standalone process's resident memory (`tributary standalone`, fresh
// data directory): idle after start-up, and its peak through start-up, a
// PG → PG mirror's initial load of BENCH_ROWS rows and the CDC of BENCH_ROWS
// more inserts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestDatabase } from '../../test/support/databases.ts';
import {
  createRelationalPeers,
  createTableMirror,
  startStandalone,
} from '../../test/support/standalone-process.ts';
import { benchConfig } from '../lib/config.ts';
import { loadAverage } from '../lib/machine.ts';
import { peakRssMiB, rssMiB } from '../lib/process-memory.ts';
import { sourceDatabase, targetDatabase } from '../lib/servers.ts';
import { until } from '../lib/stats.ts';
import { insertRows, tableColumns } from '../lib/workload.ts';

const settleMs = 15_000;

async function count(database: TestDatabase, table: string): Promise<number> {
  const found = await database.client.query<{ n: number }>(`SELECT to_regclass($1) IS NOT NULL AS n`, [
    table,
  ]);
  if (!found.rows[0]?.n) return 0;
  const result = await database.client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  return result.rows[0]?.n ?? 0;
}

export async function runStandaloneGroup(): Promise<Record<string, unknown>> {
  const { rows } = benchConfig;
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-standalone-'));
  const source = await sourceDatabase('bench_sa_src');
  const target = await targetDatabase('bench_sa_dst');
  const service = await startStandalone(dataDir, 'bench-standalone-password');
  try {
    const pid = service.child.pid as number;
    const startupPeak = peakRssMiB(pid);
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    const idle = rssMiB(pid);
    await source.client.query(`CREATE TABLE sa (${tableColumns})`);
    await insertRows(source.client, 'sa', rows);
    await createRelationalPeers(service, [
      ['bench_source', source],
      ['bench_target', target],
    ]);
    const loadStarted = performance.now();
    const created = await createTableMirror(service, {
      name: 'bench_standalone',
      sourcePeer: 'bench_source',
      destinationPeer: 'bench_target',
      table: 'public.sa',
    });
    if (created.status !== 200)
      throw new Error(`mirror create: ${created.status} ${JSON.stringify(created.body)}`);
    await until(
      'standalone initial load',
      async () => (await count(target, 'public.sa')) === rows,
      30 * 60_000,
      500,
    );
    const loadSeconds = (performance.now() - loadStarted) / 1000;
    // From the first insert: the mirror streams while the rows are written.
    const cdcStarted = performance.now();
    await insertRows(source.client, 'sa', rows, rows + 1);
    await until(
      'standalone cdc',
      async () => (await count(target, 'public.sa')) === 2 * rows,
      30 * 60_000,
      500,
    );
    const cdcSeconds = (performance.now() - cdcStarted) / 1000;
    const peak = peakRssMiB(pid);
    const result = {
      standalone_idle_rss_mib: {
        value: idle,
        settledForSeconds: settleMs / 1000,
        loadAverage: loadAverage(),
      },
      standalone_peak_rss_mib: {
        value: peak,
        startUpPeak: startupPeak,
        during: `start-up, initial load of ${rows} rows and CDC of ${rows} inserts (PG → PG)`,
        loadAverage: loadAverage(),
      },
      // What the memory settings cost in speed (polled every 0.5 s: coarse).
      standalone_load_rows_per_s: Math.round(rows / loadSeconds),
      standalone_cdc_rows_per_s: Math.round(rows / cdcSeconds),
    };
    console.log(
      `standalone RSS: idle ${idle} MiB, peak ${peak} MiB (start-up peak ${startupPeak} MiB); initial load ${result.standalone_load_rows_per_s} rows/s, CDC ${result.standalone_cdc_rows_per_s} rows/s`,
    );
    return result;
  } finally {
    await service.stop();
    rmSync(dataDir, { recursive: true, force: true });
    await source.drop();
    await target.drop();
  }
}

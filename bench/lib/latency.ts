// Commit-to-visible latency: rows written at a fixed rate in ten commits a
// second, then the spread of (time visible at the destination − insert time).
import type pg from 'pg';
import type { TestDatabase } from '../../test/support/databases.ts';
import { benchConfig } from './config.ts';
import { alternate } from './stats.ts';
import { insertRows, tableColumns } from './workload.ts';

const commitsPerSecond = 10;

/** Writes BENCH_RATE rows/s for BENCH_LATENCY_SECONDS; returns the number written. */
export async function writeAtRate(client: pg.ClientBase, table: string): Promise<number> {
  const perCommit = Math.max(1, Math.round(benchConfig.latencyRate / commitsPerSecond));
  const commits = benchConfig.latencySeconds * commitsPerSecond;
  const started = Date.now();
  for (let commit = 0; commit < commits; commit++) {
    await insertRows(client, table, perCommit, commit * perCommit + 1);
    const wait = started + ((commit + 1) * 1000) / commitsPerSecond - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
  return commits * perCommit;
}

export interface Percentiles {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export function percentiles(latenciesMs: readonly number[]): Percentiles {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  const at = (fraction: number) =>
    Math.round(sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? Number.NaN);
  return { p50: at(0.5), p99: at(0.99), max: Math.round(sorted.at(-1) ?? Number.NaN) };
}

/** `_synced_at` is the writing transaction's start at the destination; `created` the row's insert time. */
export async function destinationLatencies(client: pg.ClientBase, table: string): Promise<Percentiles> {
  const result = await client.query<{ ms: number }>(
    `SELECT extract(epoch FROM _synced_at - created)::float8 * 1000 AS ms FROM ${table}`,
  );
  return percentiles(result.rows.map((row) => row.ms));
}

/**
 * BENCH_ROUNDS rounds of one latency run per system, the systems alternating,
 * each run on a fresh table of `source` with a publication of its own (named
 * `<prefix>_<system>_<round>` and `…_pub`). Returns each system's runs.
 */
export async function latencyRounds<System extends string>(
  label: string,
  source: TestDatabase,
  prefix: string,
  systems: readonly System[],
  run: (system: System, table: string, publication: string) => Promise<Percentiles>,
): Promise<Record<System, Percentiles[]>> {
  const runs = Object.fromEntries(systems.map((system) => [system, [] as Percentiles[]])) as Record<
    System,
    Percentiles[]
  >;
  for (let round = 0; round < benchConfig.rounds; round++) {
    for (const system of alternate(systems, round)) {
      const table = `${prefix}_${system}_${round}`;
      const publication = `${table}_pub`;
      await source.client.query(`CREATE TABLE ${table} (${tableColumns})`);
      await source.client.query(`CREATE PUBLICATION ${publication} FOR TABLE ${table}`);
      const result = await run(system, table, publication);
      runs[system].push(result);
      console.log(`  ${label} round ${round + 1} ${system}: ${JSON.stringify(result)} ms`);
    }
  }
  return runs;
}

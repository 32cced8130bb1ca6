// PostgreSQL to Snowflake throughput on the EMULATOR (fakesnow, DuckDB in one
// Python process behind an adapter): `node bench/snowflake.ts`, run by `make
// bench` after bench/run.ts. Emulator figures say how the connector's path
// (PUT, COPY, set-based SQL) scales with batch size on this machine; they are
// not Snowflake's speed, which depends on the warehouse. Not a test: prints,
// asserts nothing.
//
//   snapshot  rows/s of a mirror's partitioned initial load of BENCH_SNOWFLAKE_ROWS
//             rows into an emptied target (4 partitions, 4 workers)
//   cdc       rows/s from the first insert of BENCH_SNOWFLAKE_ROWS rows (transactions
//             of 10,000) until all are in the target, idle timeout 1 s
//
// BENCH_SNOWFLAKE_ROWS defaults to 50,000; BENCH_SNOWFLAKE_ROUNDS to 3 (medians
// and spread are printed). Uses the emulator of the test environment, or
// TRIBUTARY_TEST_SNOWFLAKE_URL.
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { SnowflakeDestination } from '../engine/src/connectors/snowflake/destination.ts';
import { randomSuffix, waitFor } from '../test/support/databases.ts';
import { createHarness, type SpecInput, startMirror } from '../test/support/mirror-harness.ts';
import { emulatorConfig, SnowflakeAdmin, uniqueName } from '../test/support/snowflake-peer.ts';

const rowCount = Number(process.env.BENCH_SNOWFLAKE_ROWS ?? 50_000);
const rounds = Number(process.env.BENCH_SNOWFLAKE_ROUNDS ?? 3);
const logger = pino({ level: 'warn' });

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

async function main(): Promise<void> {
  const config = emulatorConfig(uniqueName('BENCH'));
  const harness = await createHarness('bench_sf');
  const admin = new SnowflakeAdmin(config);
  const snapshotRates: number[] = [];
  const cdcRates: number[] = [];
  try {
    for (let round = 1; round <= rounds; round++) {
      const table = `ledger_${round}`;
      await harness.source.client.query(
        `CREATE TABLE ${table} (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(14,2), note text, at timestamptz)`,
      );
      await harness.source.client.query(
        `INSERT INTO ${table} SELECT g, g % 50, g * 0.01, 'seed ' || g, now() FROM generate_series(1, ${rowCount}) g`,
      );
      await harness.source.client.query(`ANALYZE ${table}`);
      const spec: SpecInput = {
        name: `bench-sf-${randomSuffix()}`,
        tableMappings: [
          { source: { schema: 'public', table }, destination: { schema: 'bench', table }, exclude: [] },
        ],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        maxBatchSize: 100_000,
        snapshotNumRowsPerPartition: Math.ceil(rowCount / 4),
        snapshotMaxParallelWorkers: 4,
      };
      const count = async () => {
        try {
          const [row] = await admin.rows(
            `SELECT COUNT(*) AS "N" FROM "${config.database}"."BENCH"."${table.toUpperCase()}"`,
          );
          return Number(row?.N ?? 0);
        } catch {
          return 0;
        }
      };
      const started = performance.now();
      const mirror = startMirror(harness, spec, {
        wrapDestination: () =>
          new SnowflakeDestination(config, { mirror: spec.name, mirrorColumns: {}, logger }),
      });
      await waitFor(async () => (await count()) >= rowCount, 600_000, 'snapshot loaded');
      snapshotRates.push(rowCount / ((performance.now() - started) / 1000));
      await waitFor(
        async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
        60_000,
        'running',
      );
      const cdcStarted = performance.now();
      for (let first = rowCount + 1; first <= 2 * rowCount; first += 10_000) {
        const last = Math.min(first + 9_999, 2 * rowCount);
        await harness.source.client.query(
          `INSERT INTO ${table} SELECT g, g % 50, g * 0.01, 'cdc ' || g, now() FROM generate_series(${first}, ${last}) g`,
        );
      }
      await waitFor(async () => (await count()) >= 2 * rowCount, 600_000, 'changes applied');
      cdcRates.push(rowCount / ((performance.now() - cdcStarted) / 1000));
      await mirror.stop();
      console.log(
        `round ${round}: snapshot ${Math.round(snapshotRates.at(-1) ?? 0)} rows/s, cdc ${Math.round(cdcRates.at(-1) ?? 0)} rows/s, load average ${loadavg()
          .map((load) => load.toFixed(2))
          .join(' ')}`,
      );
    }
    const show = (name: string, rates: readonly number[]) =>
      console.log(
        `${name}: median ${Math.round(median(rates))} rows/s (spread ${Math.round(Math.min(...rates))}–${Math.round(Math.max(...rates))}), ${rowCount} rows, ${rounds} rounds, EMULATOR (fakesnow)`,
      );
    show('PG → Snowflake emulator snapshot', snapshotRates);
    show('PG → Snowflake emulator CDC', cdcRates);
  } finally {
    await admin.close();
    await harness.close();
  }
}

await main();

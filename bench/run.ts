// `make bench`: Tributary end to end against what a user would pick instead,
// on this machine, in the same run, systems alternating round by round
// (docs/benchmarks.md). Every run's destination is checked against the source.
//
//   pg-snapshot     PG → PG snapshot vs `COPY | COPY` and logical replication
//   pg-cdc          PG → PG CDC inserts/updates/deletes vs logical replication
//   pg-latency      PG → PG commit-to-visible p50/p99 vs logical replication
//   clickhouse      PG → ClickHouse snapshot and CDC vs `COPY → INSERT … FORMAT CSV`
//   kafka           PG → Kafka snapshot and CDC vs Debezium Server
//   kafka-latency   PG → Kafka commit-to-append p50/p99 vs Debezium Server
//   big-transaction one transaction of BENCH_BIG_ROWS inserts, PG → PG
//   standalone      the standalone process's resident memory
//   diagnostic      the engine into a discarding destination (no destination server)
//   table-lifecycle the other tables' commit-to-visible p50/p99 while a table is
//                   added and resynced, through `tributary standalone`
//
// Settings: bench/lib/config.ts. Results: bench/results/<date>.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../test/support/testenv.ts';
import { benchConfig, type Group, PartialGroupFailure } from './lib/config.ts';
import { sweepLeftovers } from './lib/leftovers.ts';
import { loadAverage, machine } from './lib/machine.ts';
import { sourceServer, startTargetServer, targetServer } from './lib/servers.ts';
import { Catalog } from './lib/tributary.ts';

type GroupRun = (catalog: Catalog) => Promise<Record<string, unknown>>;

const groupRuns: Record<Group, () => Promise<GroupRun>> = {
  'pg-snapshot': async () => (await import('./groups/pg.ts')).runPostgresSnapshotGroup,
  'pg-cdc': async () => (await import('./groups/pg.ts')).runPostgresCdcGroup,
  'pg-latency': async () => (await import('./groups/pg-latency.ts')).runPostgresLatencyGroup,
  clickhouse: async () => (await import('./groups/clickhouse.ts')).runClickHouseGroup,
  kafka: async () => (await import('./groups/kafka.ts')).runKafkaGroup,
  'kafka-latency': async () => (await import('./groups/kafka-latency.ts')).runKafkaLatencyGroup,
  'big-transaction': async () => (await import('./groups/big-transaction.ts')).runBigTransactionGroup,
  standalone: async () => (await import('./groups/standalone.ts')).runStandaloneGroup,
  diagnostic: async () => (await import('./groups/diagnostic.ts')).runDiagnosticGroup,
  'table-lifecycle': async () => (await import('./groups/table-lifecycle.ts')).runTableLifecycleGroup,
};

async function main(): Promise<void> {
  const started = new Date();
  const results: Record<string, unknown> = {
    date: started.toISOString(),
    machine: machine(),
    settings: {
      rows: benchConfig.rows,
      rounds: benchConfig.rounds,
      bigTransactionRows: benchConfig.bigTransactionRows,
      latencySeconds: benchConfig.latencySeconds,
      latencyRate: benchConfig.latencyRate,
      lifecycleRows: benchConfig.lifecycleRows,
      lifecycleDestinations: benchConfig.lifecycleDestinations,
      groups: [...benchConfig.only],
    },
    load_average: { atStart: loadAverage() },
  };
  const failures: Record<string, string> = {};
  const directory = join(repoRoot, 'bench', 'results');
  mkdirSync(directory, { recursive: true });
  const file = join(
    directory,
    `${started.toISOString().slice(0, 10)}${process.env.BENCH_RESULTS_SUFFIX ?? ''}.json`,
  );
  // Written after every group, so a long run stopped part-way keeps what it measured.
  const save = () => {
    results.load_average = {
      ...(results.load_average as object),
      atEnd: loadAverage(),
      uptime: machine().uptime,
    };
    results.failures = failures;
    writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  };
  console.log(`bench: ${JSON.stringify(results.settings)}; ${machine().uptime}`);
  startTargetServer();
  // The target first: a leftover subscription's worker keeps its source database in use.
  for (const [role, server] of [
    ['target', targetServer],
    ['source', sourceServer],
  ] as const) {
    const swept = await sweepLeftovers(server);
    if (swept.databases.length > 0) {
      console.log(
        `bench: dropped what stopped runs left on the ${role} server: ${swept.databases.length} database(s) (${swept.databases.join(', ')}), ${swept.subscriptions} subscription(s)`,
      );
    }
  }
  const catalog = await Catalog.create();
  try {
    for (const group of benchConfig.only) {
      console.log(`== ${group} (${machine().uptime})`);
      try {
        Object.assign(results, await (await groupRuns[group]())(catalog));
      } catch (error) {
        // A group that cannot run (a missing program, a failed check) is
        // reported as such; the others still run.
        if (error instanceof PartialGroupFailure) Object.assign(results, error.figures);
        failures[group] = error instanceof Error ? (error.stack ?? error.message) : String(error);
        console.error(`${group} failed: ${failures[group]}`);
      }
      save();
    }
  } finally {
    await catalog.close();
  }
  console.log(`results written to ${file}`);
  if (Object.keys(failures).length > 0) process.exitCode = 1;
}

await main();

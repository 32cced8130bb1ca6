import { defineConfig } from 'vitest/config';

// Every project: the run's processes are marked, and what a test left running
// is reported and stopped after the run (test/support/global-setup.ts).
const globalSetup = ['test/support/global-setup.ts'];
// Every project: rows compare by their cells (test/support/row-equality.ts).
const setupFiles = ['test/support/row-equality.ts'];

// The PostgreSQL source suites again on other majors (scripts/testenv/postgres-versions.sh):
// the oldest supported, one between, the newest release, with destinations on
// the newest (on the oldest for 16), as test/support/testenv.ts `sourcePostgres`
// says. The crash-and-restart, create-check, huge-transaction, online-load and
// schema-change suites run on the oldest and newest only, and the failover test needs 17+: together about
// 4 minutes of the suite's time on two cores.
const sourceSuites = [
  'test/e2e/pg-to-pg.test.ts',
  'test/e2e/pg-source.test.ts',
  'test/e2e/slot-loss.test.ts',
  'test/e2e/ownership.test.ts',
  'test/e2e/postgres-versions.test.ts',
  'test/e2e/slot-health.test.ts',
  'test/integration/slot-health.test.ts',
  'test/integration/transaction-visibility.test.ts',
  'test/integration/partition-leaves.test.ts',
];
const oldestAndNewestSuites = [
  'test/e2e/source-restart.test.ts',
  'test/e2e/create-checks.test.ts',
  'test/e2e/big-transaction.test.ts',
  'test/e2e/partitioned-tables.test.ts',
  'test/e2e/idle-slot.test.ts',
  'test/e2e/online-backfill.test.ts',
  'test/e2e/schema-changes.test.ts',
  'test/e2e/schema-changes-restarts.test.ts',
  'test/e2e/row-filters.test.ts',
];
const postgresVersionProjects = (
  [
    [13, [...sourceSuites, ...oldestAndNewestSuites]],
    [16, sourceSuites],
    [18, [...sourceSuites, ...oldestAndNewestSuites, 'test/e2e/failover-slot.test.ts']],
  ] as const
).map(([major, include]) => ({
  test: {
    name: `postgres-${major}`,
    include: [...include],
    environment: 'node',
    globalSetup,
    setupFiles,
    env: { TRIBUTARY_TEST_SOURCE_POSTGRES: String(major) },
    testTimeout: 120_000,
    hookTimeout: 180_000,
    maxWorkers: 3,
  },
}));

export default defineConfig({
  test: {
    // Bounds vitest's own close once the run ended (its exit path, with the
    // hanging-process reporter naming what stayed open); scripts/test-watchdog.ts
    // bounds the rest.
    teardownTimeout: 30_000,
    // Most integration time is spent waiting on servers (replication, a
    // kubelet, Kafka), not on CPU: three files at once on two cores finish the
    // suite sooner without starving any one of them (docs/testing.md, Durations).
    maxWorkers: 3,
    projects: [
      {
        test: {
          name: 'unit',
          include: ['{engine,operator,api-server,scripts}/**/*.test.ts'],
          environment: 'node',
          globalSetup,
          setupFiles,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          environment: 'node',
          globalSetup,
          setupFiles,
          // Real servers on a 2-core machine: generous limits, few files at once.
          testTimeout: 120_000,
          hookTimeout: 180_000,
          maxWorkers: 3,
        },
      },
      {
        // The facade's endpoint tests again, over custom resources and a real
        // kube-apiserver: both modes must answer alike (test/support/facade.ts).
        test: {
          name: 'api-cluster',
          include: ['test/api/**/*.test.ts'],
          environment: 'node',
          globalSetup,
          setupFiles,
          env: { TRIBUTARY_FACADE_MODE: 'cluster' },
          testTimeout: 120_000,
          hookTimeout: 180_000,
          maxWorkers: 3,
        },
      },
      ...postgresVersionProjects,
    ],
  },
});

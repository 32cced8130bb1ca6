import { defineConfig } from 'vitest/config';

// Every project: the run's processes are marked, and what a test left running
// is reported and stopped after the run (test/support/global-setup.ts).
const globalSetup = ['test/support/global-setup.ts'];

export default defineConfig({
  test: {
    // Bounds vitest's own close once the run ended (its exit path, with the
    // hanging-process reporter naming what stayed open); scripts/test-watchdog.ts
    // bounds the rest.
    teardownTimeout: 30_000,
    projects: [
      {
        test: {
          name: 'unit',
          include: ['{engine,operator,api-server,scripts}/**/*.test.ts'],
          environment: 'node',
          globalSetup,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          environment: 'node',
          globalSetup,
          // Real servers on a 2-core machine: generous limits, few files at once.
          testTimeout: 120_000,
          hookTimeout: 180_000,
          maxWorkers: 2,
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
          env: { TRIBUTARY_FACADE_MODE: 'cluster' },
          testTimeout: 120_000,
          hookTimeout: 180_000,
          maxWorkers: 2,
        },
      },
    ],
  },
});

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['{engine,operator,api-server,scripts}/**/*.test.ts'],
          environment: 'node',
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          environment: 'node',
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
          env: { TRIBUTARY_FACADE_MODE: 'cluster' },
          testTimeout: 120_000,
          hookTimeout: 180_000,
          maxWorkers: 2,
        },
      },
    ],
  },
});

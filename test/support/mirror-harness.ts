// Runs engine pipelines in-process against the test databases.
import pg from 'pg';
import pino from 'pino';
import { PostgresCatalog } from '../../engine/src/catalog/postgres-catalog.ts';
import { PostgresDestination } from '../../engine/src/connectors/postgres/destination.ts';
import { defaultBatchMemoryBudgetBytes, type MirrorContext } from '../../engine/src/pipeline/context.ts';
import { type RunOutcome, runMirror, teardownMirror } from '../../engine/src/pipeline/run-mirror.ts';
import {
  type MirrorSpec,
  type MirrorSpecInput,
  mirrorSpecSchema,
} from '../../engine/src/resources/mirror.ts';
import { createTestDatabase, type TestDatabase } from './databases.ts';

export interface Harness {
  readonly source: TestDatabase;
  readonly destination: TestDatabase;
  readonly catalogDatabase: TestDatabase;
  readonly catalog: PostgresCatalog;
  close(): Promise<void>;
}

export async function createHarness(prefix: string): Promise<Harness> {
  const [source, destination, catalogDatabase] = await Promise.all([
    createTestDatabase(`${prefix}_src`),
    createTestDatabase(`${prefix}_dst`),
    createTestDatabase(`${prefix}_cat`),
  ]);
  const pool = new pg.Pool({ ...catalogDatabase.config, max: 4 });
  const catalog = new PostgresCatalog(pool);
  await catalog.migrate();
  return {
    source,
    destination,
    catalogDatabase,
    catalog,
    async close() {
      await pool.end();
      await Promise.all([source.drop(), destination.drop(), catalogDatabase.drop()]);
    },
  };
}

export type SpecInput = Omit<MirrorSpecInput, 'sourcePeer' | 'destinationPeer'>;

export interface RunningMirror {
  readonly spec: MirrorSpec;
  /** Asks the mirror to stop at a batch boundary and waits until it has. */
  stop(): Promise<RunOutcome>;
  readonly done: Promise<RunOutcome>;
}

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });

function contextFor(harness: Harness, spec: MirrorSpec, signal: AbortSignal, budget: number): MirrorContext {
  return {
    spec,
    source: harness.source.config,
    destination: new PostgresDestination(harness.destination.config, {
      system: spec.system,
      mirrorColumns: { softDeleteColumn: spec.softDeleteColName, syncedAtColumn: spec.syncedAtColName },
      applicationName: `tributary:${spec.name}:destination`,
      logger,
    }),
    catalog: harness.catalog,
    logger,
    signal,
    batchMemoryBudgetBytes: budget,
  };
}

export function startMirror(
  harness: Harness,
  input: SpecInput,
  options: { batchMemoryBudgetBytes?: number } = {},
): RunningMirror {
  const spec = mirrorSpecSchema.parse({ ...input, sourcePeer: 'source', destinationPeer: 'destination' });
  const controller = new AbortController();
  const context = contextFor(
    harness,
    spec,
    controller.signal,
    options.batchMemoryBudgetBytes ?? defaultBatchMemoryBudgetBytes,
  );
  const done = runMirror(context).finally(() => context.destination.close());
  // Failures surface through `done`/`stop`; this keeps an unobserved one from crashing the runner.
  done.catch(() => {});
  return {
    spec,
    done,
    async stop() {
      controller.abort();
      return done;
    },
  };
}

export async function dropMirror(harness: Harness, input: SpecInput): Promise<void> {
  const spec = mirrorSpecSchema.parse({ ...input, sourcePeer: 'source', destinationPeer: 'destination' });
  const context = contextFor(harness, spec, new AbortController().signal, defaultBatchMemoryBudgetBytes);
  try {
    await teardownMirror(context);
  } finally {
    await context.destination.close();
  }
}

// Runs engine pipelines in-process against the test databases.
import pino from 'pino';
import { expect } from 'vitest';
import { PostgresCatalog } from '../../engine/src/catalog/postgres-catalog.ts';
import type { Destination } from '../../engine/src/connectors/destination.ts';
import { PostgresDestination } from '../../engine/src/connectors/postgres/destination/destination.ts';
import { createSource } from '../../engine/src/connectors/registry.ts';
import type { PipelineMetrics } from '../../engine/src/observability/engine-metrics.ts';
import { defaultBatchMemoryBudgetBytes, type MirrorContext } from '../../engine/src/pipeline/context.ts';
import { type RunOutcome, runMirror, teardownMirror } from '../../engine/src/pipeline/run-mirror.ts';
import { superviseMirror } from '../../engine/src/pipeline/supervisor.ts';
import {
  type MirrorSpec,
  type MirrorSpecInput,
  mirrorSpecSchema,
} from '../../engine/src/resources/mirror.ts';
import type { RelationalConfig } from '../../engine/src/resources/peer.ts';
import {
  createTestDatabase,
  droppablePool,
  type TestDatabase,
  tableCells,
  tableRows,
  waitFor,
} from './databases.ts';
import { destinationPostgres, sourcePostgres } from './testenv.ts';

export interface Harness {
  readonly source: TestDatabase;
  readonly destination: TestDatabase;
  readonly catalogDatabase: TestDatabase;
  readonly catalog: PostgresCatalog;
  close(): Promise<void>;
}

/**
 * Source and destination databases on the servers the run selects
 * (`sourcePostgres`, `destinationPostgres` in testenv.ts), the catalog on the
 * shared server.
 */
export async function createHarness(prefix: string): Promise<Harness> {
  const [source, destination, catalogDatabase] = await Promise.all([
    createTestDatabase(`${prefix}_src`, sourcePostgres),
    createTestDatabase(`${prefix}_dst`, destinationPostgres),
    createTestDatabase(`${prefix}_cat`),
  ]);
  // close() drops the catalog database WITH (FORCE), which terminates (57P01)
  // a connection a stopped mirror's last catalog write may still hold, or one
  // still closing after pool.end(); that termination is the point, not a failure.
  const pool = droppablePool({ ...catalogDatabase.config, max: 4 });
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

function contextFor(
  harness: Harness,
  spec: MirrorSpec,
  signal: AbortSignal,
  budget: number,
  destinationConfig: RelationalConfig = harness.destination.config,
  sourceConfig: RelationalConfig = harness.source.config,
): MirrorContext {
  return {
    spec,
    source: createSource({ kind: 'relational', config: sourceConfig }, { mirror: spec.name }),
    destination: new PostgresDestination(destinationConfig, {
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

export interface StartOptions {
  readonly batchMemoryBudgetBytes?: number;
  /** Replaces the source connection settings (e.g. to go through SSH). */
  readonly source?: RelationalConfig;
  /** Wraps the real destination, e.g. to inject faults. */
  readonly wrapDestination?: (destination: Destination) => Destination;
  /** Runs under the supervisor (retries with this backoff) instead of once. */
  readonly supervisedBackoffMs?: number;
  /** Runs under the supervisor with its default retry policy. */
  readonly supervised?: boolean;
  /** Replaces the destination connection settings (e.g. a private server or another user). */
  readonly destination?: RelationalConfig;
  /** The stall bound (MirrorContext.stallAfterMs). */
  readonly stallAfterMs?: number;
  readonly metrics?: PipelineMetrics;
}

export function startMirror(harness: Harness, input: SpecInput, options: StartOptions = {}): RunningMirror {
  const spec = mirrorSpecSchema.parse({ ...input, sourcePeer: 'source', destinationPeer: 'destination' });
  const controller = new AbortController();
  const base = contextFor(
    harness,
    spec,
    controller.signal,
    options.batchMemoryBudgetBytes ?? defaultBatchMemoryBudgetBytes,
    options.destination,
    options.source,
  );
  const context: MirrorContext = {
    ...base,
    destination: options.wrapDestination ? options.wrapDestination(base.destination) : base.destination,
    ...(options.stallAfterMs === undefined ? {} : { stallAfterMs: options.stallAfterMs }),
    ...(options.metrics ? { metrics: options.metrics } : {}),
  };
  const run =
    options.supervisedBackoffMs === undefined && !options.supervised
      ? runMirror(context)
      : superviseMirror(
          context,
          options.supervisedBackoffMs === undefined
            ? {}
            : { initialBackoffMs: options.supervisedBackoffMs, maxBackoffMs: options.supervisedBackoffMs },
        ).then((outcome) => {
          if (outcome === 'failed') throw new Error('mirror failed');
          return outcome;
        });
  const done = run.finally(() => context.destination.close());
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

/** A mapping of `public.<table>` to the same name at the destination. */
export function mapping(table: string, exclude: string[] = []) {
  return { source: { schema: 'public', table }, destination: { schema: 'public', table }, exclude };
}

/**
 * Waits until the destination table equals the source table (all columns, or
 * the given select list), then asserts it cell by cell. On time-out the
 * assertion still runs, so its diff names the cells that differ.
 */
export async function expectSameRows(
  harness: Harness,
  table: string,
  options: { orderBy?: string; columns?: string; timeoutMs?: number } = {},
): Promise<void> {
  const orderBy = options.orderBy ?? 'id';
  const select = options.columns ? `(SELECT ${options.columns} FROM ${table})` : table;
  await waitFor(
    async () =>
      JSON.stringify(await tableRows(harness.source.client, select, orderBy)) ===
      JSON.stringify(await tableRows(harness.destination.client, select, orderBy)),
    options.timeoutMs ?? 30_000,
    `${table} to match`,
  ).catch(() => {});
  expect(await tableCells(harness.destination.client, select, orderBy)).toEqual(
    await tableCells(harness.source.client, select, orderBy),
  );
}

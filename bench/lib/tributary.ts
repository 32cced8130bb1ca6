// Tributary's side of a run: the engine's own pipeline steps (snapshot, CDC)
// in this process, into a real destination, as a mirror runs them.
import pg from 'pg';
import pino from 'pino';
import { PostgresCatalog } from '../../engine/src/catalog/postgres-catalog.ts';
import type { Destination } from '../../engine/src/connectors/destination.ts';
import { readTableInfo } from '../../engine/src/connectors/postgres/source/table-info.ts';
import type { DestinationTable } from '../../engine/src/connectors/records.ts';
import { createSource } from '../../engine/src/connectors/registry.ts';
import { runCdc } from '../../engine/src/pipeline/cdc.ts';
import { defaultBatchMemoryBudgetBytes, type MirrorContext } from '../../engine/src/pipeline/context.ts';
import { runSnapshot } from '../../engine/src/pipeline/snapshot.ts';
import { destinationTable } from '../../engine/src/pipeline/tables.ts';
import {
  type MirrorSpec,
  type MirrorSpecInput,
  mirrorSpecSchema,
  tableMappingSchema,
} from '../../engine/src/resources/mirror.ts';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { until } from './stats.ts';

export const logger = pino({ level: process.env.BENCH_LOG_LEVEL ?? 'warn' });

/** A catalog database of its own for the whole run. */
export class Catalog {
  readonly #database: TestDatabase;
  readonly #pool: pg.Pool;
  readonly catalog: PostgresCatalog;

  private constructor(database: TestDatabase) {
    this.#database = database;
    this.#pool = new pg.Pool({ ...database.config, max: 2 });
    this.catalog = new PostgresCatalog(this.#pool);
  }

  static async create(): Promise<Catalog> {
    const catalog = new Catalog(await createTestDatabase('bench_cat'));
    await catalog.catalog.migrate();
    return catalog;
  }

  async close(): Promise<void> {
    await this.#pool.end();
    await this.#database.drop();
  }
}

export interface TableMove {
  readonly sourceTable: string;
  /** The destination table, or the topic for Kafka. */
  readonly destinationTable: string;
}

export function mappings(moves: readonly TableMove[]) {
  return moves.map((move) => ({
    source: { schema: 'public', table: move.sourceTable },
    destination: { schema: 'public', table: move.destinationTable },
  }));
}

export async function destinationTables(
  source: TestDatabase,
  moves: readonly TableMove[],
): Promise<DestinationTable[]> {
  const tables: DestinationTable[] = [];
  for (const [index, move] of moves.entries()) {
    const info = await readTableInfo(source.client, { schema: 'public', table: move.sourceTable });
    if (!info) throw new Error(`${move.sourceTable} vanished`);
    tables.push(destinationTable(tableMappingSchema.parse(mappings(moves)[index]), info));
  }
  return tables;
}

export function mirrorSpec(input: Omit<MirrorSpecInput, 'sourcePeer' | 'destinationPeer'>): MirrorSpec {
  return mirrorSpecSchema.parse({ sourcePeer: 'source', destinationPeer: 'destination', ...input });
}

function context(
  source: TestDatabase,
  catalog: Catalog,
  destination: Destination,
  spec: MirrorSpec,
  signal: AbortSignal,
): MirrorContext {
  return {
    spec,
    source: createSource({ kind: 'relational', config: source.config }, { mirror: spec.name }),
    destination,
    catalog: catalog.catalog,
    logger,
    signal,
    batchMemoryBudgetBytes: defaultBatchMemoryBudgetBytes,
  };
}

/** The initial load of `tables` (already set up at the destination); returns seconds. */
export async function snapshot(
  source: TestDatabase,
  catalog: Catalog,
  destination: Destination,
  spec: MirrorSpec,
  tables: readonly DestinationTable[],
): Promise<number> {
  await catalog.catalog.transition(spec.name, 'setup');
  const started = performance.now();
  await runSnapshot(context(source, catalog, destination, spec, new AbortController().signal), tables, {
    name: null,
    consistentPoint: 0n,
  });
  return (performance.now() - started) / 1000;
}

/**
 * Runs CDC from `slotName` until `done` holds (polled every 50 ms), then stops
 * it; returns the seconds from its start to `done`. A mirror of the same name
 * resumes from its checkpoint.
 */
export async function cdcUntil(
  source: TestDatabase,
  catalog: Catalog,
  destination: Destination,
  spec: MirrorSpec,
  options: {
    readonly slotName: string;
    readonly publicationName: string;
    readonly tables: readonly DestinationTable[];
  },
  done: () => Promise<boolean>,
  timeoutMs = 30 * 60_000,
): Promise<number> {
  // A mirror resumed for a later phase is past setup already: its transition is refused, harmlessly.
  await catalog.catalog.transition(spec.name, 'setup').catch(() => {});
  const stop = new AbortController();
  const started = performance.now();
  let failed: unknown;
  const running = runCdc(context(source, catalog, destination, spec, stop.signal), {
    ...options,
    // The bench creates its publications itself.
    publicationCreatedByMirror: false,
  }).catch((error) => {
    failed = error;
  });
  try {
    await until(
      `${spec.name}: cdc`,
      async () => {
        if (failed) throw failed;
        return done();
      },
      timeoutMs,
    );
    return (performance.now() - started) / 1000;
  } finally {
    stop.abort();
    await running;
  }
}

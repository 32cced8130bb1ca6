// Mapped source tables that go away, and come back. PostgreSQL sends nothing
// when a published table is dropped or renamed: its changes just stop. So the
// mirror looks (one query, every lookEveryMs while streaming, and at each
// start): a mapped table gone from the source stops alone (`errored`,
// source_schema) once every change written before the look is durable at the
// destination, so its destination table holds all the source had; the other
// tables go on. A table stopped so that exists again (restored, or renamed
// back) rejoins by itself: its destination table is emptied and loaded again
// online while the others stream (docs/mirror-lifecycle.md, "A table's own
// fault").
import type { TableStatus } from '../catalog/catalog.ts';
import type { DestinationTable } from '../connectors/records.ts';
import type { Source } from '../connectors/source.ts';
import { EngineError } from '../errors.ts';
import { formatTableName, type TableMapping, type TableName } from '../resources/mirror.ts';
import type { MirrorContext } from './context.ts';
import { reloadErroredTable } from './table-resync.ts';

/** How often a streaming mirror looks for its source tables. */
export const lookEveryMs = 10_000;

/** The fault of a mapped table the source no longer has. */
export function missingSourceTable(sourceTable: string): EngineError {
  return new EngineError(
    'source_schema',
    `source table ${sourceTable} no longer exists (dropped or renamed); it loads again by itself once a table of that name is back`,
    { table: sourceTable },
  );
}

/** A mapped table whose source is gone, as far as stopping it needs (its names). */
export function mappedTableWithoutColumns(mapping: TableMapping): DestinationTable {
  return { source: mapping.source, destination: mapping.destination, columns: [], keyColumns: [] };
}

/** Whether a table was stopped because its source table was gone. */
export function stoppedForMissingSource(status: TableStatus | undefined): boolean {
  return status?.state === 'errored' && status.problem?.kind === 'source_schema';
}

/** At a start: each table stopped because its source was gone, and found again now, is loaded again. */
export async function rejoinRestoredTables(
  context: MirrorContext,
  found: readonly DestinationTable[],
  tracked: ReadonlyMap<string, TableStatus>,
): Promise<void> {
  for (const table of found) {
    if (!stoppedForMissingSource(tracked.get(formatTableName(table.source)))) continue;
    await reloadErroredTable(context, table, `source table ${formatTableName(table.source)} exists again`);
  }
}

/** What the stream loop is to do after a look. */
export type WatchOutcome =
  | { readonly kind: 'stop'; readonly error: EngineError }
  | { readonly kind: 'rejoin'; readonly sourceTable: string };

export class SourceTablesWatch {
  readonly #source: Source;
  readonly #streamed: readonly TableName[];
  readonly #gone: readonly TableName[];
  #lastLookMs = Number.NEGATIVE_INFINITY;
  /** Streamed tables found gone, and the WAL position every change of theirs was written before. */
  #found: { readonly table: string; readonly walLsn: bigint } | undefined;

  /**
   * `streamed`: the tables the stream applies; `gone`: tables stopped because
   * their source was gone, looked for to rejoin.
   */
  constructor(source: Source, streamed: readonly TableName[], gone: readonly TableName[]) {
    this.#source = source;
    this.#streamed = streamed;
    this.#gone = gone;
  }

  /**
   * Called by the stream loop as it goes: looks at most every lookEveryMs.
   * `durableLsn` is what the destination holds (the slot's acknowledged
   * position): a gone table stops once it has passed the look's position.
   */
  async check(nowMs: number, durableLsn: bigint): Promise<WatchOutcome | undefined> {
    if (this.#found && durableLsn >= this.#found.walLsn) {
      return { kind: 'stop', error: missingSourceTable(this.#found.table) };
    }
    if (nowMs - this.#lastLookMs < lookEveryMs) return undefined;
    this.#lastLookMs = nowMs;
    const tables = [...this.#streamed, ...this.#gone];
    if (tables.length === 0) return undefined;
    const { missing, walLsn } = await this.#source.missingTables(tables);
    const missingNames = new Set(missing.map(formatTableName));
    const back = this.#gone.find((table) => !missingNames.has(formatTableName(table)));
    if (back) return { kind: 'rejoin', sourceTable: formatTableName(back) };
    // Back before it stopped (renamed and renamed back): nothing to stop.
    if (this.#found && !missingNames.has(this.#found.table)) this.#found = undefined;
    const gone = this.#streamed.find((table) => missingNames.has(formatTableName(table)));
    if (gone && !this.#found) this.#found = { table: formatTableName(gone), walLsn };
    return undefined;
  }
}

// Writing rows into a ClickHouse target table: snapshot partitions, and a
// batch's changes to one table. A batch is applied by inserting rows only:
// its leading inserts each at the version of its change, then each key's
// final state of the later changes (coalesce.ts) at the version of the change
// that left it, deletes as rows flagged deleted, unchanged TOAST values taken
// from the destination's current row (docs/clickhouse.md).
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { EngineError } from '../../errors.ts';
import { type FinalState, finalStates, type TableFinalStates } from '../coalesce.ts';
import { copyTextLineBlocks } from '../copy-text.ts';
import { isUnchangedToast, type Row, type RowChangeImages } from '../records.ts';
import type { TupleDataRows } from '../tuple-rows.ts';
import { writeTextCell } from './column-encoder.ts';
import { RowBinaryReader, RowBinaryWriter } from './row-binary.ts';
import { rowVersion } from './row-version.ts';
import type { RowFlags } from './row-writer.ts';
import { isDeletedColumn, type TableWriter, versionColumn } from './schema.ts';
import { quoteIdentifier, sqlLiteral } from './sql.ts';
import type { ClickHouseTableChanges } from './table-changes.ts';
import type { ClickHouseTransport } from './transport.ts';
import type { ChType } from './types.ts';

/** Inserts are streamed to the server in chunks of about this size. */
const chunkBytes = 1 << 20;

function chunkWriter(): RowBinaryWriter {
  return new RowBinaryWriter(chunkBytes + (chunkBytes >> 2));
}

/**
 * Writes one snapshot partition (COPY text rows of the table's columns) as
 * RowBinary, from the lines' bytes (row-writer.ts); returns the row count.
 */
export async function writeSnapshotRows(
  transport: ClickHouseTransport,
  target: TableWriter,
  copyText: Readable,
): Promise<number> {
  let rowCount = 0;
  await transport.insert(
    target.insertSql,
    async function* () {
      const writer = chunkWriter();
      for await (const block of copyTextLineBlocks(copyText)) {
        rowCount += target.rows.writeLines(block, writer);
        if (writer.length >= chunkBytes) yield writer.take();
      }
      if (writer.length > 0) yield writer.take();
    },
    `load ${target.shape.label}`,
  );
  return rowCount;
}

/** One row read back from a target table: the raw RowBinary bytes of every mapped column. */
interface StoredRow {
  readonly cells: readonly Buffer[];
  readonly version: bigint;
}

/**
 * A row as written: a row image whose unchanged TOAST values come from the
 * stored row `fill`, or a stored row alone (`row` undefined).
 */
interface ResolvedRow {
  readonly row: Row | undefined;
  readonly fill: StoredRow | undefined;
}

/** RowBinary bytes of rows' key and non-key sorting columns, to compare rows with stored ones. */
class RowBytes {
  readonly #target: TableWriter;
  readonly #keyWriter = new RowBinaryWriter(4096);
  readonly #sortingWriter = new RowBinaryWriter(4096);

  constructor(target: TableWriter) {
    this.#target = target;
  }

  /** The key columns of a row image, as stored rows are found by (`readStoredRows`). */
  key(row: Row): string {
    for (const index of this.#target.keyIndexes) this.#cell(this.#keyWriter, row, undefined, index);
    return this.#keyWriter.take().toString('latin1');
  }

  /** The sorting columns that are not key columns: rows with other bytes here sit elsewhere in the table. */
  sorting({ row, fill }: ResolvedRow): string {
    for (const index of this.#target.extraSortingIndexes) this.#cell(this.#sortingWriter, row, fill, index);
    return this.#sortingWriter.take().toString('latin1');
  }

  #cell(writer: RowBinaryWriter, row: Row | undefined, fill: StoredRow | undefined, index: number): void {
    const encoder = this.#target.encoders[index];
    if (!encoder) return;
    const cell = row ? row.cell(index) : undefined;
    if (typeof cell === 'string' || cell === null) writeTextCell(writer, encoder, cell);
    else if (cell === undefined || isUnchangedToast(cell)) {
      const stored = fill?.cells[index];
      if (stored) writer.bytes(stored);
      else encoder.null(writer);
    } else {
      throw new EngineError(
        'decode',
        `binary tuple value in ${this.#target.shape.label}; text format expected`,
      );
    }
  }
}

/** The key images whose stored rows the batch needs: to fill unchanged TOAST values, to soft-delete, to move rows. */
function keysToRead(finals: Iterable<FinalState>, target: TableWriter, bytes: RowBytes): Map<string, Row> {
  const wanted = new Map<string, Row>();
  const want = (row: Row) => wanted.set(bytes.key(row), row);
  const moves = target.extraSortingIndexes.length > 0;
  const softDelete = target.softDeleteColumn !== undefined;
  for (const state of finals) {
    if (state.op === 'upsert') {
      if (state.row.hasUnchangedToast()) want(state.fillKey);
      if (moves) want(state.row);
    } else {
      if (state.last?.row.hasUnchangedToast()) want(state.last.fillKey);
      if (softDelete || moves) want(state.key);
    }
  }
  return wanted;
}

/**
 * The rows one table's final states become, in RowBinary chunks. Stored rows
 * fill unchanged TOAST values and, when the sorting key holds non-key columns,
 * are hidden (flagged deleted) where a row moved away from them.
 */
class BatchRows {
  readonly #target: TableWriter;
  readonly #batchId: bigint;
  readonly #firstIndex: number;
  readonly #stored: ReadonlyMap<string, readonly StoredRow[]>;
  readonly #bytes: RowBytes;
  readonly #moves: boolean;
  /** Rows whose unchanged TOAST values had no stored row to come from (written as null). */
  missingToastRows = 0;

  /** `firstIndex`: the index among the table's changes in the batch of the first change the final states come from. */
  constructor(
    target: TableWriter,
    batchId: bigint,
    firstIndex: number,
    stored: ReadonlyMap<string, readonly StoredRow[]>,
    bytes: RowBytes,
  ) {
    this.#target = target;
    this.#batchId = batchId;
    this.#firstIndex = firstIndex;
    this.#stored = stored;
    this.#bytes = bytes;
    this.#moves = target.extraSortingIndexes.length > 0;
  }

  #storedOf(key: Row): readonly StoredRow[] {
    return this.#stored.get(this.#bytes.key(key)) ?? [];
  }

  #latest(key: Row): StoredRow | undefined {
    return this.#storedOf(key).reduce<StoredRow | undefined>(
      (best, candidate) => (best === undefined || candidate.version > best.version ? candidate : best),
      undefined,
    );
  }

  /** A row image, its unchanged TOAST values to come from the stored row of `fillKey`. */
  #resolve(row: Row, fillKey: Row): ResolvedRow {
    return { row, fill: row.hasUnchangedToast() ? this.#latest(fillKey) : undefined };
  }

  #writeResolved(writer: RowBinaryWriter, resolved: ResolvedRow, flags: RowFlags): void {
    const { rows } = this.#target;
    if (resolved.row === undefined) rows.writeStored(writer, resolved.fill?.cells ?? [], flags);
    else if (rows.writeRow(writer, resolved.row, resolved.fill?.cells, flags)) this.missingToastRows++;
  }

  /** Hides the stored rows of `key` that sit under other sorting values than `resolved`. */
  #hideMoved(writer: RowBinaryWriter, key: Row, resolved: ResolvedRow | undefined, version: bigint): void {
    if (!this.#moves) return;
    const keep = resolved ? this.#bytes.sorting(resolved) : undefined;
    for (const row of this.#storedOf(key)) {
      if (keep !== undefined && this.#bytes.sorting({ row: undefined, fill: row }) === keep) continue;
      this.#target.rows.writeStored(writer, row.cells, { softDeleted: false, deleted: true, version });
    }
  }

  #write(writer: RowBinaryWriter, state: FinalState): void {
    const target = this.#target;
    const version = rowVersion(this.#batchId, this.#firstIndex + state.index);
    if (state.op === 'upsert') {
      const resolved = this.#resolve(state.row, state.fillKey);
      this.#hideMoved(writer, state.row, resolved, version);
      this.#writeResolved(writer, resolved, { softDeleted: false, deleted: false, version });
    } else if (target.softDeleteColumn !== undefined) {
      const current = this.#latest(state.key);
      const resolved: ResolvedRow = state.last
        ? this.#resolve(state.last.row, state.last.fillKey)
        : current
          ? { row: undefined, fill: current }
          : { row: state.key, fill: undefined };
      this.#hideMoved(writer, state.key, resolved, version);
      this.#writeResolved(writer, resolved, { softDeleted: true, deleted: false, version });
    } else if (this.#moves && this.#storedOf(state.key).length > 0) {
      this.#hideMoved(writer, state.key, undefined, version);
    } else {
      this.#writeResolved(
        writer,
        { row: state.key, fill: undefined },
        { softDeleted: false, deleted: true, version },
      );
    }
  }

  async *chunks(finals: Iterable<FinalState>): AsyncGenerator<Buffer> {
    const writer = chunkWriter();
    for (const state of finals) {
      this.#write(writer, state);
      if (writer.length >= chunkBytes) yield writer.take();
    }
    if (writer.length > 0) yield writer.take();
  }
}

/**
 * Applies one table's changes of a batch, as held (table-changes.ts): the
 * leading inserts, then the changes after them. `batchId` is the version's
 * batch part: the mirror's version base plus the batch id.
 */
export async function applyTableChanges(
  transport: ClickHouseTransport,
  target: TableWriter,
  batchId: bigint,
  held: ClickHouseTableChanges,
  logger: Logger,
): Promise<void> {
  const { newRows } = held;
  let later: { readonly changes: readonly RowChangeImages[]; readonly firstIndex: number } | undefined =
    held.later;
  if (newRows) {
    // New rows need no stored row unless the sorting key holds non-key
    // columns (a row may have to be hidden where it sat before): those take
    // the final states' way.
    if (target.extraSortingIndexes.length === 0) {
      await writeNewRows(transport, target, rowVersion(batchId, 0), newRows);
    } else {
      const inserts: RowChangeImages[] = newRows
        .rows()
        .map((newRow) => ({ kind: 'insert' as const, newRow }));
      later = { changes: [...inserts, ...(later?.changes ?? [])], firstIndex: 0 };
    }
  }
  if (later) await applyLaterChanges(transport, target, batchId, later.changes, later.firstIndex, logger);
}

/** A batch's new rows, from their TupleData, each at its own version from `firstVersion` on. */
async function writeNewRows(
  transport: ClickHouseTransport,
  target: TableWriter,
  firstVersion: bigint,
  newRows: TupleDataRows,
): Promise<void> {
  await transport.insert(
    target.insertSql,
    async function* () {
      const writer = chunkWriter();
      let version = firstVersion;
      for (const block of newRows.chunks()) {
        version += BigInt(target.rows.writeTuples(block, writer, version));
        if (writer.length >= chunkBytes) yield writer.take();
      }
      if (writer.length > 0) yield writer.take();
    },
    `write new rows to ${target.shape.label}`,
  );
}

/** Applies changes as final states; `firstIndex` is the first one's index among the table's changes in the batch. */
async function applyLaterChanges(
  transport: ClickHouseTransport,
  target: TableWriter,
  batchId: bigint,
  changes: readonly RowChangeImages[],
  firstIndex: number,
  logger: Logger,
): Promise<void> {
  const plan: TableFinalStates = finalStates(changes, target.keyIndexes);
  if (plan.truncateIndex !== undefined)
    await truncateInBatch(transport, target, rowVersion(batchId, firstIndex + plan.truncateIndex));
  if (plan.finals.size === 0) return;

  const bytes = new RowBytes(target);
  const stored = await readStoredRows(transport, target, keysToRead(plan.finals.values(), target, bytes));
  const rows = new BatchRows(target, batchId, firstIndex, stored, bytes);
  await transport.insert(
    target.insertSql,
    () => rows.chunks(plan.finals.values()),
    `write rows to ${target.shape.label}`,
  );
  if (rows.missingToastRows > 0) {
    logger.warn(
      { table: target.shape.label, rowCount: rows.missingToastRows },
      'updated rows were missing at the destination; their unchanged TOAST columns were written as null',
    );
  }
}

/**
 * The current rows (under FINAL, not deleted) of the given keys, by key
 * bytes: one query per table and batch. A key may have several rows when the
 * sorting key holds non-key columns and a replay left an older placement.
 */
async function readStoredRows(
  transport: ClickHouseTransport,
  target: TableWriter,
  wanted: ReadonlyMap<string, Row>,
): Promise<Map<string, StoredRow[]>> {
  const found = new Map<string, StoredRow[]>();
  if (wanted.size === 0) return found;
  const { shape } = target;
  const mappedNames = target.columnNames;
  const keyTypes = target.keyIndexes.map((index) => shape.types.get(mappedNames[index] ?? '') as ChType);
  const tuples: string[] = [];
  for (const key of wanted.keys()) {
    const reader = new RowBinaryReader(Buffer.from(key, 'latin1'));
    const literals = keyTypes.map((type) => sqlLiteral(type, reader.value(type)));
    tuples.push(literals.length === 1 ? (literals[0] ?? '') : `(${literals.join(', ')})`);
  }
  const keyList =
    target.keyIndexes.length === 1
      ? quoteIdentifier(mappedNames[target.keyIndexes[0] ?? 0] ?? '')
      : `(${target.keyIndexes.map((index) => quoteIdentifier(mappedNames[index] ?? '')).join(', ')})`;
  const query = `SELECT ${[...mappedNames, versionColumn].map(quoteIdentifier).join(', ')}
      FROM ${shape.sql} FINAL
      WHERE ${quoteIdentifier(isDeletedColumn)} = 0 AND ${keyList} IN (${tuples.join(', ')})
      FORMAT RowBinary`;
  // A batch's keys can make a long query: allow it (the defaults are 256 KiB and 50,000 AST nodes).
  const settings: Record<string, string> =
    query.length > 200_000 || tuples.length > 5_000
      ? {
          max_query_size: String(query.length * 2),
          max_ast_elements: String(tuples.length * (keyTypes.length + 2) * 4 + 50_000),
          max_expanded_ast_elements: String(tuples.length * (keyTypes.length + 2) * 4 + 500_000),
        }
      : {};
  const answer = await transport.binary(query, settings, `read current rows of ${shape.label}`);
  const reader = new RowBinaryReader(answer);
  const mappedTypes = mappedNames.map((name) => shape.types.get(name) as ChType);
  while (!reader.atEnd) {
    const cells = mappedTypes.map((type) => Buffer.from(reader.rawValue(type)));
    const version = reader.value({ name: 'UInt64' }) as bigint;
    const key = Buffer.concat(target.keyIndexes.map((index) => cells[index] ?? Buffer.alloc(0))).toString(
      'latin1',
    );
    const rows = found.get(key) ?? [];
    rows.push({ cells, version });
    found.set(key, rows);
  }
  return found;
}

/**
 * A truncate inside a batch. Without soft delete the table is emptied
 * (TRUNCATE TABLE: a replay empties it again and rewrites what followed).
 * With soft delete every visible row is written again flagged, at the
 * truncate's version, so later changes of the batch still win.
 */
async function truncateInBatch(
  transport: ClickHouseTransport,
  target: TableWriter,
  version: bigint,
): Promise<void> {
  const { shape, softDeleteColumn } = target;
  if (!softDeleteColumn) {
    await transport.command(`TRUNCATE TABLE ${shape.sql}`, `truncate ${shape.label}`);
    return;
  }
  const mapped = target.columnNames.map(quoteIdentifier);
  const soft = quoteIdentifier(softDeleteColumn);
  const flagged = shape.types.get(softDeleteColumn)?.name === 'Bool' ? 'true' : '1';
  await transport.command(
    `INSERT INTO ${shape.sql} (${[...mapped, soft, quoteIdentifier(isDeletedColumn), quoteIdentifier(versionColumn)].join(', ')})
       SELECT ${mapped.join(', ')}, ${flagged}, 0, toUInt64(${version})
       FROM ${shape.sql} FINAL WHERE ${quoteIdentifier(isDeletedColumn)} = 0 AND NOT ${soft}`,
    `flag the rows of ${shape.label} as deleted`,
  );
}

// ClickHouse as a destination (the "analytics" peer kind). Every target table
// is a ReplacingMergeTree keyed on the source key (or the mapping's ordering
// ranks) whose version column increases with the source's commit order, so a
// batch is applied by inserting rows only, and a batch replayed after a crash
// yields the same table under FINAL. The batch's checkpoint row is written
// after its rows. docs/clickhouse.md explains the design and its limits.
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { ClickHouseClient } from '@clickhouse/client';
import type { Logger } from 'pino';
import { EngineError } from '../../errors.ts';
import { formatTableName, type TableMapping } from '../../resources/mirror.ts';
import type { AnalyticsConfig } from '../../resources/peer.ts';
import { classifyClickHouseError } from '../classify.ts';
import { finalStates } from '../coalesce.ts';
import { copyTextRows } from '../copy-text.ts';
import type { Destination, DestinationTableState, MirrorColumns } from '../destination.ts';
import {
  type ChangeBatch,
  type Checkpoint,
  type DestinationTable,
  isUnchangedToast,
  type RowImage,
  type SourceColumn,
  type TableChanges,
  keyIndexes as tableKeyIndexes,
} from '../records.ts';
import { createAnalyticsClient } from './client.ts';
import {
  type CellEncoder,
  columnEncoder,
  type DateLimits,
  type EncodableCell,
  RowBinaryReader,
  RowBinaryWriter,
  sqlLiteral,
  stringLiteral,
} from './row-binary.ts';
import { maxChangesPerBatch, rowVersion } from './row-version.ts';
import { type ServerCapabilities, serverCapabilities } from './server.ts';
import { quoteIdentifier } from './sql.ts';
import {
  type ChType,
  canBeNullable,
  chTypeFor,
  formatChType,
  parseChType,
  sourceColumnType,
  syncedAtChType,
} from './types.ts';

export const versionColumn = '_tributary_version';
export const isDeletedColumn = '_tributary_is_deleted';
export const defaultSyncedAtColumn = '_tributary_synced_at';
export const checkpointTableName = '_tributary_checkpoints';

/** Inserts are streamed to the server in chunks of about this size. */
const chunkBytes = 1 << 20;
/**
 * Socket idle timeout of a request. Inserts stream continuously; the client
 * wants progress headers above 60 s, which would hide late insert errors.
 */
const requestTimeoutMs = 60_000;

export interface ClickHouseDestinationOptions {
  readonly mirrorColumns: MirrorColumns;
  /** The mirror's table mappings: their `columns[].ordering` ranks choose ORDER BY. */
  readonly tableMappings: readonly TableMapping[];
  readonly maxBatchSize: number;
  readonly logger: Logger;
}

/** A target table as the server has it: column types by name. */
interface TableShape {
  readonly sql: string;
  readonly label: string;
  readonly types: ReadonlyMap<string, ChType>;
}

/** What writing one table's rows needs, built from its shape and source columns. */
interface TableWriter {
  readonly shape: TableShape;
  /** The mapped columns, in source order. */
  readonly columnNames: readonly string[];
  readonly encoders: readonly CellEncoder[];
  readonly keyIndexes: readonly number[];
  /** Indexes of the ORDER BY columns that are not key columns (moving rows between sorting keys). */
  readonly extraSortingIndexes: readonly number[];
  readonly softDeleteColumn: string | undefined;
  readonly insertSql: string;
}

interface StoredCheckpoint {
  readonly checkpoint: Checkpoint | undefined;
  /** Added to batch ids in row versions: the batches of earlier incarnations of the mirror. */
  readonly versionBase: bigint;
  readonly seq: bigint;
}

/** One row read back from a target table: the raw RowBinary bytes of every mapped column. */
interface StoredRow {
  readonly cells: readonly Buffer[];
  readonly version: bigint;
}

export class ClickHouseDestination implements Destination {
  readonly #config: AnalyticsConfig;
  readonly #options: ClickHouseDestinationOptions;
  #client: ClickHouseClient | undefined;
  #capabilities: ServerCapabilities | undefined;
  #versionText = 'unknown';
  readonly #shapes = new Map<string, TableShape>();

  constructor(config: AnalyticsConfig, options: ClickHouseDestinationOptions) {
    this.#config = config;
    this.#options = options;
  }

  get #softDeleteColumn(): string | undefined {
    return this.#options.mirrorColumns.softDeleteColumn;
  }

  get #syncedAtColumn(): string {
    return this.#options.mirrorColumns.syncedAtColumn ?? defaultSyncedAtColumn;
  }

  #connection(): ClickHouseClient {
    this.#client ??= createAnalyticsClient(this.#config, requestTimeoutMs);
    return this.#client;
  }

  async #server(): Promise<ServerCapabilities> {
    if (this.#capabilities) return this.#capabilities;
    const [row] = await this.#rows<{ version: string }>('SELECT version() AS version', 'read server version');
    this.#versionText = row?.version ?? 'unknown';
    this.#capabilities = serverCapabilities(this.#versionText);
    return this.#capabilities;
  }

  async #limits(): Promise<DateLimits> {
    return { date32: (await this.#server()).extendedDateRange };
  }

  async #rows<T>(query: string, what: string): Promise<T[]> {
    try {
      const result = await this.#connection().query({ query, format: 'JSONEachRow' });
      return await result.json<T>();
    } catch (error) {
      throw classifyClickHouseError(error, `destination: ${what}`, 'destination_write');
    }
  }

  async #command(
    query: string,
    what: string,
    kind: 'destination_write' | 'schema_mismatch' = 'destination_write',
  ) {
    try {
      await this.#connection().command({ query });
    } catch (error) {
      throw classifyClickHouseError(error, `destination: ${what}`, kind);
    }
  }

  /** Runs a query whose answer is RowBinary and returns it whole. */
  async #binary(query: string, settings: Record<string, string>, what: string): Promise<Buffer> {
    try {
      const result = await this.#connection().exec({ query, clickhouse_settings: settings });
      const chunks: Buffer[] = [];
      for await (const chunk of result.stream) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    } catch (error) {
      throw classifyClickHouseError(error, `destination: ${what}`, 'destination_write');
    }
  }

  /**
   * Streams `body` as the data of `insert` (… FORMAT RowBinary). A failure of
   * the body itself (a value that cannot be written) is reported as such, not
   * as the aborted request it causes.
   */
  async #insert(insert: string, body: () => AsyncGenerator<Buffer>, what: string): Promise<void> {
    let bodyError: unknown;
    const guarded = async function* () {
      try {
        yield* body();
      } catch (error) {
        bodyError = error;
        throw error;
      }
    };
    try {
      const result = await this.#connection().exec({ query: insert, values: Readable.from(guarded()) });
      result.stream.resume();
      await finished(result.stream);
    } catch (error) {
      throw classifyClickHouseError(bodyError ?? error, `destination: ${what}`, 'destination_write');
    }
  }

  async check(): Promise<{ version: string }> {
    await this.#server();
    return { version: this.#versionText };
  }

  async close(): Promise<void> {
    const client = this.#client;
    this.#client = undefined;
    await client?.close();
  }

  #target(table: DestinationTable): { database: string; name: string } {
    // `public` (the default schema of a mapping) means the peer's database.
    const database = table.destination.schema === 'public' ? this.#config.database : table.destination.schema;
    return { database, name: table.destination.table };
  }

  #checkpointTable(): string {
    return `${quoteIdentifier(this.#config.database)}.${quoteIdentifier(checkpointTableName)}`;
  }

  /** ORDER BY: the mapping's ranked columns first, then the key columns not among them. */
  #sortingColumns(table: DestinationTable): string[] {
    const mapping = this.#options.tableMappings.find(
      (candidate) =>
        candidate.source.schema === table.source.schema && candidate.source.table === table.source.table,
    );
    const present = new Set(table.columns.map((column) => column.name));
    const ranked = (mapping?.columns ?? [])
      .filter((column) => column.ordering !== undefined && present.has(column.sourceName))
      .sort((a, b) => (a.ordering ?? 0) - (b.ordering ?? 0))
      .map((column) => column.sourceName);
    const sorting = [...new Set(ranked)];
    for (const key of table.keyColumns) if (!sorting.includes(key)) sorting.push(key);
    return sorting;
  }

  #columnDefinition(column: SourceColumn, capabilities: ServerCapabilities, sorting: ReadonlySet<string>) {
    let type = chTypeFor(sourceColumnType(column), capabilities, column.arrayDimensions);
    // ClickHouse refuses Nullable in the sorting key: such columns keep the type's zero for NULL.
    if (!column.notNull && !sorting.has(column.name) && canBeNullable(type))
      type = { name: 'Nullable', inner: type };
    return `${quoteIdentifier(column.name)} ${formatChType(type)}`;
  }

  #metadataDefinitions(capabilities: ServerCapabilities): Map<string, string> {
    const definitions = new Map<string, string>();
    const softDelete = this.#softDeleteColumn;
    if (softDelete) {
      definitions.set(softDelete, capabilities.bool ? 'Bool DEFAULT false' : 'UInt8 DEFAULT 0');
    }
    const syncedAt = syncedAtChType(capabilities);
    definitions.set(
      this.#syncedAtColumn,
      `${formatChType(syncedAt)} DEFAULT ${syncedAt.name === 'DateTime64' ? 'now64(6)' : 'now()'}`,
    );
    definitions.set(isDeletedColumn, 'UInt8 DEFAULT 0');
    definitions.set(versionColumn, 'UInt64 DEFAULT 0');
    return definitions;
  }

  async setupTables(tables: readonly DestinationTable[]): Promise<void> {
    if (this.#options.maxBatchSize > maxChangesPerBatch) {
      throw new EngineError(
        'config',
        `max_batch_size must be at most ${maxChangesPerBatch} for a ClickHouse destination (row versions hold the change's index in 27 bits)`,
      );
    }
    if (this.#config.objstorePath) {
      this.#options.logger.info(
        'object-storage staging is not used yet: rows are inserted directly over HTTP',
      );
    }
    const capabilities = await this.#server();
    await this.#command(
      `CREATE TABLE IF NOT EXISTS ${this.#checkpointTable()} (
         mirror String, batch_id UInt64, lsn UInt64, version_base UInt64, seq UInt64,
         updated_at DateTime('UTC') DEFAULT now())
       ENGINE = ReplacingMergeTree(seq) ORDER BY mirror`,
      'create the checkpoint table',
    );
    for (const table of tables) {
      const { database, name } = this.#target(table);
      const label = `${database}.${name}`;
      if (table.keyColumns.length === 0) {
        throw new EngineError('config', `${formatTableName(table.source)} has no key to order ${label} by`);
      }
      const reserved = new Set(this.#metadataDefinitions(capabilities).keys());
      const clash = table.columns.find((column) => reserved.has(column.name));
      if (clash) {
        throw new EngineError(
          'config',
          `column ${clash.name} of ${formatTableName(table.source)} has the name of a column the mirror adds`,
        );
      }
      if (database !== this.#config.database) {
        await this.#command(
          `CREATE DATABASE IF NOT EXISTS ${quoteIdentifier(database)}`,
          `create database ${database}`,
        );
      }
      const sorting = this.#sortingColumns(table);
      const sortingSet = new Set(sorting);
      const definitions = table.columns.map((column) =>
        this.#columnDefinition(column, capabilities, sortingSet),
      );
      for (const [column, definition] of this.#metadataDefinitions(capabilities)) {
        definitions.push(`${quoteIdentifier(column)} ${definition}`);
      }
      const engine = capabilities.isDeletedColumn
        ? `ReplacingMergeTree(${versionColumn}, ${isDeletedColumn})`
        : `ReplacingMergeTree(${versionColumn})`;
      await this.#command(
        `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(database)}.${quoteIdentifier(name)} (
           ${definitions.join(',\n           ')})
         ENGINE = ${engine} ORDER BY (${sorting.map(quoteIdentifier).join(', ')})`,
        `create table ${label}`,
      );
      // A table that existed already: add what it lacks (columns added at the
      // source while the mirror was stopped, a soft-delete column turned on).
      const shape = await this.#loadShape(table);
      const missing = table.columns.filter((column) => !shape.types.has(column.name));
      if (missing.length > 0) await this.addColumns(table, missing);
      for (const [column, definition] of this.#metadataDefinitions(capabilities)) {
        if (shape.types.has(column)) continue;
        if (column === versionColumn || column === isDeletedColumn) {
          throw new EngineError(
            'schema_mismatch',
            `${label} exists without the ${column} column; drop it or let the mirror write another table`,
          );
        }
        await this.#command(
          `ALTER TABLE ${shape.sql} ADD COLUMN ${quoteIdentifier(column)} ${definition}`,
          `add column ${column} to ${label}`,
          'schema_mismatch',
        );
      }
      this.#shapes.delete(label);
    }
  }

  async #loadShape(table: DestinationTable): Promise<TableShape> {
    const { database, name } = this.#target(table);
    const label = `${database}.${name}`;
    const rows = await this.#rows<{ name: string; type: string }>(
      `SELECT name, type FROM system.columns WHERE database = ${stringLiteral(database)} AND table = ${stringLiteral(name)}`,
      `read the columns of ${label}`,
    );
    if (rows.length === 0) {
      throw new EngineError('schema_mismatch', `destination table ${label} does not exist`);
    }
    const shape: TableShape = {
      sql: `${quoteIdentifier(database)}.${quoteIdentifier(name)}`,
      label,
      types: new Map(rows.map((row) => [row.name, parseChType(row.type)])),
    };
    this.#shapes.set(label, shape);
    return shape;
  }

  async #shape(table: DestinationTable): Promise<TableShape> {
    const { database, name } = this.#target(table);
    return this.#shapes.get(`${database}.${name}`) ?? this.#loadShape(table);
  }

  async #writer(table: DestinationTable): Promise<TableWriter> {
    const shape = await this.#shape(table);
    const limits = await this.#limits();
    const typeOf = (column: string): ChType => {
      const type = shape.types.get(column);
      if (!type)
        throw new EngineError('schema_mismatch', `destination table ${shape.label} has no column ${column}`);
      return type;
    };
    const encoders = table.columns.map((column) =>
      columnEncoder(column.name, sourceColumnType(column), typeOf(column.name), limits),
    );
    const keyIndexes = tableKeyIndexes(table);
    if (keyIndexes.length === 0 || keyIndexes.includes(-1)) {
      throw new EngineError('config', `destination table ${shape.label} has no usable key`);
    }
    const keys = new Set(table.keyColumns);
    const extraSortingIndexes = this.#sortingColumns(table)
      .filter((name) => !keys.has(name))
      .map((name) => table.columns.findIndex((column) => column.name === name));
    for (const column of [isDeletedColumn, versionColumn]) {
      const expected = column === versionColumn ? 'UInt64' : 'UInt8';
      if (typeOf(column).name !== expected) {
        throw new EngineError('schema_mismatch', `${shape.label}.${column} must be ${expected}`);
      }
    }
    const softDeleteColumn = this.#softDeleteColumn;
    if (softDeleteColumn && !['Bool', 'UInt8'].includes(typeOf(softDeleteColumn).name)) {
      throw new EngineError('schema_mismatch', `${shape.label}.${softDeleteColumn} must be Bool or UInt8`);
    }
    const insertColumns = [
      ...table.columns.map((column) => column.name),
      ...(softDeleteColumn ? [softDeleteColumn] : []),
      isDeletedColumn,
      versionColumn,
    ];
    return {
      shape,
      columnNames: table.columns.map((column) => column.name),
      encoders,
      keyIndexes,
      extraSortingIndexes,
      softDeleteColumn,
      insertSql: `INSERT INTO ${shape.sql} (${insertColumns.map(quoteIdentifier).join(', ')}) FORMAT RowBinary`,
    };
  }

  /** One row: the mapped columns, then the soft-delete flag, is_deleted and the version (synced-at is the DEFAULT). */
  #writeRow(
    writer: RowBinaryWriter,
    target: TableWriter,
    cells: readonly EncodableCell[],
    flags: { readonly softDeleted: boolean; readonly deleted: boolean; readonly version: bigint },
  ): void {
    for (const [index, encode] of target.encoders.entries()) encode(writer, cells[index] ?? null);
    if (target.softDeleteColumn) writer.u8(flags.softDeleted ? 1 : 0);
    writer.u8(flags.deleted ? 1 : 0);
    writer.integer(flags.version, 8);
  }

  async tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]> {
    const states: DestinationTableState[] = [];
    for (const table of tables) {
      const { database, name } = this.#target(table);
      const label = `${database}.${name}`;
      const found = await this.#rows<{ name: string }>(
        `SELECT name FROM system.tables WHERE database = ${stringLiteral(database)} AND name = ${stringLiteral(name)}`,
        `look up ${label}`,
      );
      if (found.length === 0) {
        states.push('absent');
        continue;
      }
      // count() of a MergeTree table is read from part metadata (18.16 has no
      // system.tables.total_rows); rows marked deleted still count as rows.
      const counted = await this.#rows<{ rows: string }>(
        `SELECT toString(count()) AS rows FROM ${quoteIdentifier(database)}.${quoteIdentifier(name)}`,
        `count the rows of ${label}`,
      );
      states.push((counted[0]?.rows ?? '0') === '0' ? 'empty' : 'populated');
    }
    return states;
  }

  async truncateTables(tables: readonly DestinationTable[]): Promise<void> {
    for (const table of tables) {
      const shape = await this.#shape(table);
      await this.#command(`TRUNCATE TABLE ${shape.sql}`, `truncate ${shape.label}`);
    }
  }

  async writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number> {
    const target = await this.#writer(table);
    const columnCount = table.columns.length;
    const flags = { softDeleted: false, deleted: false, version: 0n };
    let rowCount = 0;
    const writeRow = this.#writeRow.bind(this);
    await this.#insert(
      target.insertSql,
      async function* () {
        const writer = new RowBinaryWriter(chunkBytes + (chunkBytes >> 2));
        for await (const row of copyTextRows(copyText)) {
          if (row.length !== columnCount) {
            throw new EngineError(
              'decode',
              `a COPY row of ${formatTableName(table.source)} has ${row.length} fields, not ${columnCount}`,
            );
          }
          writeRow(writer, target, row, flags);
          rowCount++;
          if (writer.length >= chunkBytes) yield writer.take();
        }
        if (writer.length > 0) yield writer.take();
      },
      `load ${target.shape.label}`,
    );
    return rowCount;
  }

  async #storedCheckpoint(mirror: string): Promise<StoredCheckpoint> {
    const rows = await this.#rows<{ batch_id: string; lsn: string; version_base: string; seq: string }>(
      `SELECT toString(batch_id) AS batch_id, toString(lsn) AS lsn, toString(version_base) AS version_base,
         toString(seq) AS seq
       FROM ${this.#checkpointTable()} FINAL WHERE mirror = ${stringLiteral(mirror)}`,
      'read checkpoint',
    );
    const row = rows[0];
    if (!row) return { checkpoint: undefined, versionBase: 0n, seq: 0n };
    const batchId = BigInt(row.batch_id);
    // Batch 0 is the mark removeCheckpoint leaves.
    const checkpoint = batchId === 0n ? undefined : { batchId, lsn: BigInt(row.lsn) };
    return { checkpoint, versionBase: BigInt(row.version_base), seq: BigInt(row.seq) };
  }

  /**
   * The checkpoint row's own version (seq) is above the stored one whatever
   * the clock says, so the latest write always wins under FINAL.
   */
  async #writeCheckpoint(
    mirror: string,
    checkpoint: Checkpoint,
    versionBase: bigint,
    stored: StoredCheckpoint,
  ): Promise<void> {
    const now = BigInt(Date.now()) * 1000n;
    const seq = now > stored.seq ? now : stored.seq + 1n;
    await this.#command(
      `INSERT INTO ${this.#checkpointTable()} (mirror, batch_id, lsn, version_base, seq)
       VALUES (${stringLiteral(mirror)}, ${checkpoint.batchId}, ${checkpoint.lsn}, ${versionBase}, ${seq})`,
      'write checkpoint',
    );
  }

  async #checkpointTableExists(): Promise<boolean> {
    const [row] = await this.#rows<{ present: number | string }>(
      `SELECT count() AS present FROM system.tables WHERE database = ${stringLiteral(this.#config.database)} AND name = ${stringLiteral(checkpointTableName)}`,
      'look for the checkpoint table',
    );
    return Number(row?.present ?? 0) > 0;
  }

  async readCheckpoint(mirror: string): Promise<Checkpoint | undefined> {
    if (!(await this.#checkpointTableExists())) return undefined;
    return (await this.#storedCheckpoint(mirror)).checkpoint;
  }

  async removeCheckpoint(mirror: string): Promise<void> {
    if (!(await this.#checkpointTableExists())) return;
    const stored = await this.#storedCheckpoint(mirror);
    if (!stored.checkpoint) return;
    // Batch ids start again at 1; rows already written keep their versions, so
    // the next incarnation's versions start above them (docs/clickhouse.md).
    const versionBase = stored.versionBase + stored.checkpoint.batchId;
    await this.#writeCheckpoint(mirror, { batchId: 0n, lsn: 0n }, versionBase, stored);
  }

  async addColumns(table: DestinationTable, columns: readonly SourceColumn[]): Promise<void> {
    const capabilities = await this.#server();
    const shape = await this.#loadShape(table);
    const sorting = new Set(this.#sortingColumns(table));
    for (const column of columns) {
      // system.columns first: ADD COLUMN IF NOT EXISTS is newer than some servers.
      if (shape.types.has(column.name)) continue;
      await this.#command(
        `ALTER TABLE ${shape.sql} ADD COLUMN ${this.#columnDefinition(column, capabilities, sorting)}`,
        `add column ${column.name} to ${shape.label}`,
        'schema_mismatch',
      );
    }
    await this.#loadShape(table);
  }

  async syncBatch(batch: ChangeBatch): Promise<void> {
    const stored = await this.#storedCheckpoint(batch.mirror);
    if (stored.checkpoint && stored.checkpoint.batchId >= batch.batchId) {
      this.#options.logger.info({ batchId: String(batch.batchId) }, 'batch already applied, skipped');
      return;
    }
    const versionBatch = stored.versionBase + batch.batchId;
    for (const tableChanges of batch.tables) await this.#applyTable(versionBatch, tableChanges);
    await this.#writeCheckpoint(
      batch.mirror,
      { batchId: batch.batchId, lsn: batch.endLsn },
      stored.versionBase,
      stored,
    );
  }

  /** `batchId` here is the version's batch part: the mirror's version base plus the batch id. */
  async #applyTable(batchId: bigint, { table, changes }: TableChanges): Promise<void> {
    const target = await this.#writer(table);
    const plan = finalStates(changes, target.keyIndexes);
    if (plan.truncateIndex !== undefined)
      await this.#truncateInBatch(target, rowVersion(batchId, plan.truncateIndex));
    if (plan.finals.size === 0) return;

    const keyWriter = new RowBinaryWriter(4096);
    const keyBytes = (row: RowImage): string => {
      for (const index of target.keyIndexes)
        target.encoders[index]?.(keyWriter, sourceCell(row[index] ?? null, target));
      return keyWriter.take().toString('latin1');
    };
    const wanted = new Map<string, RowImage>();
    const want = (row: RowImage) => wanted.set(keyBytes(row), row);
    const moves = target.extraSortingIndexes.length > 0;
    const softDelete = target.softDeleteColumn !== undefined;
    for (const state of plan.finals.values()) {
      if (state.op === 'upsert') {
        if (state.row.some(isUnchangedToast)) want(state.fillKey);
        if (moves) want(state.row);
      } else {
        if (state.last?.row.some(isUnchangedToast)) want(state.last.fillKey);
        if (softDelete || moves) want(state.key);
      }
    }
    const stored = await this.#storedRows(target, wanted);
    const latest = (row: RowImage): StoredRow | undefined =>
      (stored.get(keyBytes(row)) ?? []).reduce<StoredRow | undefined>(
        (best, candidate) => (best === undefined || candidate.version > best.version ? candidate : best),
        undefined,
      );

    let missingToastRows = 0;
    /** A row image's cells, unchanged TOAST values taken from the stored row of `fillKey`. */
    const resolve = (row: RowImage, fillKey: RowImage): EncodableCell[] => {
      const cells = row.map((cell) => (isUnchangedToast(cell) ? undefined : sourceCell(cell, target)));
      if (cells.includes(undefined)) {
        const from = latest(fillKey);
        if (!from) missingToastRows++;
        cells.forEach((cell, index) => {
          if (cell === undefined) cells[index] = from?.cells[index] ?? null;
        });
      }
      return cells as EncodableCell[];
    };
    const sortingWriter = new RowBinaryWriter(4096);
    const sortingBytes = (cells: readonly EncodableCell[]): string => {
      for (const index of target.extraSortingIndexes)
        target.encoders[index]?.(sortingWriter, cells[index] ?? null);
      return sortingWriter.take().toString('latin1');
    };

    const writeRow = this.#writeRow.bind(this);
    await this.#insert(
      target.insertSql,
      async function* () {
        const writer = new RowBinaryWriter(chunkBytes + (chunkBytes >> 2));
        /** Hides the stored rows of `key` that sit under other sorting values than `cells`. */
        const hideMoved = (key: RowImage, cells: readonly EncodableCell[] | undefined, version: bigint) => {
          if (!moves) return;
          const keep = cells ? sortingBytes(cells) : undefined;
          for (const row of stored.get(keyBytes(key)) ?? []) {
            if (keep !== undefined && sortingBytes(row.cells) === keep) continue;
            writeRow(writer, target, row.cells, { softDeleted: false, deleted: true, version });
          }
        };
        for (const state of plan.finals.values()) {
          const version = rowVersion(batchId, state.index);
          if (state.op === 'upsert') {
            const cells = resolve(state.row, state.fillKey);
            hideMoved(state.row, cells, version);
            writeRow(writer, target, cells, { softDeleted: false, deleted: false, version });
          } else if (softDelete) {
            const current = latest(state.key);
            const cells = state.last
              ? resolve(state.last.row, state.last.fillKey)
              : current
                ? current.cells
                : state.key.map((cell) => sourceCell(cell, target));
            hideMoved(state.key, cells, version);
            writeRow(writer, target, cells, { softDeleted: true, deleted: false, version });
          } else if (moves && (stored.get(keyBytes(state.key))?.length ?? 0) > 0) {
            hideMoved(state.key, undefined, version);
          } else {
            const cells = state.key.map((cell) => sourceCell(cell, target));
            writeRow(writer, target, cells, { softDeleted: false, deleted: true, version });
          }
          if (writer.length >= chunkBytes) yield writer.take();
        }
        if (writer.length > 0) yield writer.take();
      },
      `write rows to ${target.shape.label}`,
    );
    if (missingToastRows > 0) {
      this.#options.logger.warn(
        { table: target.shape.label, rowCount: missingToastRows },
        'updated rows were missing at the destination; their unchanged TOAST columns were written as null',
      );
    }
  }

  /**
   * The current rows (under FINAL, not deleted) of the given keys, by key
   * bytes: one query per table and batch. A key may have several rows when the
   * sorting key holds non-key columns and a replay left an older placement.
   */
  async #storedRows(
    target: TableWriter,
    wanted: ReadonlyMap<string, RowImage>,
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
    const answer = await this.#binary(query, settings, `read current rows of ${shape.label}`);
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
  async #truncateInBatch(target: TableWriter, version: bigint): Promise<void> {
    const { shape, softDeleteColumn } = target;
    if (!softDeleteColumn) {
      await this.#command(`TRUNCATE TABLE ${shape.sql}`, `truncate ${shape.label}`);
      return;
    }
    const mapped = target.columnNames.map(quoteIdentifier);
    const soft = quoteIdentifier(softDeleteColumn);
    const flagged = shape.types.get(softDeleteColumn)?.name === 'Bool' ? 'true' : '1';
    await this.#command(
      `INSERT INTO ${shape.sql} (${[...mapped, soft, quoteIdentifier(isDeletedColumn), quoteIdentifier(versionColumn)].join(', ')})
       SELECT ${mapped.join(', ')}, ${flagged}, 0, toUInt64(${version})
       FROM ${shape.sql} FINAL WHERE ${quoteIdentifier(isDeletedColumn)} = 0 AND NOT ${soft}`,
      `flag the rows of ${shape.label} as deleted`,
    );
  }
}

/** A source cell as the encoder takes it; binary pgoutput values are not requested. */
function sourceCell(cell: RowImage[number], target: TableWriter): EncodableCell {
  if (cell === null || typeof cell === 'string') return cell;
  if (isUnchangedToast(cell)) return null;
  throw new EngineError('decode', `binary tuple value in ${target.shape.label}; text format expected`);
}

// Target tables of a ClickHouse destination: created as ReplacingMergeTrees
// ordered by the source key (or the mapping's ordering ranks), extended with
// the columns they lack, and their shape (column types as the server has them)
// cached for writing rows.
import { EngineError } from '../../errors.ts';
import { formatTableName, type TableMapping } from '../../resources/mirror.ts';
import type { DestinationTableState, MirrorColumns } from '../destination.ts';
import { type DestinationTable, keyIndexes, type SourceColumn, type TableAlteration } from '../records.ts';
import { type ColumnEncoder, columnEncoder } from './column-encoder.ts';
import { RowWriter } from './row-writer.ts';
import type { ServerCapabilities } from './server.ts';
import { quoteIdentifier, stringLiteral } from './sql.ts';
import type { ClickHouseTransport } from './transport.ts';
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

/** A target table as the server has it: column types by name. */
export interface TableShape {
  readonly sql: string;
  readonly label: string;
  readonly types: ReadonlyMap<string, ChType>;
  /** The columns of its sorting key (ORDER BY), as the server has it. */
  readonly sortingKey: ReadonlySet<string>;
}

/** What writing one table's rows needs, built from its shape and source columns. */
export interface TableWriter {
  readonly shape: TableShape;
  /** The mapped columns, in source order. */
  readonly columnNames: readonly string[];
  /** Each mapped column's encoder (column-encoder.ts), in source order. */
  readonly encoders: readonly ColumnEncoder[];
  /** Rows of the table as RowBinary, from any input (row-writer.ts). */
  readonly rows: RowWriter;
  readonly keyIndexes: readonly number[];
  /** Indexes of the ORDER BY columns that are not key columns (moving rows between sorting keys). */
  readonly extraSortingIndexes: readonly number[];
  readonly softDeleteColumn: string | undefined;
  /** `INSERT INTO t (mapped columns, flags, version) FORMAT RowBinary`: every write's. */
  readonly insertSql: string;
}

export interface TableSchemaOptions {
  readonly mirrorColumns: MirrorColumns;
  /** The mirror's table mappings: their `columns[].ordering` ranks choose ORDER BY. */
  readonly tableMappings: readonly TableMapping[];
}

export class TableSchemas {
  readonly #transport: ClickHouseTransport;
  /** The peer's database: where a mapping's `public` schema goes. */
  readonly #database: string;
  readonly #options: TableSchemaOptions;
  readonly #shapes = new Map<string, TableShape>();

  constructor(transport: ClickHouseTransport, database: string, options: TableSchemaOptions) {
    this.#transport = transport;
    this.#database = database;
    this.#options = options;
  }

  get #softDeleteColumn(): string | undefined {
    return this.#options.mirrorColumns.softDeleteColumn;
  }

  get #syncedAtColumn(): string {
    return this.#options.mirrorColumns.syncedAtColumn ?? defaultSyncedAtColumn;
  }

  /** The database and table name `table` is written to. */
  target(table: DestinationTable): { database: string; name: string } {
    // `public` (the default schema of a mapping) means the peer's database.
    const database = table.destination.schema === 'public' ? this.#database : table.destination.schema;
    return { database, name: table.destination.table };
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

  /** Creates the table if missing and adds what an existing one lacks. */
  async setup(table: DestinationTable, capabilities: ServerCapabilities): Promise<void> {
    const { database, name } = this.target(table);
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
    if (database !== this.#database) {
      await this.#transport.command(
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
    await this.#transport.command(
      `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(database)}.${quoteIdentifier(name)} (
           ${definitions.join(',\n           ')})
         ENGINE = ${engine} ORDER BY (${sorting.map(quoteIdentifier).join(', ')})`,
      `create table ${label}`,
    );
    // A table that existed already: add what it lacks (columns added at the
    // source while the mirror was stopped, a soft-delete column turned on).
    const shape = await this.#loadShape(table);
    const missing = table.columns.filter((column) => !shape.types.has(column.name));
    if (missing.length > 0) {
      const changes = missing.map((column) => ({ kind: 'add', column }) as const);
      await this.alter({ before: table, after: table, changes }, capabilities);
    }
    for (const [column, definition] of this.#metadataDefinitions(capabilities)) {
      if (shape.types.has(column)) continue;
      if (column === versionColumn || column === isDeletedColumn) {
        throw new EngineError(
          'schema_mismatch',
          `${label} exists without the ${column} column; drop it or let the mirror write another table`,
        );
      }
      await this.#transport.command(
        `ALTER TABLE ${shape.sql} ADD COLUMN ${quoteIdentifier(column)} ${definition}`,
        `add column ${column} to ${label}`,
        'schema_mismatch',
      );
    }
    this.#shapes.delete(label);
  }

  /** Why ClickHouse cannot make `alteration` on this table, or undefined (Destination.refuseAlteration). */
  refusal({ before, changes }: TableAlteration, capabilities: ServerCapabilities): string | undefined {
    const sorting = new Set(this.#sortingColumns(before));
    for (const change of changes) {
      // The sorting key orders the table's parts on disk: its columns can only be added to.
      if (change.kind === 'drop' && sorting.has(change.name))
        return `ClickHouse cannot drop ${change.name}, a column of the table's sorting key (ORDER BY)`;
      if (change.kind === 'rename' && sorting.has(change.from))
        return `ClickHouse cannot rename ${change.from}, a column of the table's sorting key (ORDER BY)`;
      if (change.kind === 'retype' && sorting.has(change.name))
        return `ClickHouse cannot change the type of ${change.name}, a column of the table's sorting key (ORDER BY)`;
      if (change.kind === 'rename' && !capabilities.renameColumn)
        return `ClickHouse ${capabilities.version.major}.${capabilities.version.minor} cannot rename columns (20.4 can)`;
    }
    return undefined;
  }

  /**
   * Makes the table follow its source's shape (Destination.alterColumns): each
   * change checked against the columns the server has, so one made already is
   * not made again; then the shape is read again.
   */
  async alter({ before, after, changes }: TableAlteration, capabilities: ServerCapabilities): Promise<void> {
    const shape = await this.#loadShape(before);
    const present = new Set(shape.types.keys());
    const sorting = new Set(this.#sortingColumns(after));
    for (const change of changes) {
      const command = (sql: string, what: string) =>
        this.#transport.command(
          `ALTER TABLE ${shape.sql} ${sql}`,
          `${what} of ${shape.label}`,
          'schema_mismatch',
        );
      switch (change.kind) {
        case 'add':
          // system.columns first: ADD COLUMN IF NOT EXISTS is newer than some servers.
          if (present.has(change.column.name)) break;
          await command(
            `ADD COLUMN ${this.#columnDefinition(change.column, capabilities, sorting)}`,
            `add column ${change.column.name}`,
          );
          present.add(change.column.name);
          break;
        case 'drop':
          if (!present.has(change.name)) break;
          await command(`DROP COLUMN ${quoteIdentifier(change.name)}`, `drop column ${change.name}`);
          present.delete(change.name);
          break;
        case 'rename':
          if (!present.has(change.from) || present.has(change.to)) break;
          await command(
            `RENAME COLUMN ${quoteIdentifier(change.from)} TO ${quoteIdentifier(change.to)}`,
            `rename column ${change.from}`,
          );
          present.delete(change.from);
          present.add(change.to);
          break;
        case 'retype': {
          const definition = this.#columnDefinition(change.after, capabilities, sorting);
          const current = shape.types.get(change.name);
          // A widening ClickHouse writes the same way (varchar(20) to (40): String) is nothing to do.
          if (current && definition === `${quoteIdentifier(change.name)} ${formatChType(current)}`) break;
          await command(`MODIFY COLUMN ${definition}`, `change the type of column ${change.name}`);
          break;
        }
      }
    }
    await this.#loadShape(after);
  }

  async state(table: DestinationTable): Promise<DestinationTableState> {
    const { database, name } = this.target(table);
    const label = `${database}.${name}`;
    const found = await this.#transport.rows<{ name: string }>(
      `SELECT name FROM system.tables WHERE database = ${stringLiteral(database)} AND name = ${stringLiteral(name)}`,
      `look up ${label}`,
    );
    if (found.length === 0) return 'absent';
    // count() of a MergeTree table is read from part metadata (18.16 has no
    // system.tables.total_rows); rows marked deleted still count as rows.
    const counted = await this.#transport.rows<{ rows: string }>(
      `SELECT toString(count()) AS rows FROM ${quoteIdentifier(database)}.${quoteIdentifier(name)}`,
      `count the rows of ${label}`,
    );
    return (counted[0]?.rows ?? '0') === '0' ? 'empty' : 'populated';
  }

  async #loadShape(table: DestinationTable): Promise<TableShape> {
    const { database, name } = this.target(table);
    const label = `${database}.${name}`;
    const rows = await this.#transport.rows<{ name: string; type: string; sorting: number | string }>(
      `SELECT name, type, is_in_sorting_key AS sorting FROM system.columns WHERE database = ${stringLiteral(database)} AND table = ${stringLiteral(name)}`,
      `read the columns of ${label}`,
    );
    if (rows.length === 0) {
      throw new EngineError('schema_mismatch', `destination table ${label} does not exist`);
    }
    const shape: TableShape = {
      sql: `${quoteIdentifier(database)}.${quoteIdentifier(name)}`,
      label,
      types: new Map(rows.map((row) => [row.name, parseChType(row.type)])),
      sortingKey: new Set(rows.filter((row) => Number(row.sorting) === 1).map((row) => row.name)),
    };
    this.#shapes.set(label, shape);
    return shape;
  }

  /** Drops the cached shape of `table` (created again or swapped). */
  forget(table: DestinationTable): void {
    const { database, name } = this.target(table);
    this.forgetName(database, name);
  }

  forgetName(database: string, name: string): void {
    this.#shapes.delete(`${database}.${name}`);
  }

  /** The cached shape of the table, read from the server the first time. */
  async shape(table: DestinationTable): Promise<TableShape> {
    const { database, name } = this.target(table);
    return this.#shapes.get(`${database}.${name}`) ?? this.#loadShape(table);
  }

  async writer(table: DestinationTable): Promise<TableWriter> {
    const shape = await this.shape(table);
    const limits = await this.#transport.limits();
    const typeOf = (column: string): ChType => {
      const type = shape.types.get(column);
      if (!type)
        throw new EngineError('schema_mismatch', `destination table ${shape.label} has no column ${column}`);
      return type;
    };
    const encoders = table.columns.map((column) =>
      columnEncoder(column.name, sourceColumnType(column), typeOf(column.name), limits),
    );
    // A sorting-key column the source no longer has (dropped or renamed, then
    // the table loaded again: the resync of a change refused above) would be
    // written as its type's zero in every row, and ReplacingMergeTree would
    // keep one row of all those that share the rest of the key.
    const mapped = new Set(table.columns.map((column) => column.name));
    const lost = [...shape.sortingKey].filter((name) => !mapped.has(name));
    if (lost.length > 0) {
      throw new EngineError(
        'schema_mismatch',
        `destination table ${shape.label} is ordered by ${lost.join(', ')}, which ${formatTableName(table.source)} no longer has; ClickHouse cannot change a table's sorting key: drop ${shape.label} so that the mirror creates it in the source's shape, then resync the table`,
      );
    }
    const keyPositions = keyIndexes(table);
    if (keyPositions.length === 0 || keyPositions.includes(-1)) {
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
    const insertInto = `INSERT INTO ${shape.sql} (${insertColumns.map(quoteIdentifier).join(', ')})`;
    return {
      shape,
      columnNames: table.columns.map((column) => column.name),
      encoders,
      rows: new RowWriter(table, shape.label, encoders, softDeleteColumn !== undefined),
      keyIndexes: keyPositions,
      extraSortingIndexes,
      softDeleteColumn,
      insertSql: `${insertInto} FORMAT RowBinary`,
    };
  }
}

// The mirror's script as a stage of the pipeline, for a table destination
// (PostgreSQL, ClickHouse, Snowflake): every row goes through onRecord between
// the change applier's decoding and the destination's buffer, and every row
// of the initial load between the source's COPY and the destination's write.
// docs/scripts.md is the user's reference; a Kafka destination keeps the
// script's message form (connectors/kafka/script-records.ts) and is not wrapped.
//
// Contract (a Destination wrapping another, `inner`):
// - Its changeBuffer is a ChangeList, so the pipeline holds each change of a
//   scripted mirror as a RowChange; syncBatch runs the batch's changes
//   through the script in runs of scriptBatchRecords (one crossing of the
//   script's thread per run), in order, and hands `inner` the batch with the
//   changes kept, as edited, in its own buffer, so it writes them exactly as
//   it writes an unscripted batch's. A batch whose
//   changes were all dropped still reaches `inner`, which stores its checkpoint.
// - writeSnapshotPartition reads the partition's COPY text, runs its rows
//   through the script and gives `inner` the kept rows as COPY text; it
//   resolves with the rows `inner` wrote.
// - What a script may do to a row: change the values of the table's columns
//   that are not key columns, keep the row or drop it. A value for a column
//   the table does not have (a script cannot add columns), a changed key
//   column, a changed delete or truncate, or a script failure fails the batch
//   or partition with EngineError 'script' (retry manual: fix the script,
//   resume the mirror); `inner` then gets nothing of it.
// - setupTables loads the script after `inner`'s setup, so a broken script
//   fails the mirror before any data moves; close stops the script's thread.
//   Every other method is `inner`'s.
// A mirror without a script has no stage: its hot path is the destination's own.
import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { LogLevel } from '../catalog/catalog.ts';
import { rowCopyLine } from '../connectors/copy-lines.ts';
import { copyTextRowBatches } from '../connectors/copy-text.ts';
import type { Destination, DestinationTableState, ShadowTables } from '../connectors/destination.ts';
import {
  type ChangeBatch,
  type ChangeBuffer,
  ChangeList,
  type Checkpoint,
  type DestinationTable,
  isUnchangedToast,
  keyIndexes,
  type RowChange,
  type RowImage,
  type TableAlteration,
  type TableChanges,
  type TupleCell,
} from '../connectors/records.ts';
import { rowOfCells } from '../connectors/rows.ts';
import { EngineError } from '../errors.ts';
import { formatLsn } from '../model/lsn.ts';
import { formatTableName } from '../resources/mirror.ts';
import type { ScriptSource } from '../resources/script.ts';
import type { LuaInput, SandboxLimits } from '../scripting/lua-vm.ts';
import { RecordScript, type RowEdit, scriptBatchRecords } from '../scripting/record-script.ts';

export interface ScriptStageOptions {
  readonly script: ScriptSource;
  readonly logger: Logger;
  /** Where script `print` lines go (the mirror's logs); the process log when absent. */
  readonly log?: ((level: LogLevel, message: string) => void) | undefined;
  readonly limits?: SandboxLimits | undefined;
}

/** `destination` with the mirror's script applied to its rows (see the contract above). */
export function withScriptStage<Held extends ChangeBuffer>(
  destination: Destination<Held>,
  options: ScriptStageOptions,
): Destination<ChangeList> {
  return new ScriptStage(destination, options);
}

export class ScriptStage<Held extends ChangeBuffer> implements Destination<ChangeList> {
  readonly #inner: Destination<Held>;
  readonly #script: RecordScript;

  /** `inner`'s: the stage hands `inner` each batch's swaps with its changes. */
  readonly shadowTables: ShadowTables | undefined;

  constructor(inner: Destination<Held>, options: ScriptStageOptions) {
    this.#inner = inner;
    this.shadowTables = inner.shadowTables;
    this.#script = new RecordScript(options.script, {
      logger: options.logger,
      log: options.log,
      limits: options.limits,
      form: 'rows',
    });
  }

  check(): Promise<{ version: string }> {
    return this.#inner.check();
  }

  async close(): Promise<void> {
    await Promise.all([this.#script.close(), this.#inner.close()]);
  }

  async setupTables(tables: readonly DestinationTable[]): Promise<void> {
    await this.#inner.setupTables(tables);
    await this.#script.ready();
  }

  tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]> {
    return this.#inner.tableStates(tables);
  }

  truncateTables(tables: readonly DestinationTable[]): Promise<void> {
    return this.#inner.truncateTables(tables);
  }

  async writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number> {
    await this.#script.ready();
    const script = this.#script;
    let failure: unknown;
    async function* keptLines(): AsyncGenerator<Buffer> {
      try {
        for await (const rows of copyTextRowBatches(copyText, table)) {
          for (let start = 0; start < rows.length; start += scriptBatchRecords) {
            const run = rows.slice(start, start + scriptBatchRecords);
            const edits = await script.transformRows(run.map((row) => rowRecord(table, 'snapshot', row)));
            const lines: Buffer[] = [];
            for (const [index, row] of run.entries()) {
              const edited = editedRow(script.name, table, row, edits[index]);
              if (edited) lines.push(rowCopyLine(table, rowOfCells(edited)));
            }
            if (lines.length > 0) yield Buffer.concat(lines);
          }
        }
      } catch (error) {
        failure = error;
        throw error;
      }
    }
    try {
      return await this.#inner.writeSnapshotPartition(
        table,
        Readable.from(keptLines(), { objectMode: false }),
      );
    } catch (error) {
      // The inner destination reports what broke its read as its own failure: the script's is the cause.
      throw failure ?? error;
    }
  }

  /** The changes as objects: each goes through the script at the write. */
  changeBuffer(): ChangeList {
    return new ChangeList();
  }

  async syncBatch(batch: ChangeBatch<ChangeList>): Promise<void> {
    await this.#script.ready();
    const tables: TableChanges<Held>[] = [];
    for (const {
      table,
      held: { changes },
    } of batch.tables) {
      const kept: RowChange[] = [];
      for (let start = 0; start < changes.length; start += scriptBatchRecords) {
        const run = changes.slice(start, start + scriptBatchRecords);
        const edits = await this.#script.transformRows(run.map((change) => changeRecord(table, change)));
        for (const [index, change] of run.entries()) {
          const edited = editedChange(this.#script.name, table, change, edits[index]);
          if (edited) kept.push(edited);
        }
      }
      const held = this.#inner.changeBuffer(table);
      for (const change of kept) held.add(change);
      tables.push({ table, held });
    }
    await this.#inner.syncBatch({ ...batch, tables });
  }

  readCheckpoint(mirror: string): Promise<Checkpoint | undefined> {
    return this.#inner.readCheckpoint(mirror);
  }

  refuseAlteration(alteration: TableAlteration): Promise<string | undefined> {
    return this.#inner.refuseAlteration(alteration);
  }

  alterColumns(alteration: TableAlteration): Promise<void> {
    return this.#inner.alterColumns(alteration);
  }

  removeCheckpoint(mirror: string): Promise<void> {
    return this.#inner.removeCheckpoint(mirror);
  }
}

type RowKind = 'snapshot' | 'insert' | 'update' | 'delete' | 'truncate';

/** A change's record as a table destination's script sees it (docs/scripts.md, "The record"). */
export function changeRecord(table: DestinationTable, change: RowChange): LuaInput {
  switch (change.kind) {
    case 'insert':
      return rowRecord(table, 'insert', change.newRow.cells(), null, change);
    case 'update':
      return rowRecord(table, 'update', change.newRow.cells(), change.oldKey?.cells() ?? null, change);
    case 'delete':
      return rowRecord(table, 'delete', null, change.oldKey.cells(), change);
    case 'truncate':
      return rowRecord(table, 'truncate', null, null, change);
  }
}

/** The record of a row: its values as text (json.null for NULL), the change's transaction when it has one. */
export function rowRecord(
  table: DestinationTable,
  kind: RowKind,
  newRow: RowImage | null,
  oldRow: RowImage | null = null,
  change?: RowChange,
): LuaInput {
  const unchanged: Record<string, boolean> = {};
  const after = newRow ? rowValues(table, newRow, false, unchanged) : undefined;
  const before = oldRow ? rowValues(table, oldRow, isKeyOnly(table, oldRow)) : undefined;
  const row = after ?? before;
  const transaction = change?.transaction;
  return {
    kind,
    source: { schema: table.source.schema, table: table.source.table },
    target: formatTableName(table.destination),
    new: after,
    old: before,
    row,
    key: row && table.keyColumns.length > 0 ? keyText(table, row) : undefined,
    checkpoint: transaction?.commitLsn,
    lsn: transaction ? formatLsn(transaction.commitLsn) : undefined,
    commit_time: transaction ? isoMicros(transaction.commitTimeMicros) : undefined,
    xid: transaction?.xid,
    unchanged_columns: unchanged,
  } as LuaInput;
}

function rowValues(
  table: DestinationTable,
  image: RowImage,
  keyOnly: boolean,
  unchanged?: Record<string, boolean>,
): Record<string, string | null> {
  const values: Record<string, string | null> = {};
  const keys = keyOnly ? new Set(table.keyColumns) : undefined;
  for (const [index, column] of table.columns.entries()) {
    if (keys && !keys.has(column.name)) continue;
    const cell = image[index] ?? null;
    if (cell !== null && isUnchangedToast(cell)) {
      if (unchanged) unchanged[column.name] = true;
    } else values[column.name] = textOf(table, cell);
  }
  return values;
}

function textOf(table: DestinationTable, cell: string | Buffer | null): string | null {
  if (cell === null || typeof cell === 'string') return cell;
  throw new EngineError(
    'decode',
    `binary tuple value in ${formatTableName(table.source)}; text format expected`,
  );
}

/** An old image of the key columns alone: pgoutput sends a key-only image's other columns as nulls. */
function isKeyOnly(table: DestinationTable, image: RowImage): boolean {
  const keys = keyIndexes(table);
  if (keys.length === 0) return false;
  return image.every((cell, index) => cell === null || keys.includes(index));
}

function keyText(table: DestinationTable, row: Record<string, string | null>): string {
  const key: Record<string, string | null> = {};
  for (const name of table.keyColumns) key[name] = row[name] ?? null;
  return JSON.stringify(key);
}

/** Microseconds since the epoch as ISO 8601 UTC with six decimals, as the Kafka record writes commit_time. */
function isoMicros(micros: bigint): string {
  const millis = micros / 1000n;
  const fraction = String(((micros % 1_000_000n) + 1_000_000n) % 1_000_000n).padStart(6, '0');
  return `${new Date(Number(millis)).toISOString().slice(0, 19)}.${fraction}Z`;
}

const columnIndexes = new WeakMap<DestinationTable, ReadonlyMap<string, number>>();

function columnIndex(table: DestinationTable, name: string): number | undefined {
  let indexes = columnIndexes.get(table);
  if (!indexes) {
    indexes = new Map(table.columns.map((column, index) => [column.name, index]));
    columnIndexes.set(table, indexes);
  }
  return indexes.get(name);
}

/** A change as the script left it, or undefined when it dropped it. Throws EngineError 'script'. */
export function editedChange(
  scriptName: string,
  table: DestinationTable,
  change: RowChange,
  edit: RowEdit | undefined,
): RowChange | undefined {
  if (!edit || edit.drop) return undefined;
  if (Object.keys(edit.values).length === 0) return change;
  switch (change.kind) {
    case 'insert':
    case 'update': {
      const newRow = editedRow(scriptName, table, change.newRow.cells(), edit);
      return newRow ? { ...change, newRow: rowOfCells(newRow) } : undefined;
    }
    case 'delete':
    case 'truncate':
      throw new EngineError(
        'script',
        `script ${scriptName}: onRecord changed a ${change.kind} of ${formatTableName(table.source)}; a script may keep it (true) or drop it (nil), not change it`,
      );
  }
}

/** A new row as the script left it, or undefined when it dropped it. Throws EngineError 'script'. */
export function editedRow<Cell extends TupleCell>(
  scriptName: string,
  table: DestinationTable,
  row: readonly Cell[],
  edit: RowEdit | undefined,
): readonly (Cell | string | null)[] | undefined {
  if (!edit || edit.drop) return undefined;
  const names = Object.keys(edit.values);
  if (names.length === 0) return row;
  const edited: (Cell | string | null)[] = [...row];
  const tableName = formatTableName(table.source);
  for (const name of names) {
    const index = columnIndex(table, name);
    if (index === undefined) {
      throw new EngineError(
        'script',
        `script ${scriptName}: onRecord set ${JSON.stringify(name.slice(0, 100))}, which is not a column of ${tableName}; a script cannot add columns`,
      );
    }
    if (table.keyColumns.includes(name)) {
      throw new EngineError(
        'script',
        `script ${scriptName}: onRecord changed key column ${name} of ${tableName}; a script cannot change a row's key`,
      );
    }
    edited[index] = edit.values[name] ?? null;
  }
  return edited;
}

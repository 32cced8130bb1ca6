// A Kafka mirror's script in its message form (docs/scripts.md): each change's
// record, as the script sees it, goes to onRecord, whose return values are the
// messages the change becomes (script-messages.ts says how). A record carries
// the change's default key and value (message-json.ts, the one encoder of the
// default message), which a script's message falls back on, and its document,
// the same message as an object whose values come from the same per-value
// rendering (message-format.ts, renderText).
//
// Contract of a RecordSink: records are added in the order their messages
// must be sent, and reach `deliver` in that order. Without a script each goes
// on at once with no messages (the default one); with one they wait in runs
// of scriptBatchRecords, so the script's thread is crossed once per run, and
// `flush` delivers what still waits. `add` returns a promise only when the
// caller must wait (a run went through the script, or `deliver` waits).
// A script failure rejects with the EngineError 'script' of record-script.ts.
import type { LuaInput } from '../../scripting/lua-vm.ts';
import { type RecordScript, type ScriptMessage, scriptBatchRecords } from '../../scripting/record-script.ts';
import {
  isUnchangedToast,
  type Row,
  type RowChange,
  type RowImage,
  type SourceTransaction,
} from '../records.ts';
import { rowOfCells } from '../rows.ts';
import {
  binaryValue,
  isKeyOnly,
  type RecordDocument,
  type RecordKind,
  type Rendered,
  type RenderedRow,
  renderCell,
  type TableFormat,
  transactionFields,
} from './message-format.ts';
import { MessageJson } from './message-json.ts';

/** What one change becomes before a script or the default format decides its message. */
export interface ChangeRecord {
  readonly kind: RecordKind;
  /** The default message value (message-json.ts). */
  readonly json: string;
  /** The default message value as an object, built when first read (by a script). */
  readonly document: RecordDocument;
  /** The row's key columns as a JSON object in key order; null when the table has no key or for a truncate. */
  readonly key: string | null;
  /** Commit LSN as a number, for scripts' `checkpoint`. */
  readonly commitLsn: bigint | null;
}

export function snapshotRecord(format: TableFormat, row: readonly (string | null)[]): ChangeRecord {
  return new RenderedRecord(format, 'snapshot', undefined, null, rowOfCells(row));
}

export function changeRecord(format: TableFormat, change: RowChange): ChangeRecord {
  switch (change.kind) {
    case 'insert':
      return change.loaded
        ? new RenderedRecord(format, 'snapshot', undefined, null, change.newRow)
        : new RenderedRecord(format, 'insert', change, null, change.newRow);
    case 'update':
      return new RenderedRecord(format, 'update', change, change.oldKey, change.newRow);
    case 'delete':
      return new RenderedRecord(format, 'delete', change, change.oldKey, null);
    case 'truncate':
      return new RenderedRecord(format, 'truncate', change, null, null);
  }
}

/**
 * A change or snapshot row and the images it carries: its default key and
 * value are written at once by the table's encoder (a partitioner and the
 * script read the key; the value is written with it, for one take of the
 * row); the document is rendered on first read.
 */
class RenderedRecord implements ChangeRecord {
  readonly kind: RecordKind;
  readonly key: string | null;
  readonly json: string;
  readonly commitLsn: bigint | null;
  readonly #format: TableFormat;
  readonly #transaction: SourceTransaction | undefined;
  readonly #before: Row | null;
  readonly #after: Row | null;
  #document: RecordDocument | undefined;

  constructor(
    format: TableFormat,
    kind: RecordKind,
    change: RowChange | undefined,
    before: Row | null,
    after: Row | null,
  ) {
    this.kind = kind;
    this.commitLsn = change ? change.transaction.commitLsn : null;
    this.#format = format;
    this.#transaction = change?.transaction;
    this.#before = before;
    this.#after = after;
    // The table's shared encoder: a take and its writes run at once.
    const writer = MessageJson.of(format);
    if (change) writer.take(change);
    else writer.takeSnapshotRow(after as Row);
    this.key = writer.keyText();
    this.json = writer.valueText();
  }

  get document(): RecordDocument {
    this.#document ??= this.#renderDocument();
    return this.#document;
  }

  #renderDocument(): RecordDocument {
    const format = this.#format;
    const transaction = this.#transaction;
    const rendered = transaction ? transactionFields(transaction) : undefined;
    const before = this.#before ? renderRow(format, this.#before.cells(), 'old').row : null;
    const after = this.#after ? renderRow(format, this.#after.cells(), 'full') : undefined;
    return {
      kind: this.kind,
      source: format.source,
      target: format.topic,
      lsn: rendered ? rendered.lsn : null,
      commit_time: rendered ? rendered.commitTime : null,
      xid: transaction ? transaction.xid : null,
      old: before,
      new: after ? after.row : null,
      unchanged_columns: after ? after.unchanged : [],
    };
  }
}

/** Renders a row image for the document (`which` as in isKeyOnly), each value by renderCell. */
function renderRow(
  format: TableFormat,
  image: RowImage,
  which: 'full' | 'old',
): { row: RenderedRow; unchanged: string[] } {
  const { columns } = format.table;
  const keyOnly = which === 'old' && isKeyOnly(format, (index) => (image[index] ?? null) === null);
  const row: Record<string, Rendered> = {};
  const unchanged: string[] = [];
  for (let index = 0; index < columns.length; index++) {
    const column = columns[index];
    if (!column) continue;
    if (keyOnly && !format.isKey[index]) continue;
    const cell = image[index] ?? null;
    if (cell === null) row[column.name] = null;
    else if (isUnchangedToast(cell)) unchanged.push(column.name);
    else if (typeof cell === 'string') row[column.name] = renderCell(format, index, cell);
    else throw binaryValue(format);
  }
  return { row, unchanged };
}

/** Hands one record on with the messages a script asked for (undefined: no script, the default message). */
export type DeliverRecord = (
  format: TableFormat,
  record: ChangeRecord,
  wanted: readonly ScriptMessage[] | undefined,
) => Promise<void> | undefined;

export interface RecordSink {
  add(format: TableFormat, record: ChangeRecord): Promise<void> | undefined;
  flush(): Promise<void>;
}

export function recordSink(script: RecordScript | undefined, deliver: DeliverRecord): RecordSink {
  if (!script) {
    return { add: (format, record) => deliver(format, record, undefined), flush: async () => {} };
  }
  let waiting: { format: TableFormat; record: ChangeRecord }[] = [];
  const flush = async () => {
    if (waiting.length === 0) return;
    const run = waiting;
    waiting = [];
    const wanted = await script.transform(run.map(({ record }) => luaRecord(record)));
    for (const [index, { format, record }] of run.entries()) {
      const delivering = deliver(format, record, wanted[index] ?? []);
      if (delivering) await delivering;
    }
  };
  return {
    add: (format, record) => {
      waiting.push({ format, record });
      return waiting.length >= scriptBatchRecords ? flush() : undefined;
    },
    flush,
  };
}

/** The record as a script sees it (docs/scripts.md). */
export function luaRecord(record: ChangeRecord): LuaInput {
  const { document } = record;
  const unchanged: Record<string, boolean> = {};
  for (const name of document.unchanged_columns) unchanged[name] = true;
  return {
    kind: document.kind,
    source: document.source,
    target: document.target,
    old: document.old ?? undefined,
    new: document.new ?? undefined,
    row: document.new ?? document.old ?? undefined,
    key: record.key ?? undefined,
    checkpoint: record.commitLsn ?? undefined,
    lsn: document.lsn ?? undefined,
    commit_time: document.commit_time ?? undefined,
    xid: document.xid ?? undefined,
    unchanged_columns: unchanged,
  } as LuaInput;
}

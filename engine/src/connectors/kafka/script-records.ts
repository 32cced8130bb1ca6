// A Kafka mirror's script in its message form (docs/scripts.md): each change's
// record, as the script sees it, goes to onRecord, whose return values are the
// messages the change becomes (script-messages.ts says how).
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
import type { ChangeRecord, TableFormat } from './message-format.ts';

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

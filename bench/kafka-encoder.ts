// CPU a row of the Kafka destination's default message encoder, two trees
// compared in one process, by hand: `node bench/kafka-encoder.ts <tree>
// <other tree> [rounds] [case prefixes, comma-separated]`, each tree a
// checkout (a worktree of the commit before a change, and this one). Not a
// test: it prints figures, asserts nothing, needs no services.
//
// Each round holds 100,000 rows of bench/kafka.ts's table through each case,
// the two trees alternating (which goes first alternates too), and reads the
// process's CPU time around each; the first two rounds are left out. Per case
// and tree: the median ns a row and the range.
//
//   insert (TupleData)     HeldMessages.add of inserts over their pgoutput bytes
//   snapshot (COPY line)   HeldMessages.addSnapshotLines of 64 KiB COPY text blocks
//   update with old key    an update whose key changed: old key decoded, new row bytes
//   delete (old key)       a delete's decoded old key
//   record (…)             a script's record: its default key and value as text,
//                          from decoded cells and from bytes; "bytes" adds the
//                          Buffer.from the producer is given them with
const [baseTree, afterTree] = [process.argv[2] as string, process.argv[3] as string];
if (!baseTree || !afterTree)
  throw new Error('usage: node bench/kafka-encoder.ts <tree> <other tree> [rounds] [cases]');
const rounds = Number(process.argv[4] ?? 10);
const only = process.argv[5]?.split(',');
const { createHash } = await import('node:crypto');
async function load(tree: string) {
  const k = `${tree}/engine/src/connectors/kafka`;
  const { HeldMessages } = await import(`${k}/held-messages.ts`);
  const mf = await import(`${k}/message-format.ts`);
  const sr = await import(`${k}/script-records.ts`);
  // Records moved from message-format.ts to script-records.ts when the encoders became one.
  const { rowOfCells, TupleDataRow } = await import(`${tree}/engine/src/connectors/rows.ts`);
  const { tupleData } = await import(`${tree}/test/support/wire-tuple.ts`);
  const { typedColumn } = await import(`${tree}/test/support/text-table.ts`);
  return {
    HeldMessages,
    tableFormat: mf.tableFormat,
    changeRecord: mf.changeRecord ?? sr.changeRecord,
    rowOfCells,
    TupleDataRow,
    tupleData,
    typedColumn,
  };
}
const trees = { before: await load(baseTree), after: await load(afterTree) };
console.log(`bench kafka-encoder: before ${baseTree}, after ${afterTree}, ${rounds} rounds`);
const n = 100_000;
const cellsOf = (g: number) => [
  String(g),
  String(g % 1000),
  (g * 0.01).toFixed(2),
  `note ${createHash('md5').update(String(g)).digest('hex')}`,
  `2026-12-02 01:${String(g % 60).padStart(2, '0')}:33.${String(g % 1_000_000).padStart(6, '0')}+00`,
];
const rows = Array.from({ length: n }, (_, i) => cellsOf(i + 1));
const transaction = { xid: 7, commitLsn: 0x1000n, commitTimeMicros: 1_767_225_600_000_000n };
const blocks: Buffer[] = [];
{
  let lines: string[] = [];
  let size = 0;
  for (const r of rows) {
    const l = r.join('\t');
    lines.push(l);
    size += l.length + 1;
    if (size >= 65536) {
      blocks.push(Buffer.from(`${lines.join('\n')}\n`));
      lines = [];
      size = 0;
    }
  }
  if (lines.length) blocks.push(Buffer.from(`${lines.join('\n')}\n`));
}
function casesOf(t: Awaited<ReturnType<typeof load>>) {
  const c = t.typedColumn;
  const table = {
    source: { schema: 'public', table: 'bench_kafka' },
    destination: { schema: 'public', table: 'bench_kafka' },
    columns: [
      c('id', 20),
      c('account', 23),
      c('amount', 1700, ((12 << 16) | 2) + 4),
      c('note', 25),
      c('created', 1184),
    ],
    keyColumns: ['id'],
  };
  const format = t.tableFormat(table);
  const bytes = rows.map((r) => t.tupleData(r));
  const hold = (changes: unknown[]) => {
    let held = new t.HeldMessages(format);
    let k = 0;
    for (const ch of changes) {
      held.add(ch);
      if (++k % 10_000 === 0) held = new t.HeldMessages(format);
    }
  };
  const cellInserts = () => rows.map((r) => ({ transaction, kind: 'insert', newRow: t.rowOfCells(r) }));
  const byteInserts = () =>
    bytes.map((b) => ({ transaction, kind: 'insert', newRow: new t.TupleDataRow(b, 5) }));
  /** A script's records of the changes, their key and value read as text (or as the bytes the producer gets). */
  const records = (asBytes: boolean) => (changes: unknown[]) => {
    let total = 0;
    for (const change of changes) {
      const record = t.changeRecord(format, change);
      total += asBytes
        ? (record.key === null ? 0 : Buffer.from(record.key).length) + Buffer.from(record.json).length
        : (record.key?.length ?? 0) + record.json.length;
    }
    if (total === 0) throw new Error('no records');
  };
  return [
    {
      name: 'insert (TupleData)',
      make: byteInserts,
      run: hold,
    },
    {
      name: 'snapshot (COPY line)',
      make: () => blocks,
      run: (bs: Buffer[]) => {
        for (const b of bs) new t.HeldMessages(format).addSnapshotLines(b);
      },
    },
    {
      name: 'update with old key',
      make: () =>
        bytes.map((b, i) => ({
          transaction,
          kind: 'update',
          oldKey: t.rowOfCells([String(i + 1_000_000), null, null, null, null]),
          newRow: new t.TupleDataRow(b, 5),
        })),
      run: hold,
    },
    {
      name: 'delete (old key)',
      make: () =>
        rows.map((r) => ({
          transaction,
          kind: 'delete',
          oldKey: t.rowOfCells([r[0], null, null, null, null]),
        })),
      run: hold,
    },
    { name: 'record (cells)', make: cellInserts, run: records(false) },
    { name: 'record (TupleData)', make: byteInserts, run: records(false) },
    { name: 'record bytes (cells)', make: cellInserts, run: records(true) },
  ].filter((x) => !only || only.some((o) => x.name.startsWith(o)));
}
const cases = { before: casesOf(trees.before), after: casesOf(trees.after) };
const results: Record<'before' | 'after', Record<string, number[]>> = { before: {}, after: {} };
for (let round = 0; round < rounds; round++) {
  const order = round % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const);
  for (let i = 0; i < cases.before.length; i++) {
    for (const side of order) {
      const c = cases[side][i] as { name: string; make: () => unknown[]; run: (x: never) => void };
      const changes = c.make();
      const start = process.cpuUsage();
      c.run(changes as never);
      const used = process.cpuUsage(start);
      const figures = results[side][c.name] ?? [];
      figures.push(((used.user + used.system) * 1000) / n);
      results[side][c.name] = figures;
    }
  }
}
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2
    ? (s[(s.length - 1) / 2] as number)
    : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2;
};
for (const name of Object.keys(results.before)) {
  const f = (side: 'before' | 'after') => {
    const w = (results[side][name] as number[]).slice(2);
    return `${Math.round(median(w))} (${Math.round(Math.min(...w))}–${Math.round(Math.max(...w))})`;
  };
  console.log(`${name.padEnd(22)} before ${f('before').padEnd(20)} after ${f('after')}  ns/row`);
}

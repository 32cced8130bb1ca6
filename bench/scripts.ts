// A script's cost per record, by hand: `node bench/scripts.ts`. Needs no test
// service. Not a test: it prints figures, asserts nothing.
//
// Runs the Kafka benchmark's script (bench/kafka.ts) over BENCH_ROWS prepared
// records (default 50,000) in runs of scriptBatchRecords, as the destination
// does, three rounds on one script thread (the first includes its warm-up).
import pino from 'pino';
import { RecordScript, scriptBatchRecords } from '../engine/src/scripting/record-script.ts';

const rowCount = Number(process.env.BENCH_ROWS ?? 50_000);
const source = `
function onRecord(r)
  if r.kind == 'delete' then return nil end
  return { topic = 'out', key = tostring(r.row.id), value = json.encode({ id = r.row.id, account = r.row.account, amount = r.row.amount, note = r.row.note }) }
end`;

const records = Array.from({ length: rowCount }, (_, index) => {
  const row = {
    id: index,
    account: `account-${index % 1000}`,
    amount: `${index}.25`,
    note: 'a note of some length',
    created: '2026-01-01T00:00:00Z',
  };
  return {
    kind: 'insert',
    source: { schema: 'public', table: 'payments' },
    target: 'payments',
    new: row,
    row,
    key: `{"id":${index}}`,
    checkpoint: 123_456_789 + index,
    lsn: '0/75BCD15',
    commit_time: '2026-01-01T00:00:00.123456Z',
    xid: 1234,
    unchanged_columns: {},
  };
});

const script = new RecordScript({ name: 'bench', lang: 'lua', source }, { logger: pino({ level: 'warn' }) });
await script.ready();
try {
  for (let round = 1; round <= 3; round++) {
    const started = performance.now();
    for (let first = 0; first < records.length; first += scriptBatchRecords) {
      await script.transform(records.slice(first, first + scriptBatchRecords));
    }
    const elapsedMs = performance.now() - started;
    console.log(
      `round ${round}: ${((elapsedMs * 1000) / rowCount).toFixed(1)} µs/record, ${Math.round(rowCount / (elapsedMs / 1000))} records/s`,
    );
  }
} finally {
  await script.close();
}

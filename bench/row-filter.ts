// The throughput cost of a row filter the engine applies (PostgreSQL 13 and
// 14, where the publication cannot): one transaction of `rows` inserts
// streamed into PostgreSQL by an in-process mirror, timed from its commit to
// the last row at the destination, without a filter and with one every row
// passes (the rows written are the same, so the difference is the
// evaluation's). Run by hand against the test servers (docs/engine.md, Row
// filters):
//   TRIBUTARY_TEST_SOURCE_POSTGRES=13 node bench/row-filter.ts [rows] [rounds]
import { randomSuffix, waitFor } from '../test/support/databases.ts';
import { createHarness, startMirror } from '../test/support/mirror-harness.ts';
import { sourcePostgres } from '../test/support/testenv.ts';

const rows = Number(process.argv[2] ?? 200_000);
const rounds = Number(process.argv[3] ?? 3);
const harness = await createHarness('bench_rowfilter');
const results: Record<string, number[]> = { none: [], 'id > 0': [], 'id % 2 = 0': [] };
try {
  for (let round = 0; round < rounds; round++) {
    for (const filter of Object.keys(results)) {
      const table = `t_${randomSuffix().replaceAll('-', '_')}`;
      await harness.source.client.query(
        `CREATE TABLE ${table} (id bigint PRIMARY KEY, region text, amount int, note text)`,
      );
      const name = `bench-${table.replaceAll('_', '-')}`;
      const mirror = startMirror(harness, {
        name,
        tableMappings: [
          {
            source: { schema: 'public', table },
            destination: { schema: 'public', table },
            ...(filter === 'none' ? {} : { rowFilter: filter }),
          },
        ],
        doInitialSnapshot: false,
        idleTimeoutSeconds: 1,
      });
      try {
        await waitFor(
          async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
          60_000,
          'running',
        );
        await harness.destination.client.query(`SELECT 1 FROM ${table} LIMIT 0`).catch(() => undefined);
        const started = performance.now();
        await harness.source.client.query(
          `INSERT INTO ${table} SELECT g, 'eu', g % 100, 'note ' || g FROM generate_series(1, ${rows}) g`,
        );
        const expected = filter === 'id % 2 = 0' ? Math.floor(rows / 2) : rows;
        await waitFor(
          async () =>
            Number(
              (
                await harness.destination.client
                  .query(`SELECT count(*) AS n FROM ${table}`)
                  .catch(() => undefined)
              )?.rows[0]?.n ?? 0,
            ) >= expected,
          600_000,
          'the rows',
        );
        results[filter]?.push(rows / ((performance.now() - started) / 1000));
      } finally {
        await mirror.stop();
      }
    }
  }
} finally {
  await harness.close();
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
console.log(
  `PostgreSQL ${sourcePostgres.major} source, ${rows} inserts in one transaction, ${rounds} rounds`,
);
for (const [filter, values] of Object.entries(results)) {
  console.log(
    `${filter.padEnd(12)} median ${Math.round(median(values))} source rows/s (${values.map((v) => Math.round(v)).join(', ')})`,
  );
}

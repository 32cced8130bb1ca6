// The `shaped` source table the schema change suites follow into each
// destination (test/e2e/schema-changes-destinations.test.ts,
// schema-changes-restarts.test.ts): made with 300 rows, then changed column by
// column with rows written before and after each change, and read back as
// text cells to compare with what a destination holds.
import { expect } from 'vitest';
import { waitFor } from './databases.ts';
import type { Harness } from './mirror-harness.ts';

export type SourceClient = Harness['source']['client'];

/** The source table every destination follows, 300 rows. */
export async function createShaped(client: SourceClient): Promise<void> {
  await client.query(
    `CREATE TABLE shaped (id int PRIMARY KEY, v text, a int, b varchar(10), c text, gone text)`,
  );
  await client.query(
    `INSERT INTO shaped SELECT g, 'v' || g, g, 'b' || g, 'c' || g, 'gone' FROM generate_series(1, 300) g`,
  );
}

export interface ShapedChange {
  readonly ddl: string;
  /** Rows written under the new shape. */
  readonly rows: string;
}

/** A column added, one renamed, one dropped, int widened to bigint and varchar(10) to varchar(40). */
export const changes: readonly ShapedChange[] = [
  { ddl: `ALTER TABLE shaped ADD COLUMN e text`, rows: `UPDATE shaped SET e = 'e' || id WHERE id <= 50` },
  {
    ddl: `ALTER TABLE shaped RENAME COLUMN c TO c2`,
    rows: `UPDATE shaped SET c2 = 'c2.' || id WHERE id <= 60`,
  },
  {
    ddl: `ALTER TABLE shaped DROP COLUMN gone`,
    rows: `UPDATE shaped SET v = 'after the drop' WHERE id <= 70`,
  },
  {
    ddl: `ALTER TABLE shaped ALTER COLUMN a TYPE bigint`,
    rows: `UPDATE shaped SET a = a + 3000000000 WHERE id <= 80`,
  },
  {
    ddl: `ALTER TABLE shaped ALTER COLUMN b TYPE varchar(40)`,
    rows: `UPDATE shaped SET b = repeat('x', 30) || id WHERE id <= 90`,
  },
];

/** Makes the changes, each between rows under the old shape and rows under the new one. */
export async function makeChanges(
  client: SourceClient,
  which: readonly ShapedChange[] = changes,
): Promise<void> {
  let next = 1000;
  for (const change of which) {
    await client.query(`INSERT INTO shaped (id, v) VALUES ($1, 'before')`, [next++]);
    await client.query(`UPDATE shaped SET v = v || '+' WHERE id % 17 = 0`);
    await client.query(change.ddl);
    await client.query(change.rows);
    await client.query(`INSERT INTO shaped (id, v) VALUES ($1, 'after')`, [next++]);
  }
}

/** The source table's columns by name. */
export async function sourceColumns(client: SourceClient, table: string): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    `SELECT attname AS name FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attname`,
    [table],
  );
  return rows.map((row) => row.name);
}

/** The source rows as text cells by id, one a column of `columns`. */
export async function sourceRows(
  client: SourceClient,
  table: string,
  columns: readonly string[],
): Promise<unknown[][]> {
  const { rows } = await client.query<unknown[]>({
    text: `SELECT ${columns.map((column) => `${column}::text`).join(', ')} FROM ${table} ORDER BY ${table}.id`,
    rowMode: 'array',
  });
  return rows.map((row) => row.map((cell) => cell ?? null));
}

/** Waits until `read` equals `expected`, then asserts it (the diff names what differs). */
export async function expectEventually<T>(
  read: () => Promise<T>,
  expected: () => Promise<T>,
  what: string,
): Promise<void> {
  await waitFor(
    async () => JSON.stringify(await read().catch(() => undefined)) === JSON.stringify(await expected()),
    120_000,
    what,
  ).catch(() => {});
  expect(await read()).toEqual(await expected());
}

/** A mapped table's entry in the catalog (its state and problem). */
export const stateOf = async (harness: Harness, mirror: string, table: string) =>
  (await harness.catalog.listTables(mirror)).find((entry) => entry.sourceTable === table);

/** Waits until the mirror runs (its initial load done). */
export const running = (harness: Harness, mirror: string) =>
  waitFor(async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running', 60_000, 'running');

// The tables every system moves, and the check that a destination holds what
// the source holds.
import type pg from 'pg';

/** Each run's table: the shape of the measurements. */
export const tableColumns = `id bigint PRIMARY KEY, account int NOT NULL, amount numeric(12,2), note text, created timestamptz NOT NULL DEFAULT clock_timestamp()`;
/** The same with the column a latency run reads: set to now() by the writing transaction. */
export const latencyColumns = `${tableColumns}, _synced_at timestamptz NOT NULL DEFAULT now()`;

/** A run ends when its marker row is visible at the destination: applied in commit order, all before it is too. */
export const markerColumns = `id int PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp()`;

/** Rows are written in transactions of this many. */
export const rowsPerTransaction = 10_000;

const fill = (from: number, to: number) =>
  `SELECT g, g % 1000, g * 0.01, 'note ' || md5(g::text), clock_timestamp() FROM generate_series(${from}, ${to}) g`;

export async function insertRows(client: pg.ClientBase, table: string, rowCount: number, first = 1) {
  for (let from = first; from < first + rowCount; from += rowsPerTransaction) {
    const to = Math.min(first + rowCount - 1, from + rowsPerTransaction - 1);
    await client.query(`INSERT INTO ${table} ${fill(from, to)}`);
  }
}

export async function insertInOneTransaction(client: pg.ClientBase, table: string, rowCount: number) {
  await client.query(`INSERT INTO ${table} ${fill(1, rowCount)}`);
}

/** Changes every row's non-key columns, in transactions of `rowsPerTransaction`. */
export async function updateRows(client: pg.ClientBase, table: string, rowCount: number) {
  for (let from = 1; from <= rowCount; from += rowsPerTransaction) {
    const to = Math.min(rowCount, from + rowsPerTransaction - 1);
    await client.query(
      `UPDATE ${table} SET amount = amount + 1, note = 'changed ' || id WHERE id BETWEEN ${from} AND ${to}`,
    );
  }
}

export async function deleteRows(client: pg.ClientBase, table: string, rowCount: number) {
  for (let from = 1; from <= rowCount; from += rowsPerTransaction) {
    const to = Math.min(rowCount, from + rowsPerTransaction - 1);
    await client.query(`DELETE FROM ${table} WHERE id BETWEEN ${from} AND ${to}`);
  }
}

export interface Fingerprint {
  readonly rowCount: number;
  readonly distinctIds: number;
  /** A sum of per-row hashes of every moved column: equal when the rows are. */
  readonly hash: string;
}

export async function fingerprint(client: pg.ClientBase, table: string): Promise<Fingerprint> {
  const result = await client.query<{ n: string; ids: string; hash: string | null }>(
    `SELECT count(*)::text AS n, count(DISTINCT id)::text AS ids,
            sum(hashtextextended(concat_ws('|', id, account, amount, note,
                to_char(created AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')), 0)::numeric)::text AS hash
     FROM ${table}`,
  );
  const row = result.rows[0];
  return { rowCount: Number(row?.n), distinctIds: Number(row?.ids), hash: row?.hash ?? '0' };
}

/** Throws unless the destination's rows are the source's (every id, once, same values). */
export function expectSame(what: string, source: Fingerprint, destination: Fingerprint): void {
  if (
    destination.rowCount !== source.rowCount ||
    destination.distinctIds !== source.rowCount ||
    destination.hash !== source.hash
  ) {
    throw new Error(
      `${what}: destination differs from source (source ${JSON.stringify(source)}, destination ${JSON.stringify(destination)})`,
    );
  }
}

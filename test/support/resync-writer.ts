// The writes a table's resync is tested under: inserts, updates and key changes
// of `table` (never deletes, so a reader's count of it only grows) and inserts
// into `other`, one transaction at a time until stopped.
import type pg from 'pg';

export interface ResyncWriterOptions {
  /** The first key inserted (default: seeded + 1). */
  readonly firstId?: number;
  /** A pause after each transaction, for a destination that takes fewer (default: none). */
  readonly pauseMs?: number;
}

/** Starts writing into `table` (keys 1..seeded at first) and `other`; returns the stop, which waits for the last transaction. */
export function startResyncWriter(
  client: pg.Client,
  table: string,
  other: string,
  seeded: number,
  { firstId = seeded + 1, pauseMs = 0 }: ResyncWriterOptions = {},
): () => Promise<void> {
  let writing = true;
  let next = firstId;
  const done = (async () => {
    while (writing) {
      const id = next++;
      await client.query('BEGIN');
      await client.query(`INSERT INTO ${table} VALUES ($1, 'new')`, [id]);
      await client.query(`UPDATE ${table} SET v = v || '+' WHERE id = $1`, [1 + (id % seeded)]);
      // A key change, to a key above every other.
      await client.query(`UPDATE ${table} SET id = id + 1000000 WHERE id = $1`, [1 + ((id * 7) % seeded)]);
      await client.query(`INSERT INTO ${other} VALUES ($1, 'o') ON CONFLICT DO NOTHING`, [id]);
      await client.query('COMMIT');
      if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  })();
  return async () => {
    writing = false;
    await done;
  };
}

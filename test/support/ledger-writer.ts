// The write load of the kill -9 tests: on a source table `ledger (id, account,
// amount, note)`, transactions of 1–20 inserts and an update, some with a
// delete or a primary-key change, until stopped. What the destination must
// end up equal to, row by row.
import type pg from 'pg';

export interface LedgerWriter {
  /** Stops after the transaction in progress (rethrowing a failed one); resolves to the next unused id. */
  stop(): Promise<number>;
}

export function startLedgerWriter(
  client: pg.ClientBase,
  options: {
    /** The first id to insert (above the rows already there). */
    readonly firstId: number;
    /** A seeded generator makes a failing run repeatable; Math.random otherwise. */
    readonly random?: () => number;
    /** A pause between transactions, for a destination that is slow to apply. */
    readonly pauseMs?: number;
  },
): LedgerWriter {
  const random = options.random ?? Math.random;
  let writing = true;
  let nextId = options.firstId;
  const writer = (async () => {
    while (writing) {
      await client.query('BEGIN');
      const inserts = 1 + Math.floor(random() * 20);
      for (let i = 0; i < inserts; i++, nextId++) {
        await client.query(`INSERT INTO ledger VALUES ($1, $2, $3, $4)`, [
          nextId,
          nextId % 50,
          (random() * 1000).toFixed(2),
          `w${nextId}`,
        ]);
      }
      const target = 1 + Math.floor(random() * (nextId - 1));
      await client.query(`UPDATE ledger SET amount = amount + 1, note = note || '+' WHERE id = $1`, [target]);
      if (random() < 0.3) {
        await client.query(`DELETE FROM ledger WHERE id = $1`, [1 + Math.floor(random() * (nextId - 1))]);
      }
      if (random() < 0.05) await client.query(`UPDATE ledger SET id = $1 WHERE id = $2`, [nextId++, target]);
      await client.query('COMMIT');
      if (options.pauseMs) await new Promise((resolve) => setTimeout(resolve, options.pauseMs));
    }
  })();
  return {
    async stop() {
      writing = false;
      await writer;
      return nextId;
    },
  };
}

// The PostgreSQL destination's checkpoint table, `_tributary.checkpoints`: one
// row per mirror, written in the same transaction as the batch's rows
// (destination.ts), so a batch and its checkpoint are durable together. Beside
// the batch id and the LSN of the last complete commit, a row holds the
// position inside the next transaction when its batch ended inside one
// (records.ts, TransactionPosition), or nulls.
import type pg from 'pg';
import type { ChangeBatch, Checkpoint } from '../../records.ts';
import { quoteIdent } from '../driver/sql.ts';

export const metadataSchema = '_tributary';
export const checkpointTable = `${quoteIdent(metadataSchema)}.checkpoints`;

/** Columns added after the table's first release: tables made before get them at setup. */
const positionColumns = [
  ['txn_commit_lsn', 'numeric(20, 0)'],
  ['txn_change_lsn', 'numeric(20, 0)'],
  ['txn_change_rank', 'integer'],
] as const;

type Queryable = Pick<pg.ClientBase, 'query'>;

/** Creates the schema and table, and adds the position columns to an older table. */
export async function createCheckpointTable(db: Queryable): Promise<void> {
  await db.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(metadataSchema)}`);
  await db.query(
    `CREATE TABLE IF NOT EXISTS ${checkpointTable} (
       mirror text PRIMARY KEY, batch_id bigint NOT NULL, lsn numeric(20, 0) NOT NULL,
       updated_at timestamptz NOT NULL DEFAULT now(),
       ${positionColumns.map(([name, type]) => `${name} ${type}`).join(', ')})`,
  );
  // Looked up first: ALTER TABLE would lock the table every mirror writes to
  // even when there is nothing to add.
  const present = await db.query<{ name: string }>(
    `SELECT attname AS name FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`,
    [checkpointTable],
  );
  const names = new Set(present.rows.map((row) => row.name));
  const missing = positionColumns.filter(([name]) => !names.has(name));
  if (missing.length === 0) return;
  await db.query(
    `ALTER TABLE ${checkpointTable} ${missing.map(([name, type]) => `ADD COLUMN IF NOT EXISTS ${name} ${type}`).join(', ')}`,
  );
}

/** The batch id stored for `mirror`, locked until the caller's transaction ends; 0 when none. */
export async function lockStoredBatchId(client: Queryable, mirror: string): Promise<bigint> {
  const stored = await client.query<{ batch_id: string }>(
    `SELECT batch_id::text FROM ${checkpointTable} WHERE mirror = $1 FOR UPDATE`,
    [mirror],
  );
  return stored.rows[0] ? BigInt(stored.rows[0].batch_id) : 0n;
}

/** Writes the batch's checkpoint, inside the transaction that applies its rows. */
export async function writeCheckpoint(client: Queryable, batch: ChangeBatch): Promise<void> {
  const position = batch.transactionPosition;
  await client.query(
    `INSERT INTO ${checkpointTable} (mirror, batch_id, lsn, txn_commit_lsn, txn_change_lsn, txn_change_rank)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (mirror) DO UPDATE SET batch_id = EXCLUDED.batch_id, lsn = EXCLUDED.lsn,
       txn_commit_lsn = EXCLUDED.txn_commit_lsn, txn_change_lsn = EXCLUDED.txn_change_lsn,
       txn_change_rank = EXCLUDED.txn_change_rank, updated_at = now()`,
    [
      batch.mirror,
      batch.batchId.toString(),
      batch.endLsn.toString(),
      position?.commitLsn.toString() ?? null,
      position?.changeLsn.toString() ?? null,
      position?.changeRank ?? null,
    ],
  );
}

/** The stored checkpoint, or undefined when the table or the mirror's row does not exist. */
export async function readCheckpointRow(db: Queryable, mirror: string): Promise<Checkpoint | undefined> {
  const exists = await db.query<{ present: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS present`, [
    checkpointTable,
  ]);
  if (!exists.rows[0]?.present) return undefined;
  // Through to_jsonb: a table from before the position columns reads nulls
  // for them; ->> gives numerics as exact text.
  const result = await db.query<{
    batch_id: string;
    lsn: string;
    commit_lsn: string | null;
    change_lsn: string | null;
    change_rank: string | null;
  }>(
    `SELECT j->>'batch_id' AS batch_id, j->>'lsn' AS lsn, j->>'txn_commit_lsn' AS commit_lsn,
       j->>'txn_change_lsn' AS change_lsn, j->>'txn_change_rank' AS change_rank
     FROM (SELECT to_jsonb(c) AS j FROM ${checkpointTable} c WHERE mirror = $1) stored`,
    [mirror],
  );
  const row = result.rows[0];
  if (!row) return undefined;
  const checkpoint: Checkpoint = { batchId: BigInt(row.batch_id), lsn: BigInt(row.lsn) };
  const { commit_lsn: commitLsn, change_lsn: changeLsn, change_rank: changeRank } = row;
  if (commitLsn === null || changeLsn === null || changeRank === null) return checkpoint;
  return {
    ...checkpoint,
    transactionPosition: {
      commitLsn: BigInt(commitLsn),
      changeLsn: BigInt(changeLsn),
      changeRank: Number(changeRank),
    },
  };
}

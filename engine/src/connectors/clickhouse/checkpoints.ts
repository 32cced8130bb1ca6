// Mirror checkpoints in a ReplacingMergeTree of the peer's database, one row
// per mirror. A batch's checkpoint row is written after its rows; a batch
// replayed after a crash writes the same rows at the same versions again
// (docs/clickhouse.md). Each row also carries the version base: the batches of
// earlier incarnations of the mirror, so that row versions keep increasing
// when batch ids start again at 1, and the position inside the next
// transaction when the batch ended inside one (0 when none: a commit LSN is
// never 0), and the resync swaps the batch made due (shadow-tables.ts).
import type { Checkpoint } from '../records.ts';
import type { PendingSwap } from './shadow-tables.ts';
import { quoteIdentifier, stringLiteral } from './sql.ts';
import type { ClickHouseTransport } from './transport.ts';

export const checkpointTableName = '_tributary_checkpoints';

/** Columns added after the table's first release. */
const addedColumns = [
  ['txn_commit_lsn', 'UInt64 DEFAULT 0'],
  ['txn_change_lsn', 'UInt64 DEFAULT 0'],
  ['txn_change_rank', 'UInt32 DEFAULT 0'],
  // JSON: the PendingSwap list of the batch, [] or empty when none.
  ['swaps', "String DEFAULT ''"],
] as const;

export interface StoredCheckpoint {
  readonly checkpoint: Checkpoint | undefined;
  /** Added to batch ids in row versions: the batches of earlier incarnations of the mirror. */
  readonly versionBase: bigint;
  readonly seq: bigint;
  /** Swaps the checkpoint's batch made due, perhaps not carried out yet. */
  readonly swaps: readonly PendingSwap[];
}

export class CheckpointStore {
  readonly #transport: ClickHouseTransport;
  readonly #database: string;
  readonly #table: string;

  constructor(transport: ClickHouseTransport, database: string) {
    this.#transport = transport;
    this.#database = database;
    this.#table = `${quoteIdentifier(database)}.${quoteIdentifier(checkpointTableName)}`;
  }

  async create(): Promise<void> {
    await this.#transport.command(
      `CREATE TABLE IF NOT EXISTS ${this.#table} (
         mirror String, batch_id UInt64, lsn UInt64, version_base UInt64, seq UInt64,
         updated_at DateTime('UTC') DEFAULT now(),
         ${addedColumns.map(([name, type]) => `${name} ${type}`).join(', ')})
       ENGINE = ReplacingMergeTree(seq) ORDER BY mirror`,
      'create the checkpoint table',
    );
    // A table made before the added columns gets them (a metadata change).
    // Looked up first: clickhouse-server 18.16 has no ADD COLUMN IF NOT EXISTS.
    const present = await this.#transport.rows<{ name: string }>(
      `SELECT name FROM system.columns WHERE database = ${stringLiteral(this.#database)} AND table = ${stringLiteral(checkpointTableName)}`,
      'read the checkpoint table columns',
    );
    const names = new Set(present.map((column) => column.name));
    const missing = addedColumns.filter(([name]) => !names.has(name));
    if (missing.length === 0) return;
    await this.#transport.command(
      `ALTER TABLE ${this.#table} ${missing.map(([name, type]) => `ADD COLUMN ${name} ${type}`).join(', ')}`,
      'add columns to the checkpoint table',
    );
  }

  async stored(mirror: string): Promise<StoredCheckpoint> {
    const rows = await this.#transport.rows<{
      batch_id: string;
      lsn: string;
      version_base: string;
      seq: string;
      txn_commit_lsn: string;
      txn_change_lsn: string;
      txn_change_rank: string;
      swaps: string;
    }>(
      `SELECT toString(batch_id) AS batch_id, toString(lsn) AS lsn, toString(version_base) AS version_base,
         toString(seq) AS seq, toString(txn_commit_lsn) AS txn_commit_lsn,
         toString(txn_change_lsn) AS txn_change_lsn, toString(txn_change_rank) AS txn_change_rank, swaps
       FROM ${this.#table} FINAL WHERE mirror = ${stringLiteral(mirror)}`,
      'read checkpoint',
    );
    const row = rows[0];
    if (!row) return { checkpoint: undefined, versionBase: 0n, seq: 0n, swaps: [] };
    const batchId = BigInt(row.batch_id);
    // Batch 0 is the mark remove() leaves.
    const commitLsn = BigInt(row.txn_commit_lsn);
    const checkpoint: Checkpoint | undefined =
      batchId === 0n
        ? undefined
        : {
            batchId,
            lsn: BigInt(row.lsn),
            ...(commitLsn === 0n
              ? {}
              : {
                  transactionPosition: {
                    commitLsn,
                    changeLsn: BigInt(row.txn_change_lsn),
                    changeRank: Number(row.txn_change_rank),
                  },
                }),
          };
    const swaps: PendingSwap[] = row.swaps ? JSON.parse(row.swaps) : [];
    return { checkpoint, versionBase: BigInt(row.version_base), seq: BigInt(row.seq), swaps };
  }

  /**
   * The checkpoint row's own version (seq) is above the stored one whatever
   * the clock says, so the latest write always wins under FINAL.
   */
  async write(
    mirror: string,
    checkpoint: Checkpoint,
    versionBase: bigint,
    stored: StoredCheckpoint,
    swaps: readonly PendingSwap[] = [],
  ): Promise<void> {
    const now = BigInt(Date.now()) * 1000n;
    const seq = now > stored.seq ? now : stored.seq + 1n;
    const position = checkpoint.transactionPosition;
    await this.#transport.command(
      `INSERT INTO ${this.#table}
         (mirror, batch_id, lsn, version_base, seq, txn_commit_lsn, txn_change_lsn, txn_change_rank, swaps)
       VALUES (${stringLiteral(mirror)}, ${checkpoint.batchId}, ${checkpoint.lsn}, ${versionBase}, ${seq},
         ${position?.commitLsn ?? 0n}, ${position?.changeLsn ?? 0n}, ${position?.changeRank ?? 0},
         ${stringLiteral(swaps.length > 0 ? JSON.stringify(swaps) : '')})`,
      'write checkpoint',
    );
  }

  async #exists(): Promise<boolean> {
    const [row] = await this.#transport.rows<{ present: number | string }>(
      `SELECT count() AS present FROM system.tables WHERE database = ${stringLiteral(this.#database)} AND name = ${stringLiteral(checkpointTableName)}`,
      'look for the checkpoint table',
    );
    return Number(row?.present ?? 0) > 0;
  }

  async read(mirror: string): Promise<Checkpoint | undefined> {
    if (!(await this.#exists())) return undefined;
    return (await this.stored(mirror)).checkpoint;
  }

  /** Marks the mirror's checkpoint gone, after `complete` has made the swaps it names. */
  async remove(mirror: string, complete: (swaps: readonly PendingSwap[]) => Promise<void>): Promise<void> {
    if (!(await this.#exists())) return;
    const stored = await this.stored(mirror);
    if (!stored.checkpoint) return;
    await complete(stored.swaps);
    // Batch ids start again at 1; rows already written keep their versions, so
    // the next incarnation's versions start above them (docs/clickhouse.md).
    const versionBase = stored.versionBase + stored.checkpoint.batchId;
    await this.write(mirror, { batchId: 0n, lsn: 0n }, versionBase, stored);
  }
}

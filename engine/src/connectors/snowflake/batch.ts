// One batch, applied atomically with its checkpoint (docs/snowflake.md, "A
// batch"). Before BEGIN, because DDL and PUT commit or stand alone: new
// columns, then one file PUT to the stage. Inside one transaction: the
// checkpoint guard, COPY INTO the changes table, the set-based apply per table,
// the staged rows deleted, the resync swaps the batch makes due recorded
// (shadow-tables.ts carries them out after the COMMIT: DDL cannot be in the
// transaction), COMMIT. On any error ROLLBACK and nothing else: Snowflake
// rolls back only the failed statement, so a COMMIT after an error would make
// a partial batch durable. A statement of one table's apply that fails on what
// that table refuses (a value, its table or a column gone) is that table's
// fault (errors.ts tableFault): the whole batch is rolled back, and the
// pipeline stops the table and streams on without it.
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { EngineError, tableFault } from '../../errors.ts';
import { formatTableName } from '../../resources/mirror.ts';
import { classifySnowflakeError } from '../classify/index.ts';
import { finalStates, rowKey } from '../coalesce.ts';
import type { MirrorColumns } from '../destination.ts';
import { type ChangeBatch, type ChangeList, keyIndexes } from '../records.ts';
import { applyTableSql, type TableApply } from './apply-sql.ts';
import { changeLine, dataObject, unchangedFlags } from './changes-file.ts';
import { transactionName } from './detached.ts';
import {
  copyChangesSql,
  deleteStagedRowsSql,
  ensureCheckpointRowSql,
  type InternalObjects,
  moveCheckpointSql,
  readCheckpointSql,
  recordSwapSql,
} from './internal.ts';
import type { SnowflakeSession } from './session.ts';
import { tableIdent } from './sql.ts';
import { columnCodec } from './types.ts';

export interface BatchContext {
  readonly database: string;
  readonly objects: InternalObjects;
  readonly mirrorColumns: MirrorColumns;
  readonly logger: Logger;
  /** Local directory for the file to PUT. */
  readonly localDir: string;
  /** Runs what must precede BEGIN for the batch's tables (ADD COLUMN: DDL commits implicitly). */
  readonly beforeBegin: (session: SnowflakeSession, batch: ChangeBatch<ChangeList>) => Promise<void>;
}

export type BatchOutcome = 'applied' | 'skipped';

/** The staged file's text and the apply plan of each table with rows. */
export function stageBatch(
  batch: ChangeBatch<ChangeList>,
  database: string,
): { text: string; applies: TableApply[] } {
  const lines: string[] = [];
  const applies: TableApply[] = [];
  batch.tables.forEach(({ table, held: { changes } }, tableNo) => {
    const positions = keyIndexes(table);
    if (positions.length === 0 || positions.includes(-1)) {
      throw new EngineError(
        'config',
        `destination table ${tableIdent(database, table.destination)} has no usable key`,
      );
    }
    const codecs = table.columns.map(columnCodec);
    const { truncateIndex, finals } = finalStates(changes, positions);
    let hasDeletes = false;
    let hasUpserts = false;
    let hasUnchanged = false;
    let fillsFromOldKey = false;
    for (const state of finals.values()) {
      if (state.op === 'delete') {
        hasDeletes = true;
        lines.push(
          changeLine(
            batch.batchId,
            tableNo,
            state.index,
            'D',
            dataObject(table, codecs, state.key, positions),
            '',
          ),
        );
      } else {
        hasUpserts = true;
        const flags = unchangedFlags(state.row);
        // A key change with unchanged values: they are in the row under the old key.
        const refill =
          state.row.hasUnchangedToast() && rowKey(state.fillKey, positions) !== rowKey(state.row, positions);
        if (flags) hasUnchanged = true;
        if (refill) fillsFromOldKey = true;
        const data = dataObject(
          table,
          codecs,
          state.row,
          undefined,
          refill ? { key: state.fillKey, positions } : undefined,
        );
        lines.push(changeLine(batch.batchId, tableNo, state.index, 'U', data, flags));
      }
    }
    if (truncateIndex === undefined && !hasDeletes && !hasUpserts) return;
    applies.push({
      table,
      target: tableIdent(database, table.destination),
      codecs,
      tableNo,
      truncated: truncateIndex !== undefined,
      hasDeletes,
      hasUpserts,
      hasUnchanged,
      fillsFromOldKey,
    });
  });
  return { text: lines.join(''), applies };
}

async function storedBatchId(
  session: SnowflakeSession,
  objects: InternalObjects,
  mirror: string,
): Promise<bigint> {
  const { rows } = await session.execute(readCheckpointSql(objects, mirror));
  const value = rows[0]?.BATCH_ID;
  return value === undefined || value === null ? 0n : BigInt(String(value));
}

/**
 * Applies `batch` on `session` (which must not be in a transaction). Rejects
 * with the statement's error after a ROLLBACK; the checkpoint then has not moved.
 */
export async function applyBatch(
  session: SnowflakeSession,
  batch: ChangeBatch<ChangeList>,
  context: BatchContext,
  attempt: number,
): Promise<BatchOutcome> {
  const { objects } = context;
  await session.execute(ensureCheckpointRowSql(objects, batch.mirror));
  const previous = await storedBatchId(session, objects, batch.mirror);
  if (previous >= batch.batchId) return 'skipped';

  await context.beforeBegin(session, batch);
  const { text, applies } = stageBatch(batch, context.database);
  const stagePath = `${batch.mirror}/b${batch.batchId}/a${attempt}`;
  const localFile = join(context.localDir, `${batch.mirror}-b${batch.batchId}-a${attempt}.csv`);
  try {
    if (text.length > 0) {
      await writeFile(localFile, text);
      await session.execute(
        `PUT 'file://${localFile}' ${objects.stageLocation}/${stagePath}/ AUTO_COMPRESS = TRUE OVERWRITE = TRUE`,
      );
    }
    await session.execute(`BEGIN TRANSACTION NAME ${transactionName(batch.mirror)}`);
    try {
      const guard = await session.execute(moveCheckpointSql(objects, batch.mirror, previous, batch));
      if (guard.affectedRows !== 1) {
        await session.execute('ROLLBACK');
        const now = await storedBatchId(session, objects, batch.mirror);
        if (now >= batch.batchId) return 'skipped';
        throw new EngineError(
          'destination_write',
          `the checkpoint of mirror ${batch.mirror} moved while batch ${batch.batchId} was being written`,
        );
      }
      if (text.length > 0) {
        await session.execute(copyChangesSql(objects, stagePath));
        for (const apply of applies) {
          try {
            for (const statement of applyTableSql(objects, apply, batch.batchId, context.mirrorColumns)) {
              await session.execute(statement);
            }
          } catch (error) {
            throw tableFault(
              classifySnowflakeError(
                error,
                `destination: apply the changes of ${apply.target} (batch ${batch.batchId})`,
              ),
              formatTableName(apply.table.source),
            );
          }
        }
        await session.execute(deleteStagedRowsSql(objects, batch.batchId));
      }
      for (const swap of batch.swaps ?? []) {
        await session.execute(recordSwapSql(objects, batch.mirror, batch.batchId, swap));
      }
      await session.execute('COMMIT');
      return 'applied';
    } catch (error) {
      await session.execute('ROLLBACK').catch((rollbackError: unknown) => {
        context.logger.warn(
          { err: rollbackError },
          'rollback after a failed batch failed; the session is closed',
        );
      });
      throw error;
    }
  } finally {
    await rm(localFile, { force: true });
  }
}

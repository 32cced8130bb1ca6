// Snowflake as a destination (the "datawarehouse" peer kind). A batch is
// staged as one file, loaded with COPY into the mirror's changes table and
// applied with set-based SQL in one transaction that also moves the mirror's
// checkpoint row, so the batch and its checkpoint are durable together and a
// replayed batch is recognised and skipped (docs/snowflake.md).
//
// session.ts: the driver; internal.ts: the connector's own objects;
// schema.ts: target tables; changes-file.ts and apply-sql.ts: the staged rows
// and the SQL that applies them; batch.ts: one batch's transaction;
// shadow-tables.ts: an online resync's shadow and its swap.
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import { EngineError } from '../../errors.ts';
import { formatTableName } from '../../resources/mirror.ts';
import type { DatawarehouseConfig } from '../../resources/peer.ts';
import { classifySnowflakeError } from '../classify/index.ts';
import { copyTextRowBatches } from '../copy-text.ts';
import type { Destination, DestinationTableState, MirrorColumns } from '../destination.ts';
import {
  type ChangeBatch,
  ChangeList,
  type Checkpoint,
  type DestinationTable,
  type TableAlteration,
} from '../records.ts';
import { rowOfCells } from '../rows.ts';
import { insertSnapshotSql } from './apply-sql.ts';
import { applyBatch } from './batch.ts';
import { changeLine, dataObject } from './changes-file.ts';
import { abortDetachedTransactions } from './detached.ts';
import {
  copyChangesSql,
  createInternalObjectsSql,
  type InternalObjects,
  internalObjects,
  internalSchemaName,
  readCheckpointSql,
  removeCheckpointSql,
} from './internal.ts';
import {
  addColumnSql,
  anyRowSql,
  canSetDataType,
  columnsSql,
  createSchemaSql,
  createTableSql,
  tableExistsSql,
} from './schema.ts';
import { openSession, type SnowflakeSession } from './session.ts';
import { completeSwaps, type ShadowContext, SnowflakeShadowTables } from './shadow-tables.ts';
import { columnIdent, quoteIdent, snowflakeName, stringLiteral, tableIdent } from './sql.ts';
import { columnCodec } from './types.ts';

export interface SnowflakeDestinationOptions {
  readonly mirror: string;
  readonly mirrorColumns: MirrorColumns;
  readonly logger: Logger;
  /** Opens a session; tests replace the driver with a fake. */
  readonly openSession?: (() => Promise<SnowflakeSession>) | undefined;
}

function tableKey(table: DestinationTable): string {
  return `${table.destination.schema}\u0000${table.destination.table}`;
}

export class SnowflakeDestination implements Destination<ChangeList> {
  readonly #config: DatawarehouseConfig;
  readonly #options: SnowflakeDestinationOptions;
  readonly #objects: InternalObjects;
  readonly #open: () => Promise<SnowflakeSession>;
  /** Sessions not in use; a batch or a snapshot partition takes one for itself. */
  readonly #idle: SnowflakeSession[] = [];
  /** Columns known to exist per target table: a batch adds the others before BEGIN. */
  readonly #knownColumns = new Map<string, Set<string>>();
  #localDir: Promise<string> | undefined;
  #attempt = 0;
  /** A killed engine may have left the mirror's transaction open: checked before the first batch and after a failure. */
  #mayHaveDetached = true;
  /**
   * A committed batch may have made a resync's swap due that is not carried
   * out yet (an engine killed between the two, a failed swap): checked before
   * the first batch and after a failure (shadow-tables.ts).
   */
  #mayHavePendingSwaps = true;
  readonly #shadowContext: ShadowContext;
  readonly shadowTables: SnowflakeShadowTables;

  constructor(config: DatawarehouseConfig, options: SnowflakeDestinationOptions) {
    this.#config = config;
    this.#options = options;
    this.#objects = internalObjects(config.database, options.mirror);
    this.#open =
      options.openSession ??
      (() => openSession(config, { queryTag: `tributary mirror ${options.mirror}`.slice(0, 2000) }));
    this.#shadowContext = {
      database: config.database,
      mirror: options.mirror,
      objects: this.#objects,
      withSession: (what, work) => this.#withSession(what, work),
    };
    this.shadowTables = new SnowflakeShadowTables(this.#shadowContext);
  }

  /** Carries out the swaps committed batches made due, if any may be (shadow-tables.ts). */
  async #completePendingSwaps(session: SnowflakeSession): Promise<void> {
    if (!this.#mayHavePendingSwaps) return;
    const completed = await completeSwaps(session, this.#shadowContext);
    if (completed > 0) this.#options.logger.info({ completed }, 'resynced tables put in place');
    this.#mayHavePendingSwaps = false;
  }

  async #withSession<T>(what: string, work: (session: SnowflakeSession) => Promise<T>): Promise<T> {
    const session = this.#idle.pop() ?? (await this.#open());
    try {
      const result = await work(session);
      this.#idle.push(session);
      return result;
    } catch (error) {
      // A session that failed may still hold a transaction: it is not reused.
      await session.close().catch(() => {});
      throw classifySnowflakeError(error, `destination: ${what}`, 'destination_write');
    }
  }

  /**
   * The directory of this destination's batch files, made at first use. A
   * failure is not kept: a later call tries again (a temporary directory
   * mounted or freed meanwhile).
   */
  #dir(): Promise<string> {
    if (!this.#localDir) {
      const parent = tmpdir();
      const making = mkdtemp(join(parent, 'tributary-snowflake-')).catch((error: unknown) => {
        throw classifySnowflakeError(
          error,
          `destination: create the batch file directory in ${parent}`,
          'destination_write',
        );
      });
      this.#localDir = making;
      making.catch(() => {
        if (this.#localDir === making) this.#localDir = undefined;
      });
    }
    return this.#localDir;
  }

  async check(): Promise<{ version: string }> {
    return this.#withSession('read the server version', async (session) => {
      const { rows } = await session.execute('SELECT CURRENT_VERSION() AS "VERSION"');
      return { version: String(rows[0]?.VERSION ?? 'unknown') };
    });
  }

  async close(): Promise<void> {
    const sessions = this.#idle.splice(0);
    await Promise.all(sessions.map((session) => session.close().catch(() => {})));
    const making = this.#localDir;
    this.#localDir = undefined;
    const dir = await making?.catch(() => undefined);
    if (dir) await rm(dir, { recursive: true, force: true });
  }

  async setupTables(tables: readonly DestinationTable[]): Promise<void> {
    const keyless = tables.find((table) => table.keyColumns.length === 0);
    if (keyless) {
      throw new EngineError(
        'replica_identity',
        `source table ${formatTableName(keyless.source)} has no primary key or replica identity index, which a Snowflake destination needs to apply changes by key`,
      );
    }
    const { database } = this.#config;
    await this.#withSession('create tables', async (session) => {
      for (const statement of createInternalObjectsSql(this.#objects)) await session.execute(statement);
      for (const table of tables) {
        await session.execute(createSchemaSql(database, table));
        await session.execute(createTableSql(database, table, this.#options.mirrorColumns));
        // A table kept from an earlier run may lack columns added since.
        for (const column of table.columns) await session.execute(addColumnSql(database, table, column));
        this.#knownColumns.set(tableKey(table), new Set(table.columns.map((column) => column.name)));
      }
    });
  }

  async tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]> {
    const { database } = this.#config;
    return this.#withSession('inspect tables', async (session) => {
      const states: DestinationTableState[] = [];
      for (const table of tables) {
        const { rows } = await session.execute(tableExistsSql(database, table));
        if (Number(rows[0]?.FOUND ?? 0) === 0) {
          states.push('absent');
          continue;
        }
        const any = await session.execute(anyRowSql(database, table));
        states.push(any.rows.length > 0 ? 'populated' : 'empty');
      }
      return states;
    });
  }

  async truncateTables(tables: readonly DestinationTable[]): Promise<void> {
    const { database } = this.#config;
    await this.#withSession('truncate tables', async (session) => {
      for (const table of tables)
        await session.execute(`TRUNCATE TABLE ${tableIdent(database, table.destination)}`);
      // Rows a failed snapshot partition left staged (snapshot batch ids are negative).
      if (await this.#internalTableExists(session, this.#objects.changesName)) {
        await session.execute(`DELETE FROM ${this.#objects.changes} WHERE "BATCH_ID" < 0`);
      }
    });
  }

  /**
   * Stages the partition as one file, loads it with COPY into the changes
   * table under a batch id of its own, and inserts it into the target with one
   * INSERT ... SELECT. Partitions run concurrently, each on its own session.
   */
  async writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number> {
    const target = tableIdent(this.#config.database, table.destination);
    const dir = await this.#dir();
    // Negative, so it never meets a CDC batch id; random, so concurrent partitions differ.
    const token = -(randomBytes(6).readUIntBE(0, 6) + 1);
    const file = join(dir, `snapshot${token}.csv`);
    const codecs = table.columns.map(columnCodec);
    // Streamed to the file: a partition can be far larger than memory should hold.
    let rowCount = 0;
    try {
      await pipeline(
        Readable.from(
          (async function* () {
            for await (const rows of copyTextRowBatches(copyText, table)) {
              let lines = '';
              for (const row of rows) {
                lines += changeLine(
                  BigInt(token),
                  0,
                  rowCount,
                  'U',
                  dataObject(table, codecs, rowOfCells(row)),
                  '',
                );
                rowCount++;
              }
              yield lines;
            }
          })(),
        ),
        createWriteStream(file),
      );
    } catch (error) {
      await rm(file, { force: true });
      throw classifySnowflakeError(
        error,
        `destination: write the batch file of ${target}`,
        'destination_write',
      );
    }
    if (rowCount === 0) {
      await rm(file, { force: true });
      return 0;
    }
    const path = `${this.#options.mirror}/snapshot/${-token}`;
    const apply = {
      table,
      target,
      codecs,
      tableNo: 0,
      truncated: false,
      hasDeletes: false,
      hasUpserts: true,
      hasUnchanged: false,
    };
    try {
      await this.#withSession(`load ${target}`, async (session) => {
        await session.execute(
          `PUT 'file://${file}' ${this.#objects.stageLocation}/${path}/ AUTO_COMPRESS = TRUE OVERWRITE = TRUE`,
        );
        await session.execute(copyChangesSql(this.#objects, path));
        await session.execute(
          insertSnapshotSql(this.#objects, apply, BigInt(token), this.#options.mirrorColumns),
        );
        await session.execute(`DELETE FROM ${this.#objects.changes} WHERE "BATCH_ID" = ${token}`);
      });
    } finally {
      await rm(file, { force: true });
    }
    return rowCount;
  }

  /** Snowflake folds each table's changes at the write (batch.ts), from the changes as objects. */
  changeBuffer(): ChangeList {
    return new ChangeList();
  }

  async syncBatch(batch: ChangeBatch<ChangeList>): Promise<void> {
    this.#attempt++;
    const attempt = this.#attempt;
    const localDir = await this.#dir();
    const outcome = await this.#withSession(`sync batch ${batch.batchId}`, async (session) => {
      if (this.#mayHaveDetached) {
        const aborted = await abortDetachedTransactions(session, batch.mirror);
        if (aborted === undefined) {
          this.#options.logger.warn(
            'cannot list transactions; one a stopped engine left open would block batches',
          );
        } else if (aborted > 0) {
          this.#options.logger.warn({ aborted }, 'aborted transactions a stopped engine left open');
        }
        this.#mayHaveDetached = false;
      }
      // Before the batch: its changes are for the table a due swap puts in place.
      await this.#completePendingSwaps(session);
      const outcome = await applyBatch(
        session,
        batch,
        {
          database: this.#config.database,
          objects: this.#objects,
          mirrorColumns: this.#options.mirrorColumns,
          logger: this.#options.logger,
          localDir,
          beforeBegin: (prepared, current) => this.#addNewColumns(prepared, current),
        },
        attempt,
      ).catch((error: unknown) => {
        this.#mayHaveDetached = true;
        throw error;
      });
      // The batch committed with its swaps recorded: resolved only once they are done,
      // so the pipeline's resync ends with the shadow in place.
      if ((batch.swaps?.length ?? 0) > 0) {
        this.#mayHavePendingSwaps = true;
        await this.#completePendingSwaps(session);
      }
      return outcome;
    }).catch((error: unknown) => {
      this.#mayHavePendingSwaps = true;
      throw error;
    });
    if (outcome === 'skipped') {
      this.#options.logger.info({ batchId: String(batch.batchId) }, 'batch already applied, skipped');
    }
  }

  /** ADD COLUMN for the batch's columns the target may lack; DDL commits, so before BEGIN. */
  async #addNewColumns(session: SnowflakeSession, batch: ChangeBatch<ChangeList>): Promise<void> {
    for (const { table } of batch.tables) {
      const known = this.#knownColumns.get(tableKey(table)) ?? new Set<string>();
      for (const column of table.columns) {
        if (known.has(column.name)) continue;
        await session.execute(addColumnSql(this.#config.database, table, column));
        known.add(column.name);
      }
      this.#knownColumns.set(tableKey(table), known);
    }
  }

  async #internalTableExists(session: SnowflakeSession, name: string): Promise<boolean> {
    const { rows } = await session.execute(
      `SELECT COUNT(*) AS "FOUND" FROM ${quoteIdent(this.#config.database)}.INFORMATION_SCHEMA.TABLES
       WHERE TABLE_SCHEMA = ${stringLiteral(internalSchemaName)} AND TABLE_NAME = ${stringLiteral(name)}`,
    );
    return Number(rows[0]?.FOUND ?? 0) > 0;
  }

  async readCheckpoint(mirror: string): Promise<Checkpoint | undefined> {
    return this.#withSession('read checkpoint', async (session) => {
      if (!(await this.#internalTableExists(session, this.#objects.checkpointsName))) return undefined;
      // The checkpoint's batch may have made a swap due: the tables are as it says once done.
      await this.#completePendingSwaps(session);
      const { rows } = await session.execute(readCheckpointSql(this.#objects, mirror));
      const row = rows[0];
      if (!row) return undefined;
      const batchId = BigInt(String(row.BATCH_ID));
      // Batch 0 is the row made before the first batch: nothing synced yet.
      if (batchId === 0n) return undefined;
      const checkpoint: Checkpoint = { batchId, lsn: BigInt(String(row.LSN)) };
      const { TXN_COMMIT_LSN: commitLsn, TXN_CHANGE_LSN: changeLsn, TXN_CHANGE_RANK: changeRank } = row;
      if (commitLsn == null || changeLsn == null || changeRank == null) return checkpoint;
      return {
        ...checkpoint,
        transactionPosition: {
          commitLsn: BigInt(String(commitLsn)),
          changeLsn: BigInt(String(changeLsn)),
          changeRank: Number(changeRank),
        },
      };
    });
  }

  async removeCheckpoint(mirror: string): Promise<void> {
    await this.#withSession('remove checkpoint', async (session) => {
      // The changes table stays: the pipeline also forgets a checkpoint before an
      // initial load starts over, after setupTables made it.
      if (!(await this.#internalTableExists(session, this.#objects.checkpointsName))) return;
      await session.execute(removeCheckpointSql(this.#objects, mirror));
    });
  }

  async refuseAlteration({ changes }: TableAlteration): Promise<string | undefined> {
    for (const change of changes) {
      if (change.kind !== 'retype') continue;
      const before = columnCodec(change.before).sqlType;
      const after = columnCodec(change.after).sqlType;
      if (!canSetDataType(before, after))
        return `Snowflake cannot change ${change.name} from ${before} to ${after} (ALTER COLUMN … SET DATA TYPE widens a NUMBER of the same scale or a VARCHAR only)`;
    }
    return undefined;
  }

  async alterColumns({ before, after, changes }: TableAlteration): Promise<void> {
    const database = this.#config.database;
    const target = tableIdent(database, before.destination);
    await this.#withSession(`alter the columns of ${target}`, async (session) => {
      const { rows } = await session.execute(columnsSql(database, before));
      const present = new Map(rows.map((row) => [String(row.COLUMN_NAME), String(row.DATA_TYPE)]));
      const has = (name: string) => present.has(snowflakeName(name));
      for (const change of changes) {
        switch (change.kind) {
          case 'add':
            if (!has(change.column.name))
              await session.execute(addColumnSql(database, before, change.column));
            present.set(snowflakeName(change.column.name), '');
            break;
          case 'drop':
            if (!has(change.name)) break;
            await session.execute(`ALTER TABLE ${target} DROP COLUMN ${columnIdent(change.name)}`);
            present.delete(snowflakeName(change.name));
            break;
          case 'rename':
            // Made already when the new name is there and the old one is not (a replay).
            if (!has(change.from) || has(change.to)) break;
            await session.execute(
              `ALTER TABLE ${target} RENAME COLUMN ${columnIdent(change.from)} TO ${columnIdent(change.to)}`,
            );
            present.delete(snowflakeName(change.from));
            present.set(snowflakeName(change.to), '');
            break;
          case 'retype': {
            const from = columnCodec(change.before).sqlType;
            const to = columnCodec(change.after).sqlType;
            if (from === to) break;
            await session.execute(
              `ALTER TABLE ${target} ALTER COLUMN ${columnIdent(change.name)} SET DATA TYPE ${to}`,
            );
            break;
          }
        }
      }
      this.#knownColumns.set(tableKey(after), new Set(after.columns.map((column) => column.name)));
    });
  }
}

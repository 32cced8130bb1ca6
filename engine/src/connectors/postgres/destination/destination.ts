// PostgreSQL as a destination. A batch is applied in one transaction together
// with the mirror's checkpoint row, so it is either wholly durable with its
// checkpoint or not at all, and a replayed batch is recognised and skipped.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { Logger } from 'pino';
import { EngineError, tableFault } from '../../../errors.ts';
import { formatTableName } from '../../../resources/mirror.ts';
import type { RelationalConfig } from '../../../resources/peer.ts';
import { classifyPgError } from '../../classify/index.ts';
import type { CopyTextRows } from '../../copy-rows.ts';
import { escapeCopyText } from '../../copy-text.ts';
import type { Destination, DestinationTableState, MirrorColumns } from '../../destination.ts';
import {
  type ChangeBatch,
  type Checkpoint,
  type DestinationTable,
  keyIndexes,
  type SourceColumn,
  type TableAlteration,
  type TableChanges,
} from '../../records.ts';
import { openPostgresPool, type PgPool } from '../driver/connect.ts';
import { quoteIdent, quoteLiteral, quoteTable } from '../driver/sql.ts';
import {
  checkpointTable,
  createCheckpointTable,
  lockStoredBatchId,
  readCheckpointRow,
  writeCheckpoint,
} from './destination-checkpoints.ts';
import { PostgresShadowTables, swapIn } from './shadow-tables.ts';
import type { KeyMove, StagedChanges } from './staged-changes.ts';
import { PostgresTableChanges } from './table-changes.ts';

/** OIDs below this are built into every PostgreSQL server. */
const firstUserObjectId = 16_384;
const opColumn = '_tributary_op';
const unchangedColumn = '_tributary_unchanged';
/** In the stage of new rows that met a key already there: the order rows arrived in. */
const arrivalColumn = '_tributary_arrival';

export interface PostgresDestinationOptions {
  readonly system: 'Q' | 'PG';
  readonly mirrorColumns: MirrorColumns;
  readonly applicationName: string;
  readonly logger: Logger;
}

/**
 * A batch held behind someone else's lock on a destination table (an ALTER, a
 * LOCK TABLE, a long transaction holding a row) gives up after this and is
 * retried with backoff: the mirror's status then names the lock instead of the
 * mirror silently standing still.
 */
export const destinationLockTimeoutMs = 10_000;

/** The savepoint around a COPY of new rows into a target table (#copyNewRows). */
const newRowsSavepoint = 'tributary_new_rows';
/** SQLSTATE unique_violation. */
const uniqueViolation = '23505';

export class PostgresDestination implements Destination<PostgresTableChanges> {
  readonly #config: RelationalConfig;
  readonly #options: PostgresDestinationOptions;
  #pool: PgPool | undefined;
  /**
   * A batch's changes are held as the COPY text they are written in
   * (table-changes.ts). New rows are COPYed into the table itself
   * (#writeNewRows), but not with a soft-delete or synced-at column: those
   * rows take the staged upsert like any change, which sets them.
   */
  readonly changeBuffer: (table: DestinationTable) => PostgresTableChanges;

  readonly shadowTables: PostgresShadowTables;

  constructor(config: RelationalConfig, options: PostgresDestinationOptions) {
    this.#config = config;
    this.#options = options;
    this.changeBuffer = (table) => this.#tableChanges(table);
    this.shadowTables = new PostgresShadowTables(() => this.#connection());
  }

  #tableChanges(table: DestinationTable): PostgresTableChanges {
    const { softDeleteColumn, syncedAtColumn } = this.#options.mirrorColumns;
    return new PostgresTableChanges(table, !softDeleteColumn && !syncedAtColumn);
  }

  async #connection(): Promise<pg.Pool> {
    this.#pool ??= await openPostgresPool(this.#config, {
      applicationName: this.#options.applicationName,
      side: 'destination',
      maxConnections: 8,
      lockTimeoutMs: destinationLockTimeoutMs,
    });
    return this.#pool.pool;
  }

  async check(): Promise<{ version: string }> {
    const pool = await this.#connection();
    try {
      const result = await pool.query<{ version: string }>(
        `SELECT current_setting('server_version') AS version`,
      );
      return { version: result.rows[0]?.version ?? 'unknown' };
    } catch (error) {
      throw classifyPgError(error, 'destination: read the server version', 'connection');
    }
  }

  async close(): Promise<void> {
    const pool = this.#pool;
    this.#pool = undefined;
    await pool?.close();
  }

  async setupTables(tables: readonly DestinationTable[]): Promise<void> {
    // Rows are written by key (upserts, deletes): a table without one would load
    // and then fail at its first change, so it is refused before anything is written.
    const keyless = tables.find((table) => table.keyColumns.length === 0);
    if (keyless) {
      throw new EngineError(
        'replica_identity',
        `source table ${formatTableName(keyless.source)} has no primary key or replica identity index, which a PostgreSQL destination needs to write rows by key (REPLICA IDENTITY FULL is not enough)`,
      );
    }
    const pool = await this.#connection();
    try {
      await createCheckpointTable(pool);
      for (const table of tables) {
        await pool.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(table.destination.schema)}`);
        const definitions = [];
        for (const column of table.columns) {
          definitions.push(`${quoteIdent(column.name)} ${await this.#columnType(pool, column)}`);
        }
        const { softDeleteColumn, syncedAtColumn } = this.#options.mirrorColumns;
        if (softDeleteColumn)
          definitions.push(`${quoteIdent(softDeleteColumn)} boolean NOT NULL DEFAULT false`);
        if (syncedAtColumn)
          definitions.push(`${quoteIdent(syncedAtColumn)} timestamptz NOT NULL DEFAULT now()`);
        if (table.keyColumns.length > 0) {
          definitions.push(`PRIMARY KEY (${table.keyColumns.map(quoteIdent).join(', ')})`);
        }
        await pool.query(
          `CREATE TABLE IF NOT EXISTS ${quoteTable(table.destination)} (${definitions.join(', ')})`,
        );
      }
    } catch (error) {
      throw classifyPgError(error, 'destination: create tables', 'destination_write');
    }
  }

  /**
   * Built-in types keep their exact declaration. A user-defined type (enum,
   * domain, extension type) keeps its name only with system PG and only when the
   * destination has a type of that name; otherwise a domain becomes the type it
   * is over, and anything else holds its text.
   */
  async #columnType(pool: pg.Pool | pg.PoolClient, column: SourceColumn): Promise<string> {
    if (column.typeOid < firstUserObjectId) return column.typeName;
    if (this.#options.system === 'PG') {
      const found = await pool.query<{ oid: string | null }>(`SELECT to_regtype($1)::oid::text AS oid`, [
        column.typeName,
      ]);
      if (found.rows[0]?.oid) return column.typeName;
    }
    return column.domainBaseTypeName ?? 'text';
  }

  async tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]> {
    const pool = await this.#connection();
    const states: DestinationTableState[] = [];
    try {
      for (const table of tables) {
        const found = await pool.query<{ exists: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS exists`, [
          quoteTable(table.destination),
        ]);
        if (!found.rows[0]?.exists) {
          states.push('absent');
          continue;
        }
        const rows = await pool.query(`SELECT 1 FROM ${quoteTable(table.destination)} LIMIT 1`);
        states.push((rows.rowCount ?? 0) > 0 ? 'populated' : 'empty');
      }
    } catch (error) {
      throw classifyPgError(error, 'destination: inspect tables', 'destination_write');
    }
    return states;
  }

  async truncateTables(tables: readonly DestinationTable[]): Promise<void> {
    if (tables.length === 0) return;
    const pool = await this.#connection();
    try {
      await pool.query(`TRUNCATE ${tables.map((table) => quoteTable(table.destination)).join(', ')}`);
    } catch (error) {
      throw classifyPgError(error, 'destination: truncate tables', 'destination_write');
    }
  }

  async writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number> {
    const pool = await this.#connection();
    let client: pg.PoolClient | undefined;
    try {
      // Inside the try: a refused connection is classified like any other failure.
      client = await pool.connect();
      const columns = table.columns.map((column) => quoteIdent(column.name)).join(', ');
      const sink = client.query(copyFrom(`COPY ${quoteTable(table.destination)} (${columns}) FROM STDIN`));
      await pipeline(copyText, sink);
      return sink.rowCount ?? 0;
    } catch (error) {
      throw classifyPgError(
        error,
        `destination: load ${quoteTable(table.destination)}`,
        'destination_write',
        {
          privileges: 'INSERT on the destination table',
        },
      );
    } finally {
      client?.release();
    }
  }

  async readCheckpoint(mirror: string): Promise<Checkpoint | undefined> {
    const pool = await this.#connection();
    try {
      return await readCheckpointRow(pool, mirror);
    } catch (error) {
      throw classifyPgError(error, 'destination: read checkpoint', 'destination_write');
    }
  }

  async removeCheckpoint(mirror: string): Promise<void> {
    const pool = await this.#connection();
    try {
      // A mirror refused before setup never made the checkpoint table: nothing to remove.
      const found = await pool.query<{ exists: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS exists`, [
        checkpointTable,
      ]);
      if (!found.rows[0]?.exists) return;
      await pool.query(`DELETE FROM ${checkpointTable} WHERE mirror = $1`, [mirror]);
    } catch (error) {
      throw classifyPgError(error, 'destination: remove checkpoint', 'destination_write');
    }
  }

  async refuseAlteration({ before, changes }: TableAlteration): Promise<string | undefined> {
    // Rows are written by key: the key's columns stay as long as the source's key does.
    const droppedKey = changes.find(
      (change) => change.kind === 'drop' && before.keyColumns.includes(change.name),
    );
    return droppedKey?.kind === 'drop'
      ? `the key column ${droppedKey.name} was dropped; the destination writes rows by key`
      : undefined;
  }

  async alterColumns({ before, changes }: TableAlteration): Promise<void> {
    const target = quoteTable(before.destination);
    const pool = await this.#connection();
    let client: pg.PoolClient | undefined;
    try {
      client = await pool.connect();
      // One transaction: the table takes the whole alteration or none of it.
      await client.query('BEGIN');
      const present = await client.query<{ attname: string }>(
        `SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`,
        [target],
      );
      const columns = new Set(present.rows.map((row) => row.attname));
      for (const change of changes) {
        switch (change.kind) {
          case 'add': {
            const type = await this.#columnType(client, change.column);
            await client.query(
              `ALTER TABLE ${target} ADD COLUMN IF NOT EXISTS ${quoteIdent(change.column.name)} ${type}`,
            );
            columns.add(change.column.name);
            break;
          }
          case 'drop':
            await client.query(`ALTER TABLE ${target} DROP COLUMN IF EXISTS ${quoteIdent(change.name)}`);
            columns.delete(change.name);
            break;
          case 'rename':
            // Made already when the new name is there and the old one is not (a replay).
            if (!columns.has(change.from) || columns.has(change.to)) break;
            await client.query(
              `ALTER TABLE ${target} RENAME COLUMN ${quoteIdent(change.from)} TO ${quoteIdent(change.to)}`,
            );
            columns.delete(change.from);
            columns.add(change.to);
            break;
          case 'retype': {
            const type = await this.#columnType(client, change.after);
            const column = quoteIdent(change.name);
            await client.query(
              `ALTER TABLE ${target} ALTER COLUMN ${column} TYPE ${type} USING ${column}::${type}`,
            );
            break;
          }
        }
      }
      await client.query('COMMIT');
    } catch (error) {
      await client?.query('ROLLBACK').catch(() => {});
      throw classifyPgError(error, `destination: alter the columns of ${target}`, 'schema_mismatch');
    } finally {
      client?.release();
    }
  }

  async syncBatch(batch: ChangeBatch<PostgresTableChanges>): Promise<void> {
    const pool = await this.#connection();
    let client: pg.PoolClient | undefined;
    try {
      // Inside the try: a destination that refuses connections during CDC is a
      // connection fault, retried, not an unexpected one.
      client = await pool.connect();
      await client.query('BEGIN');
      const storedBatchId = await lockStoredBatchId(client, batch.mirror);
      if (storedBatchId >= batch.batchId) {
        await client.query('ROLLBACK');
        this.#options.logger.info({ batchId: String(batch.batchId) }, 'batch already applied, skipped');
        return;
      }
      for (const [index, tableChanges] of batch.tables.entries()) {
        try {
          await this.#applyTable(client, tableChanges, index);
        } catch (error) {
          // A row or shape this table refuses is its own fault; anything else
          // is the batch's, classified as such below.
          const target = quoteTable(tableChanges.table.destination);
          const fault = tableFault(
            classifyPgError(error, `destination: apply the changes of ${target} (batch ${batch.batchId})`),
            formatTableName(tableChanges.table.source),
          );
          throw fault.table === undefined ? error : fault;
        }
      }
      for (const swap of batch.swaps ?? []) {
        try {
          await swapIn(client, swap);
        } catch (error) {
          // A view on the live table, say: the resync cannot replace it.
          throw tableFault(
            classifyPgError(
              error,
              `destination: replace ${quoteTable(swap.live.destination)} by its resync`,
              'schema_mismatch',
            ),
            formatTableName(swap.live.source),
          );
        }
      }
      await writeCheckpoint(client, batch);
      await client.query('COMMIT');
    } catch (error) {
      await client?.query('ROLLBACK').catch(() => {});
      throw classifyPgError(error, `destination: sync batch ${batch.batchId}`, 'destination_write', {
        privileges: `INSERT, UPDATE and DELETE (TRUNCATE for truncates) on ${batch.tables
          .map((changes) => quoteTable(changes.table.destination))
          .join(', ')} and on ${checkpointTable}`,
      });
    } finally {
      client?.release();
    }
  }

  /**
   * A table's rows inserted before its other changes in the batch (held as
   * COPY lines, table-changes.ts): each key was absent from the source when the batch began,
   * so (the destination holding what the source held then) absent here too,
   * and the rows are COPYed into the table itself, without a stage and an
   * upsert from it (about half the server's work per row). Should a key be
   * there after all (a row written at the destination by someone else), the
   * COPY fails on it and is rolled back to its savepoint, and the rows are
   * upserted from a stage instead, the last of a key winning.
   */
  async #writeNewRows(
    client: pg.PoolClient,
    table: DestinationTable,
    rows: CopyTextRows,
    index: number,
  ): Promise<void> {
    const target = quoteTable(table.destination);
    const columns = table.columns.map((column) => quoteIdent(column.name)).join(', ');
    await client.query(`SAVEPOINT ${newRowsSavepoint}`);
    try {
      await pipeline(
        Readable.from(rows.chunks()),
        client.query(copyFrom(`COPY ${target} (${columns}) FROM STDIN`)),
      );
      await client.query(`RELEASE SAVEPOINT ${newRowsSavepoint}`);
      return;
    } catch (error) {
      if ((error as { code?: unknown }).code !== uniqueViolation) throw error;
      await client.query(`ROLLBACK TO SAVEPOINT ${newRowsSavepoint}`);
      this.#options.logger.info(
        { table: formatTableName(table.destination) },
        'inserted keys were already at the destination; the batch upserts them instead',
      );
    }
    const stage = quoteIdent(`_tributary_new_${index}`);
    await client.query(
      `CREATE TEMP TABLE ${stage} ON COMMIT DROP AS SELECT ${columns} FROM ${target} WITH NO DATA`,
    );
    // Rows of one COPY get their identities in the order they are read.
    await client.query(
      `ALTER TABLE ${stage} ADD COLUMN ${arrivalColumn} bigint GENERATED ALWAYS AS IDENTITY`,
    );
    await pipeline(
      Readable.from(rows.chunks()),
      client.query(copyFrom(`COPY ${stage} (${columns}) FROM STDIN`)),
    );
    const keys = table.keyColumns.map(quoteIdent).join(', ');
    await client.query(
      `INSERT INTO ${target} (${columns})
       SELECT DISTINCT ON (${keys}) ${columns} FROM ${stage} ORDER BY ${keys}, ${arrivalColumn} DESC
       ${onConflict(table, [])}`,
    );
  }

  async #applyTable(
    client: pg.PoolClient,
    { table, held }: TableChanges<PostgresTableChanges>,
    index: number,
  ): Promise<void> {
    const keyPositions = keyIndexes(table);
    if (keyPositions.length === 0 || keyPositions.includes(-1)) {
      throw new EngineError('config', `destination table ${quoteTable(table.destination)} has no usable key`);
    }
    const { truncated, newRows, staged } = held;
    if (truncated) {
      const { softDeleteColumn, syncedAtColumn } = this.#options.mirrorColumns;
      const target = quoteTable(table.destination);
      if (softDeleteColumn) {
        const syncedAt = syncedAtColumn ? `, ${quoteIdent(syncedAtColumn)} = now()` : '';
        await client.query(`UPDATE ${target} SET ${quoteIdent(softDeleteColumn)} = true${syncedAt}`);
      } else {
        await client.query(`TRUNCATE ${target}`);
      }
    }
    if (newRows) await this.#writeNewRows(client, table, newRows, index);
    if (staged) await this.#applyStaged(client, table, staged, index);
  }

  /** A table's upserts and deletes, one per key, through a stage table (staged-changes.ts). */
  async #applyStaged(
    client: pg.PoolClient,
    table: DestinationTable,
    staged: StagedChanges,
    index: number,
  ): Promise<void> {
    const { chunks, upsertCount, deleteCount, mayKeepUnchanged, moves } = staged.fold();
    if (upsertCount === 0 && deleteCount === 0) return;
    const target = quoteTable(table.destination);
    const { softDeleteColumn, syncedAtColumn } = this.#options.mirrorColumns;
    const syncedAt = syncedAtColumn ? `, ${quoteIdent(syncedAtColumn)} = now()` : '';
    const columns = table.columns.map((column) => quoteIdent(column.name));
    const stage = quoteIdent(`_tributary_stage_${index}`);
    await client.query(
      `CREATE TEMP TABLE ${stage} ON COMMIT DROP AS
       SELECT ''::text AS ${opColumn}, NULL::text[] AS ${unchangedColumn}, ${columns.join(', ')}
       FROM ${target} WITH NO DATA`,
    );
    await pipeline(Readable.from(chunks), client.query(copyFrom(`COPY ${stage} FROM STDIN`)));

    const keyMatch = table.keyColumns
      .map((name) => `t.${quoteIdent(name)} = s.${quoteIdent(name)}`)
      .join(' AND ');
    // Before the old keys go: rows moved to a new key take their unchanged
    // TOAST values from the row under the old key.
    if (moves.length > 0) await this.#fillMoves(client, table, stage, moves, index);
    if (deleteCount > 0) {
      if (softDeleteColumn) {
        await client.query(
          `UPDATE ${target} t SET ${quoteIdent(softDeleteColumn)} = true${syncedAt}
           FROM ${stage} s WHERE s.${opColumn} = 'D' AND ${keyMatch}`,
        );
      } else {
        await client.query(
          `DELETE FROM ${target} t USING ${stage} s WHERE s.${opColumn} = 'D' AND ${keyMatch}`,
        );
      }
    }
    if (upsertCount === 0) return;

    const extraNames = [softDeleteColumn, syncedAtColumn].filter((name): name is string => Boolean(name));
    const insertColumns = [...columns, ...extraNames.map(quoteIdent)].join(', ');
    const extraValues = [softDeleteColumn ? 'false' : undefined, syncedAtColumn ? 'now()' : undefined]
      .filter(Boolean)
      .map((value) => `, ${value}`)
      .join('');
    await client.query(
      `INSERT INTO ${target} (${insertColumns})
       SELECT ${columns.join(', ')}${extraValues} FROM ${stage}
       WHERE ${opColumn} = 'U' AND ${unchangedColumn} IS NULL
       ${onConflict(table, extraNames)}`,
    );

    if (!mayKeepUnchanged) return;
    // Rows whose TOASTed values did not change: keep the destination's value.
    const assignments = keptUnchanged(table, 't');
    if (softDeleteColumn) assignments.push(`${quoteIdent(softDeleteColumn)} = false`);
    if (syncedAtColumn) assignments.push(`${quoteIdent(syncedAtColumn)} = now()`);
    await client.query(
      `UPDATE ${target} t SET ${assignments.join(', ')}
       FROM ${stage} s WHERE s.${opColumn} = 'U' AND s.${unchangedColumn} IS NOT NULL AND ${keyMatch}`,
    );
    const inserted = await client.query(
      `INSERT INTO ${target} (${insertColumns})
       SELECT ${columns.join(', ')}${extraValues} FROM ${stage}
       WHERE ${opColumn} = 'U' AND ${unchangedColumn} IS NOT NULL
       ON CONFLICT (${table.keyColumns.map(quoteIdent).join(', ')}) DO NOTHING`,
    );
    if ((inserted.rowCount ?? 0) > 0) {
      this.#options.logger.warn(
        { table: formatTableName(table.destination), rowCount: inserted.rowCount },
        'updated rows were missing at the destination; their unchanged TOAST columns were written as null',
      );
    }
  }

  /**
   * Fills the unchanged-TOAST cells of the stage's moved rows (staged-changes.ts,
   * `moves`) from the destination's rows under their old keys, through a stage
   * of the key pairs; a filled line is an ordinary upsert from then on.
   */
  async #fillMoves(
    client: pg.PoolClient,
    table: DestinationTable,
    stage: string,
    moves: readonly KeyMove[],
    index: number,
  ): Promise<void> {
    const target = quoteTable(table.destination);
    const movesTable = quoteIdent(`_tributary_moves_${index}`);
    const keys = table.keyColumns.map(quoteIdent);
    const newKey = (position: number) => quoteIdent(`_new_${position}`);
    const oldKey = (position: number) => quoteIdent(`_old_${position}`);
    await client.query(
      `CREATE TEMP TABLE ${movesTable} ON COMMIT DROP AS
       SELECT ${[...keys.map((key, at) => `${key} AS ${newKey(at)}`), ...keys.map((key, at) => `${key} AS ${oldKey(at)}`)].join(', ')}
       FROM ${target} WITH NO DATA`,
    );
    const lines = moves.map((move) => `${[...move.newKey, ...move.oldKey].map(escapeCopyText).join('\t')}\n`);
    await pipeline(
      Readable.from([Buffer.from(lines.join(''))]),
      client.query(copyFrom(`COPY ${movesTable} FROM STDIN`)),
    );
    await client.query(
      `UPDATE ${stage} s SET ${keptUnchanged(table, 'o').join(', ')}, ${unchangedColumn} = NULL
       FROM ${movesTable} m JOIN ${target} o ON ${keys.map((key, at) => `o.${key} = m.${oldKey(at)}`).join(' AND ')}
       WHERE s.${opColumn} = 'U' AND s.${unchangedColumn} IS NOT NULL
         AND ${keys.map((key, at) => `s.${key} = m.${newKey(at)}`).join(' AND ')}`,
    );
  }
}

/**
 * The assignments of a stage line's (`s`) values to a row's columns, but for
 * its unchanged-TOAST columns, which take the value of the destination row `kept`.
 */
function keptUnchanged(table: DestinationTable, kept: string): string[] {
  const keys = new Set(table.keyColumns);
  return table.columns
    .filter((column) => !keys.has(column.name))
    .map((column) => {
      const name = quoteIdent(column.name);
      return `${name} = CASE WHEN ${quoteLiteral(column.name)} = ANY(s.${unchangedColumn}) THEN ${kept}.${name} ELSE s.${name} END`;
    });
}

/**
 * The clause that turns an insert of `table`'s rows into an upsert: a key
 * already there gets the row's other columns, and `extraNames` (the mirror's
 * own columns, set by the insert's select list).
 */
function onConflict(table: DestinationTable, extraNames: readonly string[]): string {
  const keys = new Set(table.keyColumns);
  const updatable = [
    ...table.columns.map((column) => column.name).filter((name) => !keys.has(name)),
    ...extraNames,
  ];
  const action =
    updatable.length > 0
      ? `DO UPDATE SET ${updatable.map((name) => `${quoteIdent(name)} = EXCLUDED.${quoteIdent(name)}`).join(', ')}`
      : 'DO NOTHING';
  return `ON CONFLICT (${table.keyColumns.map(quoteIdent).join(', ')}) ${action}`;
}

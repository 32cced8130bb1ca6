// Reads chunks of a table in key order for the online backfill of a table
// added to a running mirror (source.ts, BackfillReader, has the contract;
// docs/engine.md, "Tables added to a running mirror", the algorithm). Each
// chunk is one read-only REPEATABLE READ transaction: `pg_current_snapshot()`
// first (its first statement takes the transaction's snapshot, and says which
// transactions it sees), then the rows with COPY (as the initial load reads
// them, in the same text output), then the WAL insert position. Every commit
// the snapshot sees was inserted in the WAL before the snapshot was taken, so
// the position read after it is at or past each of them; the insert position
// rather than the write position covers `synchronous_commit = off`, whose
// commits are visible before their WAL is written.
import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { EngineError } from '../../../errors.ts';
import { parseLsn } from '../../../model/lsn.ts';
import { formatTableName } from '../../../resources/mirror.ts';
import { classifyPgError } from '../../classify/index.ts';
import { copyTextRowBatches } from '../../copy-text.ts';
import type { Row } from '../../records.ts';
import { rowOfCells } from '../../rows.ts';
import type { BackfillChunk, BackfillChunkRequest, BackfillKeyColumn, BackfillReader } from '../../source.ts';
import type { PgConnection } from '../driver/connect.ts';
import { quoteIdent, quoteLiteral, quoteTable } from '../driver/sql.ts';

function keyExpression(column: BackfillKeyColumn): string {
  return column.byteOrdered ? `${quoteIdent(column.name)} COLLATE "C"` : quoteIdent(column.name);
}

function keyLiteral(column: BackfillKeyColumn, value: string): string {
  const literal = `${quoteLiteral(value)}::${column.typeName}`;
  return column.byteOrdered ? `${literal} COLLATE "C"` : literal;
}

/** The COPY of the range: keys above `after`, in key order, at most `limit`. */
export function rangeCopyCommand(request: BackfillChunkRequest): string {
  const { key, after } = request;
  const columns = request.columns.map(quoteIdent).join(', ');
  const conditions =
    after === null
      ? []
      : [
          `(${key.map(keyExpression).join(', ')}) > (${key
            .map((column, index) => keyLiteral(column, after[index] ?? ''))
            .join(', ')})`,
        ];
  // One expression (rowFilterSchema), kept inside its parentheses.
  if (request.rowFilter !== undefined) conditions.push(`(${request.rowFilter})`);
  const where = conditions.length > 0 ? ` WHERE ${conditions.join(' AND ')}` : '';
  return `COPY (SELECT ${columns} FROM ${quoteTable(request.table)}${where} ORDER BY ${key
    .map(keyExpression)
    .join(', ')} LIMIT ${Math.max(0, Math.floor(request.limit))}) TO STDOUT`;
}

/** The COPY of the rows of the pending keys. */
export function pendingCopyCommand(request: BackfillChunkRequest): string {
  const { key } = request;
  const columns = request.columns.map(quoteIdent).join(', ');
  const matches = request.pendingKeys.map(
    (values) =>
      `(${key.map((column, index) => `${keyExpression(column)} = ${keyLiteral(column, values[index] ?? '')}`).join(' AND ')})`,
  );
  const filter = request.rowFilter !== undefined ? ` AND (${request.rowFilter})` : '';
  return `COPY (SELECT ${columns} FROM ${quoteTable(request.table)} WHERE (${matches.join(' OR ')})${filter}) TO STDOUT`;
}

export class PostgresBackfillReader implements BackfillReader {
  readonly #open: () => Promise<PgConnection>;
  #connection: Promise<PgConnection> | undefined;

  constructor(open: () => Promise<PgConnection>) {
    this.#open = open;
  }

  async readChunk(request: BackfillChunkRequest): Promise<BackfillChunk> {
    this.#connection ??= this.#open();
    const connection = await this.#connection;
    const { client } = connection;
    const what = `source: backfill of ${formatTableName(request.table)}`;
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const snapshot = await client.query<{ snapshot: string }>(
        'SELECT pg_current_snapshot()::text AS snapshot',
      );
      const rows = request.limit > 0 ? await copyRows(client, rangeCopyCommand(request), request) : [];
      const pendingRows =
        request.pendingKeys.length > 0 ? await copyRows(client, pendingCopyCommand(request), request) : [];
      const high = await client.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
      await client.query('COMMIT');
      return {
        snapshot: snapshot.rows[0]?.snapshot ?? '',
        rows,
        pendingRows,
        highLsn: parseLsn(high.rows[0]?.lsn ?? '0/0'),
      };
    } catch (error) {
      // A COPY left unread holds the connection: drop it, the server rolls back.
      this.#connection = undefined;
      await connection.close().catch(() => {});
      if (error instanceof EngineError) throw error;
      throw classifyPgError(error, what);
    }
  }

  async close(): Promise<void> {
    const opening = this.#connection;
    this.#connection = undefined;
    const connection = await opening?.catch(() => undefined);
    await connection?.close().catch(() => {});
  }
}

async function copyRows(client: pg.Client, command: string, request: BackfillChunkRequest): Promise<Row[]> {
  const stream = client.query(copyTo(command));
  const rows: Row[] = [];
  for await (const batch of copyTextRowBatches(stream, { source: request.table, columns: request.columns })) {
    for (const cells of batch) rows.push(rowOfCells(cells));
  }
  return rows;
}

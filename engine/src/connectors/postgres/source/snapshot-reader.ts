// Reads a table for the initial load: splits it into ctid page ranges and
// streams each range with COPY under the slot's exported snapshot, so every
// partition sees the database exactly at the slot's consistent point.
import type { Readable } from 'node:stream';
import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { formatTableName, type TableName } from '../../../resources/mirror.ts';
import { classifyPgError } from '../../classify/index.ts';
import type { SnapshotPartition } from '../../source.ts';
import { quoteIdent, quoteLiteral, quoteTable } from '../driver/sql.ts';

/** Heap pages [fromPage, toPage); `toPage` null means to the end of the table. */
export type CtidRange = SnapshotPartition;

/** Assumed when the table was never analysed, so reltuples is unknown. */
const fallbackRowsPerPage = 100;

/**
 * Opens a read-only repeatable-read transaction on `client` that sees the
 * exported snapshot (or a fresh one when there is none to import).
 */
export async function beginSnapshotTransaction(
  client: pg.Client | pg.PoolClient,
  snapshotName: string | null,
) {
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    if (snapshotName) await client.query(`SET TRANSACTION SNAPSHOT ${quoteLiteral(snapshotName)}`);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw classifyPgError(error, 'source: import snapshot', 'source_setup');
  }
}

/** One heap the load reads: the table itself, or one leaf partition of a partitioned table. */
interface Heap {
  readonly leaf: TableName | undefined;
  readonly pages: number;
  readonly reltuples: number;
}

/**
 * Splits the table's pages into ranges of about `rowsPerPartition` rows each.
 * A partitioned table has no pages of its own: each of its leaf partitions
 * (at any depth, the default partition too) is split the same way and read
 * on its own, so every row is read exactly once and a large partitioned
 * table loads in parallel like any other.
 */
export async function planPartitions(
  client: pg.Client | pg.PoolClient,
  table: TableName,
  rowsPerPartition: number,
): Promise<CtidRange[]> {
  let heaps: Heap[];
  try {
    // pg_partition_tree lists nothing for a table that is not partitioned.
    const stats = await client.query<{
      schema: string;
      name: string;
      leaf: boolean;
      pages: string;
      reltuples: number;
    }>(
      `WITH target AS (SELECT $1::regclass AS oid),
       heaps AS (
         SELECT t.relid AS oid, true AS leaf FROM target, pg_partition_tree(target.oid) t
         WHERE t.isleaf AND t.relid <> target.oid
         UNION ALL
         SELECT target.oid, false FROM target JOIN pg_class c ON c.oid = target.oid WHERE c.relkind <> 'p')
       SELECT n.nspname AS schema, c.relname AS name, heaps.leaf,
         (pg_relation_size(c.oid) / current_setting('block_size')::int)::text AS pages, c.reltuples::float8 AS reltuples
       FROM heaps JOIN pg_class c ON c.oid = heaps.oid JOIN pg_namespace n ON n.oid = c.relnamespace
       ORDER BY n.nspname, c.relname`,
      [quoteTable(table)],
    );
    heaps = stats.rows.map((row) => ({
      leaf: row.leaf ? { schema: row.schema, table: row.name } : undefined,
      pages: Number(row.pages),
      reltuples: row.reltuples,
    }));
  } catch (error) {
    throw classifyPgError(error, `source: plan partitions of ${formatTableName(table)}`);
  }
  // A partitioned table without partitions: one read through it, which returns nothing.
  if (heaps.length === 0) return [{ fromPage: 0, toPage: null }];
  return heaps.flatMap((heap) => splitHeap(heap, rowsPerPartition));
}

function splitHeap({ leaf, pages, reltuples }: Heap, rowsPerPartition: number): CtidRange[] {
  const within = leaf ? { leaf } : {};
  if (pages === 0) return [{ fromPage: 0, toPage: null, ...within }];
  const rowsPerPage = reltuples > 0 ? Math.max(reltuples / pages, 1) : fallbackRowsPerPage;
  const pagesPerPartition = Math.max(1, Math.ceil(rowsPerPartition / rowsPerPage));
  const ranges: CtidRange[] = [];
  for (let fromPage = 0; fromPage < pages; fromPage += pagesPerPartition) {
    const toPage = fromPage + pagesPerPartition;
    // The last range is open-ended: the table may have grown since it was measured.
    ranges.push({ fromPage, toPage: toPage >= pages ? null : toPage, ...within });
  }
  return ranges;
}

export function partitionCopyCommand(
  table: TableName,
  columns: readonly string[],
  range: CtidRange,
  rowFilter?: string,
): string {
  const conditions = [];
  if (range.fromPage > 0) conditions.push(`ctid >= '(${range.fromPage},0)'::tid`);
  if (range.toPage !== null) conditions.push(`ctid < '(${range.toPage},0)'::tid`);
  // One expression (rowFilterSchema), kept inside its parentheses.
  if (rowFilter !== undefined) conditions.push(`(${rowFilter})`);
  const where = conditions.length > 0 ? ` WHERE ${conditions.join(' AND ')}` : '';
  // A leaf partition is read by itself: its ctids mean nothing through the parent.
  const heap = range.leaf ?? table;
  return `COPY (SELECT ${columns.map(quoteIdent).join(', ')} FROM ${quoteTable(heap)}${where}) TO STDOUT`;
}

/** One partition's COPY as it is being read, and how far it got. */
export interface PartitionCopy {
  /** The partition's rows as COPY text. */
  readonly stream: Readable;
  /** True once every row was read and the server ended the COPY: the connection takes queries again. */
  ended(): boolean;
  /** The error the COPY itself failed with (a server error, a lost connection), if it did. */
  failure(): unknown;
}

/** Streams one partition as COPY text. The caller's transaction must stay open until it ends. */
/** The error Node destroys a stream with when its reader leaves early (an async iterator's return). */
function destroyedByReader(error: unknown): boolean {
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown };
  return name === 'AbortError' || code === 'ABORT_ERR' || code === 'ERR_STREAM_PREMATURE_CLOSE';
}

export function copyPartition(
  client: pg.Client | pg.PoolClient,
  table: TableName,
  columns: readonly string[],
  range: CtidRange,
  rowFilter?: string,
): PartitionCopy {
  const stream = client.query(copyTo(partitionCopyCommand(table, columns, range, rowFilter)));
  let ended = false;
  let failure: unknown;
  stream.once('end', () => {
    ended = true;
  });
  // Also keeps a COPY whose reader gave up from throwing when its connection is
  // dropped: pg-copy-streams emits the driver's error on the stream. A reader
  // that stops early (a `for await` left on its own error) destroys the stream
  // with an AbortError: that is the reader's failure, not the source's.
  stream.on('error', (error: unknown) => {
    if (!destroyedByReader(error)) failure ??= error;
  });
  return { stream, ended: () => ended, failure: () => failure };
}

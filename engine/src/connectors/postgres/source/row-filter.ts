// Row filters at the source: PostgreSQL itself checks a table's filter before
// a mirror is created, names the columns it reads, and evaluates it over
// decoded rows where the publication cannot (PostgreSQL 13 and 14, or a
// publication the mirror does not own). Every statement holding the filter is
// sent with the extended protocol, whose Parse takes exactly one statement.
// https://www.postgresql.org/docs/current/logical-replication-row-filter.html
import type pg from 'pg';
import { formatTableName } from '../../../resources/mirror.ts';
import { classifyPgError } from '../../classify/index.ts';
import type { RowFilterEvaluation, SourceTableInfo } from '../../source.ts';
import { quoteIdent, quoteTable } from '../driver/sql.ts';
import { publicationFiltersServerVersionNum } from './slot.ts';

/** Objects with oids from here on are the database's own, not PostgreSQL's (FirstNormalObjectId). */
const firstUserOid = 16_384;

/** The statement once, with the extended protocol: a second statement in its text is a syntax error. */
function single(client: pg.Client, text: string, values: unknown[] = []) {
  return client.query({ text, values, queryMode: 'extended' } as pg.QueryConfig);
}

/** The message of a server error, with its detail as PostgreSQL gives it. */
function serverReason(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { message, detail, severity } = error as { message?: unknown; detail?: unknown; severity?: unknown };
  if (typeof severity !== 'string' || typeof message !== 'string') return undefined;
  return typeof detail === 'string' && detail.length > 0 ? `${message} (${detail})` : message;
}

export interface RowFilterCheck {
  /** PostgreSQL's reason for refusing the filter, if it does. */
  readonly problem?: string | undefined;
  /** The columns the filter reads, in attribute order. */
  readonly columns: readonly string[];
}

/**
 * Has the source check the filter of `table` without creating anything (in
 * a transaction rolled back). With `asPublication` (15+, the mirror's own
 * publication, whose creation needs the table's owner anyway) the server
 * makes it a publication's row filter and plans an UPDATE and a DELETE of the
 * table (EXPLAIN: nothing runs, no trigger fires), so every rule of
 * publication row filters is PostgreSQL's own, the replica identity rule
 * included. Otherwise the filter is an index expression over a temporary copy
 * of the table's columns: PostgreSQL refuses there what a publication refuses
 * too (subqueries, functions not IMMUTABLE, aggregates), and the rest (user
 * types and functions, the replica identity) is checked against its catalog.
 */
export async function checkRowFilter(
  client: pg.Client,
  info: SourceTableInfo,
  filter: string,
  asPublication: boolean,
): Promise<RowFilterCheck> {
  const shown = formatTableName(info.name);
  const refused = (reason: string) => ({ problem: `row filter of ${shown}: ${reason}`, columns: [] });
  await client.query('BEGIN');
  try {
    let columns: { name: string; type_oid: number }[];
    let userObjects = 0;
    try {
      if (asPublication) {
        await single(
          client,
          `CREATE PUBLICATION tributary_row_filter_check FOR TABLE ${quoteTable(info.name)} WHERE (${filter}) WITH (publish_via_partition_root = true)`,
        );
        const column = info.columns[0]?.name;
        if (column !== undefined) {
          await single(
            client,
            `EXPLAIN UPDATE ${quoteTable(info.name)} SET ${quoteIdent(column)} = ${quoteIdent(column)} WHERE false`,
          );
        }
        await single(client, `EXPLAIN DELETE FROM ${quoteTable(info.name)} WHERE false`);
        const read = await single(
          client,
          `SELECT a.attname AS name, a.atttypid::int AS type_oid
           FROM pg_publication p JOIN pg_publication_rel pr ON pr.prpubid = p.oid
           JOIN pg_depend d ON d.classid = 'pg_publication_rel'::regclass AND d.objid = pr.oid
           JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
           WHERE p.pubname = 'tributary_row_filter_check' AND d.refobjsubid > 0
           GROUP BY a.attnum, a.attname, a.atttypid ORDER BY a.attnum`,
        );
        columns = read.rows as { name: string; type_oid: number }[];
      } else {
        await single(
          client,
          `CREATE TEMPORARY TABLE tributary_row_filter_check (LIKE ${quoteTable(info.name)})`,
        );
        await single(
          client,
          `CREATE INDEX tributary_row_filter_check_index ON tributary_row_filter_check ((${filter}))`,
        );
        const read = await single(
          client,
          `SELECT a.attname AS name, a.atttypid::int AS type_oid
           FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
           WHERE d.classid = 'pg_class'::regclass AND d.objid = 'tributary_row_filter_check_index'::regclass
             AND d.refobjid = 'tributary_row_filter_check'::regclass AND d.refobjsubid > 0
           GROUP BY a.attnum, a.attname, a.atttypid ORDER BY a.attnum`,
        );
        columns = read.rows as { name: string; type_oid: number }[];
        // Functions, operators, types and collations of the database's own (a publication refuses them).
        const objects = await single(
          client,
          `SELECT count(*)::int AS n FROM pg_depend d
           WHERE d.classid = 'pg_class'::regclass AND d.objid = 'tributary_row_filter_check_index'::regclass
             AND d.refclassid IN ('pg_proc'::regclass, 'pg_operator'::regclass, 'pg_type'::regclass, 'pg_collation'::regclass)
             AND d.refobjid >= $1`,
          [firstUserOid],
        );
        userObjects = (objects.rows[0] as { n: number } | undefined)?.n ?? 0;
      }
    } catch (error) {
      const reason = serverReason(error);
      if (reason === undefined) throw error;
      return refused(reason);
    }
    if (userObjects > 0) {
      return refused(
        'User-defined or built-in mutable functions are not allowed, nor user-defined operators, types or collations',
      );
    }
    const userTyped = columns.filter((column) => column.type_oid >= firstUserOid);
    if (userTyped.length > 0) {
      return refused(
        `User-defined types are not allowed: column ${userTyped.map((column) => column.name).join(', ')}`,
      );
    }
    const identity = new Set(
      info.replicaIdentity === 'full' ? info.columns.map((c) => c.name) : info.keyColumns,
    );
    const outside = columns.filter((column) => !identity.has(column.name));
    if (outside.length > 0) {
      // PostgreSQL's words when it refuses such a table's UPDATE or DELETE (15+).
      return refused(
        `cannot update table "${info.name.table}" (Column used in the publication WHERE expression is not part of the replica identity.): ${outside
          .map((column) => column.name)
          .join(', ')} is not in the replica identity (${[...identity].join(', ') || 'none'})`,
      );
    }
    return { columns: columns.map((column) => column.name) };
  } catch (error) {
    throw classifyPgError(error, `source: check the row filter of ${shown}`, 'source_setup');
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
  }
}

/** Whether the server publishes row filters and column lists (15+). */
export async function serverFiltersPublications(client: pg.Client): Promise<boolean> {
  const result = await client.query<{ version: number }>(
    `SELECT current_setting('server_version_num')::int AS version`,
  );
  return (result.rows[0]?.version ?? 0) >= publicationFiltersServerVersionNum;
}

/**
 * Evaluates a filter over decoded rows on the source: each cell's text read
 * by its column type's input function, the expression by the server, so the
 * result is what a publication's row filter gives. One statement per call,
 * the values as one text array per column. True where the filter is true
 * (false and null leave the row out, as a publication does).
 */
export async function evaluateRowFilter(client: pg.Client, request: RowFilterEvaluation): Promise<boolean[]> {
  if (request.rows.length === 0) return [];
  const { columns } = request;
  const unnested = columns.map((_, index) => `$${index + 1}::text[]`).join(', ');
  const names = columns.map((_, index) => `c${index}`);
  const typed = columns
    .map((column, index) => `u.${names[index]}::${column.typeName} AS ${quoteIdent(column.name)}`)
    .join(', ');
  const ordinal = '"tributary ordinal"';
  const values = columns.map((_, index) => request.rows.map((row) => row[index] ?? null));
  const text =
    columns.length === 0
      ? `SELECT (${request.rowFilter}) IS TRUE AS ok FROM generate_series(1, $1::int) AS u(n) ORDER BY u.n`
      : `SELECT (${request.rowFilter}) IS TRUE AS ok FROM (SELECT ${typed}, u.${ordinal} FROM unnest(${unnested}) WITH ORDINALITY AS u(${names.join(', ')}, ${ordinal})) AS t ORDER BY t.${ordinal}`;
  try {
    const result = await single(client, text, columns.length === 0 ? [request.rows.length] : values);
    return (result.rows as { ok: boolean }[]).map((row) => row.ok);
  } catch (error) {
    throw classifyPgError(error, `source: evaluate the row filter of ${formatTableName(request.table)}`);
  }
}

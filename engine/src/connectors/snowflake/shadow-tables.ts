// A Snowflake destination's shadow tables, for an online resync
// (docs/snowflake.md, "An online resync"). A table's resync loads into a table
// of the same name in a schema of the mirror's own, `_TRIBUTARY_RESYNC_<SCHEMA>`
// (a permanent schema: Snowflake swaps a permanent table only with another
// permanent one, so not the transient internal schema), created LIKE the live
// one with COPY GRANTS and marked by its comment.
//
// The swap cannot commit with the batch's checkpoint as PostgreSQL's does:
// `ALTER TABLE … SWAP WITH` is DDL, and DDL commits the open transaction
// first. So the batch that completes the copy commits its rows and checkpoint
// with a row in the internal SWAPS table saying the swap is due (batch.ts),
// and the swap is carried out after that commit by `completeSwaps`, which is
// idempotent: it runs again after any crash, before the next batch. What it
// must tell apart is whether the SWAP WITH already happened, which no row
// written before or after a DDL statement can say (the crash may fall between
// them). The tables themselves say it: the shadow carries the marker comment
// from its creation, and SWAP WITH exchanges the two objects, comment and
// grants included, so the marker is at the live name exactly when the swap is
// done. Then the old table (now at the shadow's name) gives the new live table
// its comment back and is dropped, and the SWAPS row goes.
import { EngineError } from '../../errors.ts';
import type { TableName } from '../../resources/mirror.ts';
import type { ShadowTables } from '../destination.ts';
import type { DestinationTable } from '../records.ts';
import { createInternalObjectsSql, type InternalObjects, internalSchemaName } from './internal.ts';
import type { SnowflakeSession } from './session.ts';
import { columnIdent, quoteIdent, snowflakeName, stringLiteral, tableIdent } from './sql.ts';

/** The schema holding the shadows of a schema's tables. */
export function shadowSchemaOf(schema: string): string {
  return `_tributary_resync_${schema}`;
}

/** The comment a mirror's shadow carries until it is the live table. */
export function shadowMarker(mirror: string): string {
  return `tributary: resync of mirror ${mirror}, not yet in place`;
}

export interface ShadowContext {
  readonly database: string;
  readonly mirror: string;
  readonly objects: InternalObjects;
  /** Runs `work` on a session of the destination, errors classified. */
  readonly withSession: <T>(what: string, work: (session: SnowflakeSession) => Promise<T>) => Promise<T>;
}

export class SnowflakeShadowTables implements ShadowTables {
  readonly intoLive = false;
  readonly #context: ShadowContext;

  constructor(context: ShadowContext) {
    this.#context = context;
  }

  shadowOf(live: DestinationTable): DestinationTable {
    return {
      ...live,
      destination: { schema: shadowSchemaOf(live.destination.schema), table: live.destination.table },
    };
  }

  async create(live: DestinationTable, shadow: DestinationTable): Promise<void> {
    const { database, mirror, objects } = this.#context;
    const target = tableIdent(database, shadow.destination);
    await this.#context.withSession(`create the resync table ${target}`, async (session) => {
      // SWAPS, for a destination set up before it existed.
      for (const statement of createInternalObjectsSql(objects)) await session.execute(statement);
      await session.execute(
        `CREATE SCHEMA IF NOT EXISTS ${quoteIdent(database)}.${columnIdent(shadow.destination.schema)}`,
      );
      // Dropped first, not CREATE OR REPLACE: COPY GRANTS then copies the grants of the LIKE table.
      await session.execute(`DROP TABLE IF EXISTS ${target}`);
      await session.execute(
        `CREATE TABLE ${target} LIKE ${tableIdent(database, live.destination)} COPY GRANTS`,
      );
      // Marked before any batch writes it: a resync with rows in its shadow has its marker.
      await session.execute(`COMMENT ON TABLE ${target} IS ${stringLiteral(shadowMarker(mirror))}`);
    });
  }

  async drop(shadow: DestinationTable): Promise<void> {
    const target = tableIdent(this.#context.database, shadow.destination);
    await this.#context.withSession(`drop ${target}`, async (session) => {
      await session.execute(`DROP TABLE IF EXISTS ${target}`);
    });
  }
}

interface TableInfo {
  readonly comment: string | null;
}

/** Whether each table exists, and its comment. */
async function tableInfo(
  session: SnowflakeSession,
  database: string,
  table: TableName,
): Promise<TableInfo | undefined> {
  // Not aliased "COMMENT": the emulator answers that column in lower case.
  const { rows } = await session.execute(
    `SELECT COMMENT AS "TABLE_COMMENT" FROM ${quoteIdent(database)}.INFORMATION_SCHEMA.TABLES
     WHERE TABLE_SCHEMA = ${stringLiteral(snowflakeName(table.schema))}
       AND TABLE_NAME = ${stringLiteral(snowflakeName(table.table))}`,
  );
  const row = rows[0];
  if (!row) return undefined;
  // The comment decides which table is which: never guessed from a column missing in the answer.
  if (!('TABLE_COMMENT' in row)) {
    throw new EngineError('internal', `the comment of ${tableIdent(database, table)} could not be read`);
  }
  const comment = row.TABLE_COMMENT;
  return { comment: comment === null || comment === undefined ? null : String(comment) };
}

/**
 * Puts the table at `shadowName` in `liveName`'s place, from whatever point an
 * earlier attempt reached (module comment): swapped unless the marker is
 * already at the live name, then the old table's comment given back and the
 * old table dropped. Idempotent.
 */
async function completeSwap(
  session: SnowflakeSession,
  context: ShadowContext,
  liveName: TableName,
  shadowName: TableName,
): Promise<void> {
  const { database, mirror } = context;
  const live = tableIdent(database, liveName);
  const shadow = tableIdent(database, shadowName);
  if ((await tableInfo(session, database, shadowName))?.comment === shadowMarker(mirror)) {
    // Atomic: readers of the live name see the old table or the new one.
    await session.execute(`ALTER TABLE ${live} SWAP WITH ${shadow}`);
  }
  const old = await tableInfo(session, database, shadowName);
  if (old) {
    // Snowflake keeps no null comment once one was set: an empty one is none.
    await session.execute(`COMMENT ON TABLE ${live} IS ${stringLiteral(old.comment ?? '')}`);
    await session.execute(`DROP TABLE IF EXISTS ${shadow}`);
  }
}

/**
 * Carries out the mirror's swaps that committed batches made due (SWAPS rows),
 * then forgets them; returns how many. Runs before a destination's first batch,
 * after a batch that carried swaps, and whenever a failure may have left one.
 */
export async function completeSwaps(session: SnowflakeSession, context: ShadowContext): Promise<number> {
  const { database, mirror, objects } = context;
  const { rows: found } = await session.execute(
    `SELECT COUNT(*) AS "FOUND" FROM ${quoteIdent(database)}.INFORMATION_SCHEMA.TABLES
     WHERE TABLE_SCHEMA = ${stringLiteral(internalSchemaName)} AND TABLE_NAME = ${stringLiteral(objects.swapsName)}`,
  );
  if (Number(found[0]?.FOUND ?? 0) === 0) return 0;
  const { rows } = await session.execute(
    `SELECT "LIVE_SCHEMA", "LIVE_TABLE", "SHADOW_SCHEMA", "SHADOW_TABLE" FROM ${objects.swaps}
     WHERE "MIRROR" = ${stringLiteral(mirror)} ORDER BY "BATCH_ID"`,
  );
  for (const row of rows) {
    const live = { schema: String(row.LIVE_SCHEMA), table: String(row.LIVE_TABLE) };
    const shadow = { schema: String(row.SHADOW_SCHEMA), table: String(row.SHADOW_TABLE) };
    await completeSwap(session, context, live, shadow);
    await session.execute(
      `DELETE FROM ${objects.swaps} WHERE "MIRROR" = ${stringLiteral(mirror)}
         AND "LIVE_SCHEMA" = ${stringLiteral(live.schema)} AND "LIVE_TABLE" = ${stringLiteral(live.table)}`,
    );
  }
  return rows.length;
}

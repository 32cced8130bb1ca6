// The connector's own objects in the peer's database, all in the transient
// schema _TRIBUTARY_INTERNAL (transient: no fail-safe storage is paid for rows
// that live for one batch): the stage files are PUT to, one changes table per
// mirror, the CHECKPOINTS table whose row a batch moves inside its own
// transaction, and SWAPS: the resyncs a committed batch made due, until their
// shadow is in the live table's place (shadow-tables.ts, docs/snowflake.md).
import type { ChangeBatch, TableSwap } from '../records.ts';
import { quoteIdent, snowflakeName, stringLiteral } from './sql.ts';

export const internalSchemaName = '_TRIBUTARY_INTERNAL';

export interface InternalObjects {
  readonly schema: string;
  readonly stage: string;
  /** `@stage` as a location, without a path. */
  readonly stageLocation: string;
  readonly changes: string;
  readonly checkpoints: string;
  readonly swaps: string;
  /** The bare names of the tables, as INFORMATION_SCHEMA.TABLES lists them. */
  readonly changesName: string;
  readonly checkpointsName: string;
  readonly swapsName: string;
}

export function internalObjects(database: string, mirror: string): InternalObjects {
  const schema = `${quoteIdent(database)}.${quoteIdent(internalSchemaName)}`;
  const changesName = `CHANGES_${snowflakeName(mirror)}`;
  return {
    schema,
    stage: `${schema}.${quoteIdent('STAGE')}`,
    stageLocation: `@${schema}.${quoteIdent('STAGE')}`,
    changes: `${schema}.${quoteIdent(changesName)}`,
    checkpoints: `${schema}.${quoteIdent('CHECKPOINTS')}`,
    swaps: `${schema}.${quoteIdent('SWAPS')}`,
    changesName,
    checkpointsName: 'CHECKPOINTS',
    swapsName: 'SWAPS',
  };
}

/** Idempotent DDL creating the internal objects; runs outside any transaction (DDL commits). */
export function createInternalObjectsSql(objects: InternalObjects): string[] {
  return [
    `CREATE TRANSIENT SCHEMA IF NOT EXISTS ${objects.schema}`,
    `CREATE STAGE IF NOT EXISTS ${objects.stage}`,
    // Rows live from a batch's COPY to its COMMIT: the source's columns travel
    // inside DATA, so a source schema change never alters this table.
    `CREATE TRANSIENT TABLE IF NOT EXISTS ${objects.changes} (
       "BATCH_ID" NUMBER(19,0) NOT NULL, "TABLE_NO" NUMBER(9,0) NOT NULL, "SEQ" NUMBER(19,0) NOT NULL,
       "OP" VARCHAR(1) NOT NULL, "DATA" VARIANT, "UNCHANGED" VARCHAR)`,
    `CREATE TABLE IF NOT EXISTS ${objects.checkpoints} (
       "MIRROR" VARCHAR NOT NULL, "BATCH_ID" NUMBER(19,0) NOT NULL, "LSN" NUMBER(20,0) NOT NULL,
       "UPDATED_AT" TIMESTAMP_TZ, "TXN_COMMIT_LSN" NUMBER(20,0), "TXN_CHANGE_LSN" NUMBER(20,0),
       "TXN_CHANGE_RANK" NUMBER(9,0))`,
    // The names as the engine holds them (DestinationTable.destination), not as Snowflake spells them.
    `CREATE TABLE IF NOT EXISTS ${objects.swaps} (
       "MIRROR" VARCHAR NOT NULL, "BATCH_ID" NUMBER(19,0) NOT NULL,
       "LIVE_SCHEMA" VARCHAR NOT NULL, "LIVE_TABLE" VARCHAR NOT NULL,
       "SHADOW_SCHEMA" VARCHAR NOT NULL, "SHADOW_TABLE" VARCHAR NOT NULL)`,
  ];
}

/** In a batch's transaction: `swap` is due once the batch commits (shadow-tables.ts completes it). */
export function recordSwapSql(
  objects: InternalObjects,
  mirror: string,
  batchId: bigint,
  { live, shadow }: TableSwap,
): string {
  const values = [
    mirror,
    live.destination.schema,
    live.destination.table,
    shadow.destination.schema,
    shadow.destination.table,
  ].map(stringLiteral);
  return `INSERT INTO ${objects.swaps} ("MIRROR", "BATCH_ID", "LIVE_SCHEMA", "LIVE_TABLE", "SHADOW_SCHEMA", "SHADOW_TABLE")
    SELECT ${values[0]}, ${batchId}, ${values.slice(1).join(', ')}`;
}

/** Makes the mirror's checkpoint row (batch 0: nothing synced) when it has none. */
export function ensureCheckpointRowSql(objects: InternalObjects, mirror: string): string {
  const name = stringLiteral(mirror);
  return `INSERT INTO ${objects.checkpoints} ("MIRROR", "BATCH_ID", "LSN", "UPDATED_AT")
    SELECT ${name}, 0, 0, CURRENT_TIMESTAMP()
    WHERE NOT EXISTS (SELECT 1 FROM ${objects.checkpoints} WHERE "MIRROR" = ${name})`;
}

export function readCheckpointSql(objects: InternalObjects, mirror: string): string {
  return `SELECT TO_VARCHAR("BATCH_ID") AS "BATCH_ID", TO_VARCHAR("LSN") AS "LSN",
      TO_VARCHAR("TXN_COMMIT_LSN") AS "TXN_COMMIT_LSN", TO_VARCHAR("TXN_CHANGE_LSN") AS "TXN_CHANGE_LSN",
      TO_VARCHAR("TXN_CHANGE_RANK") AS "TXN_CHANGE_RANK"
    FROM ${objects.checkpoints} WHERE "MIRROR" = ${stringLiteral(mirror)}`;
}

/**
 * The guard, first statement of a batch's transaction: it moves the checkpoint
 * only from the batch id read before the transaction. No row changed means
 * another writer (or an earlier attempt that did commit) got there first. It
 * also records, or clears, the position inside a transaction larger than a
 * batch (engine.md, "Transactions larger than a batch").
 */
export function moveCheckpointSql(
  objects: InternalObjects,
  mirror: string,
  previousBatchId: bigint,
  batch: Pick<ChangeBatch, 'batchId' | 'endLsn' | 'transactionPosition'>,
): string {
  const position = batch.transactionPosition;
  const positionSql = position
    ? `"TXN_COMMIT_LSN" = ${position.commitLsn}, "TXN_CHANGE_LSN" = ${position.changeLsn}, "TXN_CHANGE_RANK" = ${position.changeRank}`
    : `"TXN_COMMIT_LSN" = NULL, "TXN_CHANGE_LSN" = NULL, "TXN_CHANGE_RANK" = NULL`;
  return `UPDATE ${objects.checkpoints}
    SET "BATCH_ID" = ${batch.batchId}, "LSN" = ${batch.endLsn}, ${positionSql}, "UPDATED_AT" = CURRENT_TIMESTAMP()
    WHERE "MIRROR" = ${stringLiteral(mirror)} AND "BATCH_ID" = ${previousBatchId}`;
}

export function removeCheckpointSql(objects: InternalObjects, mirror: string): string {
  return `DELETE FROM ${objects.checkpoints} WHERE "MIRROR" = ${stringLiteral(mirror)}`;
}

/** Loads the staged files under `path` (a directory of one attempt) into the changes table. */
export function copyChangesSql(objects: InternalObjects, path: string): string {
  // CSV: the emulator loads CSV and Parquet but not JSON into several columns
  // (docs/snowflake.md, "File format"). FORCE: a retried attempt has new files
  // anyway, and load history must never skip a batch's rows. PURGE: the files
  // are not needed after the load.
  return `COPY INTO ${objects.changes} FROM ${objects.stageLocation}/${path}/
    FILE_FORMAT = (TYPE = CSV FIELD_OPTIONALLY_ENCLOSED_BY = '"' ESCAPE_UNENCLOSED_FIELD = NONE)
    FORCE = TRUE PURGE = TRUE`;
}

export function deleteStagedRowsSql(objects: InternalObjects, batchId: bigint): string {
  return `DELETE FROM ${objects.changes} WHERE "BATCH_ID" = ${batchId}`;
}

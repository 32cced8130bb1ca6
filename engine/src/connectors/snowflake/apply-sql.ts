// The set-based statements that apply one table's staged changes to its target
// table inside a batch's transaction. Each reads the batch's rows of the table
// from the changes table, typed back from VARIANT, deduplicated by key with
// QUALIFY (the engine sends one row per key; QUALIFY keeps a replayed or
// doubled row from making an UPDATE ... FROM nondeterministic). Order: truncate,
// deletes, updates of existing rows, inserts of missing ones.
import type { MirrorColumns } from '../destination.ts';
import type { DestinationTable } from '../records.ts';
import { dataKey, fillKey } from './changes-file.ts';
import type { InternalObjects } from './internal.ts';
import { columnIdent, quoteIdent } from './sql.ts';
import type { ColumnCodec } from './types.ts';

const unchangedAlias = quoteIdent('_TRIBUTARY_UNCHANGED');
const fillAlias = (index: number) => quoteIdent(`_TRIBUTARY_FILL_${index}`);

export interface TableApply {
  readonly table: DestinationTable;
  readonly target: string;
  readonly codecs: readonly ColumnCodec[];
  readonly tableNo: number;
  readonly truncated: boolean;
  readonly hasDeletes: boolean;
  readonly hasUpserts: boolean;
  /** Some upsert lacks an unchanged TOAST value: updates keep the target's value there. */
  readonly hasUnchanged: boolean;
  /** Some upsert changed its key and lacks a value: it is read from the row under the old key. */
  readonly fillsFromOldKey?: boolean;
}

function keyPositions(table: DestinationTable): number[] {
  return table.keyColumns.map((name) => table.columns.findIndex((column) => column.name === name));
}

/** The batch's staged rows of one table and op, typed as the target's columns. */
export function stagedRowsSql(
  objects: InternalObjects,
  apply: TableApply,
  batchId: bigint,
  op: 'U' | 'D',
  withFillKeys = false,
): string {
  const { table, codecs } = apply;
  const read = (index: number, key = dataKey(index)) => codecs[index]?.read(`c."DATA":${key}`) ?? 'NULL';
  const positions = op === 'D' ? keyPositions(table) : table.columns.map((_, index) => index);
  const columns = positions.map(
    (index) => `${read(index)} AS ${columnIdent(table.columns[index]?.name ?? '')}`,
  );
  if (withFillKeys) {
    for (const index of keyPositions(table))
      columns.push(`${read(index, fillKey(index))} AS ${fillAlias(index)}`);
  }
  const partition = keyPositions(table)
    .map((index) => read(index))
    .join(', ');
  // Only the rows that carry an old key to fill from.
  const onlyFilled = withFillKeys ? ` AND c."DATA":${fillKey(keyPositions(table)[0] ?? 0)} IS NOT NULL` : '';
  return `SELECT c."UNCHANGED" AS ${unchangedAlias}, ${columns.join(', ')}
    FROM ${objects.changes} c
    WHERE c."BATCH_ID" = ${batchId} AND c."TABLE_NO" = ${apply.tableNo} AND c."OP" = '${op}'${onlyFilled}
    QUALIFY ROW_NUMBER() OVER (PARTITION BY ${partition} ORDER BY c."SEQ" DESC) = 1`;
}

function keyMatch(table: DestinationTable): string {
  return table.keyColumns.map((name) => `t.${columnIdent(name)} = s.${columnIdent(name)}`).join(' AND ');
}

/** The statements applying one table's part of a batch, in order. */
export function applyTableSql(
  objects: InternalObjects,
  apply: TableApply,
  batchId: bigint,
  mirrorColumns: MirrorColumns,
): string[] {
  const { table, target } = apply;
  const statements: string[] = [];
  const softDelete = mirrorColumns.softDeleteColumn ? columnIdent(mirrorColumns.softDeleteColumn) : undefined;
  const syncedAt = mirrorColumns.syncedAtColumn ? columnIdent(mirrorColumns.syncedAtColumn) : undefined;
  const touch = syncedAt ? `, ${syncedAt} = CURRENT_TIMESTAMP()` : '';

  if (apply.truncated) {
    statements.push(
      softDelete ? `UPDATE ${target} SET ${softDelete} = TRUE${touch}` : `DELETE FROM ${target}`,
    );
  }
  if (apply.fillsFromOldKey) statements.push(refillSql(objects, apply, batchId, mirrorColumns));
  if (apply.hasDeletes) {
    const staged = stagedRowsSql(objects, apply, batchId, 'D');
    statements.push(
      softDelete
        ? `UPDATE ${target} t SET ${softDelete} = TRUE${touch} FROM (${staged}) s WHERE ${keyMatch(table)}`
        : `DELETE FROM ${target} t USING (${staged}) s WHERE ${keyMatch(table)}`,
    );
  }
  if (!apply.hasUpserts) return statements;

  const staged = stagedRowsSql(objects, apply, batchId, 'U');
  const keys = new Set(table.keyColumns);
  const assignments: string[] = [];
  table.columns.forEach((column, index) => {
    if (keys.has(column.name)) return;
    const name = columnIdent(column.name);
    assignments.push(
      apply.hasUnchanged
        ? `${name} = CASE WHEN SUBSTR(s.${unchangedAlias}, ${index + 1}, 1) = '1' THEN t.${name} ELSE s.${name} END`
        : `${name} = s.${name}`,
    );
  });
  if (softDelete) assignments.push(`${softDelete} = FALSE`);
  if (syncedAt) assignments.push(`${syncedAt} = CURRENT_TIMESTAMP()`);
  if (assignments.length > 0) {
    statements.push(
      `UPDATE ${target} t SET ${assignments.join(', ')} FROM (${staged}) s WHERE ${keyMatch(table)}`,
    );
  }
  const names = table.columns.map((column) => columnIdent(column.name));
  const insertNames = [...names];
  const insertValues = names.map((name) => `s.${name}`);
  if (softDelete) {
    insertNames.push(softDelete);
    insertValues.push('FALSE');
  }
  if (syncedAt) {
    insertNames.push(syncedAt);
    insertValues.push('CURRENT_TIMESTAMP()');
  }
  // A row updated with unchanged TOAST values but missing here gets NULL for
  // them, as in the other destinations: the source did not send the value.
  statements.push(
    `INSERT INTO ${target} (${insertNames.join(', ')})
     SELECT ${insertValues.join(', ')} FROM (${staged}) s
     WHERE NOT EXISTS (SELECT 1 FROM ${target} t WHERE ${keyMatch(table)})`,
  );
  return statements;
}

/**
 * Before the deletes (which remove the old key's row): the rows whose key
 * changed while some values were unchanged, inserted under the new key with
 * those values taken from the row under the old key. The update and insert
 * that follow then leave them as they are.
 */
function refillSql(
  objects: InternalObjects,
  apply: TableApply,
  batchId: bigint,
  mirrorColumns: MirrorColumns,
): string {
  const { table, target } = apply;
  const keys = new Set(table.keyColumns);
  const names: string[] = [];
  const values: string[] = [];
  table.columns.forEach((column, index) => {
    const name = columnIdent(column.name);
    names.push(name);
    values.push(
      keys.has(column.name)
        ? `s.${name}`
        : `CASE WHEN SUBSTR(s.${unchangedAlias}, ${index + 1}, 1) = '1' THEN o.${name} ELSE s.${name} END`,
    );
  });
  addMirrorColumns(names, values, mirrorColumns);
  const oldKeyMatch = keyPositions(table)
    .map((index) => `o.${columnIdent(table.columns[index]?.name ?? '')} = s.${fillAlias(index)}`)
    .join(' AND ');
  return `INSERT INTO ${target} (${names.join(', ')})
    SELECT ${values.join(', ')} FROM (${stagedRowsSql(objects, apply, batchId, 'U', true)}) s
    JOIN ${target} o ON ${oldKeyMatch}
    WHERE NOT EXISTS (SELECT 1 FROM ${target} t WHERE ${keyMatch(table)})`;
}

/** An inserted row is not deleted and is synced now: the mirror's own columns, when it has them. */
function addMirrorColumns(names: string[], values: string[], mirrorColumns: MirrorColumns): void {
  if (mirrorColumns.softDeleteColumn) {
    names.push(columnIdent(mirrorColumns.softDeleteColumn));
    values.push('FALSE');
  }
  if (mirrorColumns.syncedAtColumn) {
    names.push(columnIdent(mirrorColumns.syncedAtColumn));
    values.push('CURRENT_TIMESTAMP()');
  }
}

/** Loads a snapshot partition's staged rows (op 'U', batch id `token`) into the target. */
export function insertSnapshotSql(
  objects: InternalObjects,
  apply: TableApply,
  token: bigint,
  mirrorColumns: MirrorColumns,
): string {
  const { table, codecs, target } = apply;
  const names = table.columns.map((column) => columnIdent(column.name));
  const values = table.columns.map((_, index) => codecs[index]?.read(`c."DATA":${dataKey(index)}`) ?? 'NULL');
  addMirrorColumns(names, values, mirrorColumns);
  return `INSERT INTO ${target} (${names.join(', ')})
    SELECT ${values.join(', ')} FROM ${objects.changes} c WHERE c."BATCH_ID" = ${token}`;
}

// The shape each table's destination follows, at a start of the mirror's
// steps (catalog TableShape). A table that streams on is written in the shape
// recorded for it, not in the source's shape of now: the stream replays from
// the checkpoint, and a schema change made since is met in the stream, where
// it is settled at its place among the rows (schema-evolution.ts). A table
// loaded from nothing at this start (the initial load, one added, one
// stopped and loaded back on request) takes the source's shape of now: its
// destination table is altered to it first (a resync of a held table
// accepts its change this way), and that shape is recorded. An alteration
// the engine stopped in the middle of is completed first of all.
import type { TableShape, TableStatus } from '../catalog/catalog.ts';
import type { DestinationTable, SourceColumn } from '../connectors/records.ts';
import type { SourceTableInfo } from '../connectors/source.ts';
import { isEngineError } from '../errors.ts';
import { formatTableName, type TableMapping, type TableName } from '../resources/mirror.ts';
import { type MirrorContext, mirrorLog, watched } from './context.ts';
import { describeColumnChange, diffShapes } from './schema-diff.ts';
import { alteredTable } from './schema-evolution.ts';

/**
 * The shape of a table as the source has it now: every replicated column,
 * the mapping's excluded ones flagged; its identity, and its name now
 * (`currentName`) when that is not the mapping's.
 */
export function sourceShape(
  mapping: TableMapping,
  info: SourceTableInfo,
  table: DestinationTable,
  currentName: TableName = mapping.source,
): TableShape {
  const excluded = new Set(mapping.exclude);
  const renamed = formatTableName(currentName) !== formatTableName(mapping.source);
  return {
    source: info.columns.map(({ name, typeOid, typeModifier, attnum }) => ({
      name,
      typeOid,
      typeModifier,
      attnum,
      ...(excluded.has(name) ? { excluded: true } : {}),
    })),
    columns: table.columns,
    keyColumns: table.keyColumns,
    sourceOid: info.oid,
    ...(renamed ? { sourceName: formatTableName(currentName) } : {}),
  };
}

/** Whether a table is loaded from nothing at this start: its destination then takes the source's shape of now. */
export function loadsFromNothing(
  context: MirrorContext,
  status: TableStatus | undefined,
  initialLoadPending: boolean,
): boolean {
  // A load queued (a table back at the source, say), or a table mapped again after an edit removed it, starts from nothing too.
  if (initialLoadPending || !status || status.state === 'pending' || status.state === 'removed') return true;
  const token = context.spec.resyncTables[status.sourceTable];
  const resyncAsked = token !== undefined && token !== status.resyncToken;
  return resyncAsked && (status.state === 'errored' || status.state === 'held');
}

/**
 * The tables as the mirror writes them from this start: each streaming one
 * in its recorded shape, each one loaded from nothing (`fromNothing`) in the
 * source's shape of now, its destination altered to it first. Records every
 * shape the catalog does not have yet.
 */
export async function followedTables(
  context: MirrorContext,
  current: readonly { readonly table: DestinationTable; readonly shape: TableShape }[],
  fromNothing: (sourceTable: string) => boolean,
): Promise<DestinationTable[]> {
  const { spec, catalog, destination } = context;
  const recorded = await catalog.listTableShapes(spec.name);
  const tables: DestinationTable[] = [];
  for (const { table, shape } of current) {
    const sourceTable = formatTableName(table.source);
    const recordedShape = recorded.get(sourceTable);
    const known = recordedShape?.altering
      ? await completeAlteration(context, table, sourceTable, recordedShape, recordedShape.altering)
      : recordedShape;
    if (!known) {
      await catalog.recordTableShape(spec.name, sourceTable, shape);
      tables.push(table);
      continue;
    }
    const written = { ...table, columns: known.columns, keyColumns: known.keyColumns };
    if (!fromNothing(sourceTable)) {
      // A shape recorded before identities were takes the table's now.
      if (known.sourceOid === undefined) {
        await catalog.recordTableShape(spec.name, sourceTable, { ...known, sourceOid: shape.sourceOid });
      }
      tables.push(written);
      continue;
    }
    const changes = diffShapes(known.columns, table.columns);
    if (changes.length > 0) {
      const after = alteredTable(written, changes);
      const refusal = await destination.refuseAlteration({ before: written, after, changes });
      if (refusal) {
        // The load that follows writes the source's columns: it fails at
        // them, and the table stops with the destination's reason.
        await mirrorLog(
          context,
          'WARN',
          `${sourceTable} is loaded again in the source's shape, which its destination table cannot take: ${refusal}`,
        );
      } else {
        const described = changes.map(describeColumnChange).join(', ');
        try {
          await watched(context, `setup: destination: alter ${formatTableName(table.destination)}`, () =>
            destination.alterColumns({ before: written, after, changes }),
          );
          await mirrorLog(
            context,
            'INFO',
            `${sourceTable} takes the source's shape before it is loaded again: ${described}`,
          );
        } catch (error) {
          if (!isEngineError(error)) throw error;
          // Its load fails at those columns then, and the table stops with the reason.
          await mirrorLog(
            context,
            'WARN',
            `${sourceTable} is loaded again in the source's shape, but its destination table did not take it (${described}): ${error.message}`,
          );
        }
      }
    }
    await catalog.recordTableShape(spec.name, sourceTable, shape);
    tables.push(table);
  }
  return tables;
}

/**
 * Completes an alteration the engine stopped in the middle of (TableShape.altering)
 * before the table is set up or written: each change the destination made
 * already is left as it is (Destination.alterColumns), and the shape it makes
 * is recorded. Returns the shape the table follows now: the one it was altered
 * from when the destination refuses the rest (the stream meets the change again).
 */
async function completeAlteration(
  context: MirrorContext,
  table: DestinationTable,
  sourceTable: string,
  from: TableShape,
  altering: NonNullable<TableShape['altering']>,
): Promise<TableShape> {
  const described = altering.changes.map(describeColumnChange).join(', ');
  try {
    await watched(context, `setup: destination: alter ${formatTableName(table.destination)}`, () =>
      context.destination.alterColumns({
        before: { ...table, columns: from.columns, keyColumns: from.keyColumns },
        after: { ...table, columns: altering.to.columns, keyColumns: altering.to.keyColumns },
        changes: altering.changes,
      }),
    );
  } catch (error) {
    if (!isEngineError(error) || error.kind !== 'schema_mismatch') throw error;
    await mirrorLog(
      context,
      'WARN',
      `${sourceTable} could not complete the schema change the engine stopped in the middle of (${described}): ${error.message}`,
    );
    return from;
  }
  await context.catalog.recordTableShape(context.spec.name, sourceTable, altering.to);
  await mirrorLog(
    context,
    'INFO',
    `${sourceTable} follows its schema change at the destination, completed after the engine stopped in its middle: ${described}`,
  );
  return altering.to;
}

/**
 * `tables` in the shapes the catalog records now (a schema change settled
 * while streaming recorded one): a table whose shape is unchanged is the same
 * object, as the loads under way know it.
 */
export function inRecordedShapes(
  tables: readonly DestinationTable[],
  shapes: ReadonlyMap<string, TableShape>,
): DestinationTable[] {
  return tables.map((table) => {
    const shape = shapes.get(formatTableName(table.source));
    if (!shape) return table;
    const same =
      sameList(shape.keyColumns, table.keyColumns, (a, b) => a === b) &&
      sameList(shape.columns, table.columns, sameColumn);
    return same ? table : { ...table, columns: shape.columns, keyColumns: shape.keyColumns };
  });
}

function sameList<T>(a: readonly T[], b: readonly T[], same: (x: T, y: T) => boolean): boolean {
  return a.length === b.length && a.every((item, index) => same(item, b[index] as T));
}

/** Field by field: the catalog's JSON (jsonb) does not keep the order of an object's keys. */
function sameColumn(a: SourceColumn, b: SourceColumn): boolean {
  return (
    a.name === b.name &&
    a.typeOid === b.typeOid &&
    a.typeModifier === b.typeModifier &&
    a.typeName === b.typeName &&
    a.notNull === b.notNull &&
    a.domainBaseTypeName === b.domainBaseTypeName &&
    a.arrayDimensions === b.arrayDimensions &&
    a.attnum === b.attnum
  );
}

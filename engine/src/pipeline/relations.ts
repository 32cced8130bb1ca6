// Follows Relation messages: which mapped table a relation id is, how
// its tuple columns line up with the destination's, and what changed in its
// schema since the last message.
import type { RelationMessage, Tuple, UpdateMessage } from '../connectors/changes.ts';
import type { DestinationTable, Row, RowImage, SourceColumn, TupleCell } from '../connectors/records.ts';
import { filledRow, rowOfCells } from '../connectors/rows.ts';
import { formatTableName, type TableMapping, type TableName } from '../resources/mirror.ts';

export interface TrackedRelation {
  readonly table: DestinationTable;
  /** The source table as `schema.table` (formatTableName), made once rather than for every change. */
  readonly sourceName: string;
  /** For each destination column, its index in the relation's tuples (-1: dropped at the source). */
  readonly projection: readonly number[];
  /**
   * The projection keeps a tuple as it is (every column mapped, in source
   * order: the usual case), so `project` hands the decoded tuple on instead of
   * copying it for every change.
   */
  readonly keepsTupleOrder: boolean;
}

export interface SchemaChange {
  readonly table: DestinationTable;
  /** New source columns, not yet at the destination. Their type names still need resolving. */
  readonly added: readonly {
    readonly name: string;
    readonly typeOid: number;
    readonly typeModifier: number;
  }[];
  readonly dropped: readonly string[];
  readonly retyped: readonly string[];
}

export class RelationTracker {
  readonly #mappings: readonly TableMapping[];
  readonly #tablesBySource = new Map<string, DestinationTable>();
  readonly #relations = new Map<number, TrackedRelation>();
  /**
   * Relations followed as the mapped partitioned table they are partitions of
   * (by its source key), because their changes arrived under their own names.
   */
  readonly #partitionOf = new Map<number, string>();

  constructor(mappings: readonly TableMapping[], tables: readonly DestinationTable[]) {
    this.#mappings = mappings;
    for (const table of tables)
      this.#tablesBySource.set(sourceKey(table.source.schema, table.source.table), table);
  }

  /** The destination table a relation id maps to, if the mirror replicates it. */
  tableOf(relationId: number): TrackedRelation | undefined {
    return this.#relations.get(relationId);
  }

  get tables(): DestinationTable[] {
    return [...this.#tablesBySource.values()];
  }

  /** Whether the relation is a mapped table, by its name or as a partition followed as one. */
  maps(relation: Pick<RelationMessage, 'relationId' | 'schema' | 'name'>): boolean {
    return this.#tableFor(relation) !== undefined;
  }

  /** Whether the source table is mapped. */
  mapsSource(name: TableName): boolean {
    return this.#tablesBySource.has(sourceKey(name.schema, name.table));
  }

  /**
   * Follows a partition whose changes arrive under its own name as the mapped
   * table `ancestor` (columns matched by name, as a partition's may lie in
   * another order). Returns the schema change its Relation message announces.
   */
  followAsPartition(relation: RelationMessage, ancestor: TableName): SchemaChange | undefined {
    this.#partitionOf.set(relation.relationId, sourceKey(ancestor.schema, ancestor.table));
    return this.observe(relation);
  }

  /** Whether the relation is followed as a partition of a mapped table (followAsPartition). */
  isFollowedPartition(relationId: number): boolean {
    return this.#partitionOf.has(relationId);
  }

  /**
   * Records a Relation message. Returns the schema change it announces for a
   * mapped table, or undefined when nothing that matters changed.
   */
  observe(relation: RelationMessage): SchemaChange | undefined {
    const table = this.#tableFor(relation);
    if (!table) return undefined;
    const mapping = this.#mappings.find(
      (m) => m.source.schema === table.source.schema && m.source.table === table.source.table,
    );
    const excluded = new Set(mapping?.exclude ?? []);
    const known = new Map(table.columns.map((column) => [column.name, column]));
    const incoming = relation.columns.filter((column) => !excluded.has(column.name));
    const added = incoming
      .filter((column) => !known.has(column.name))
      .map(({ name, typeOid, typeModifier }) => ({ name, typeOid, typeModifier }));
    const present = new Set(relation.columns.map((column) => column.name));
    const dropped = table.columns.filter((column) => !present.has(column.name)).map((column) => column.name);
    const retyped = incoming
      .filter((column) => {
        const before = known.get(column.name);
        return (
          before !== undefined &&
          (before.typeOid !== column.typeOid || before.typeModifier !== column.typeModifier)
        );
      })
      .map((column) => column.name);
    this.#track(relation.relationId, relation, table);
    if (added.length === 0 && dropped.length === 0 && retyped.length === 0) return undefined;
    return { table, added, dropped, retyped };
  }

  /** Makes added columns part of the destination table (after the destination added them). */
  extend(
    table: DestinationTable,
    columns: readonly SourceColumn[],
    relation: RelationMessage,
  ): DestinationTable {
    const extended: DestinationTable = { ...table, columns: [...table.columns, ...columns] };
    this.#tablesBySource.set(sourceKey(table.source.schema, table.source.table), extended);
    this.#track(relation.relationId, relation, extended);
    return extended;
  }

  #tableFor(relation: Pick<RelationMessage, 'relationId' | 'schema' | 'name'>): DestinationTable | undefined {
    const key = this.#partitionOf.get(relation.relationId) ?? sourceKey(relation.schema, relation.name);
    return this.#tablesBySource.get(key);
  }

  #track(relationId: number, relation: RelationMessage, table: DestinationTable): void {
    const positions = new Map(relation.columns.map((column, index) => [column.name, index]));
    const projection = table.columns.map((column) => positions.get(column.name) ?? -1);
    const keepsTupleOrder =
      projection.length === relation.columns.length &&
      projection.every((position, index) => position === index);
    this.#relations.set(relationId, {
      table,
      sourceName: formatTableName(table.source),
      projection,
      keepsTupleOrder,
    });
  }
}

/** Reorders a tuple into destination column order. */
export function project(
  tuple: Tuple,
  { projection, keepsTupleOrder }: Pick<TrackedRelation, 'projection' | 'keepsTupleOrder'>,
): RowImage {
  // A decoded tuple belongs to its one change and is never changed afterwards.
  if (keepsTupleOrder && tuple.length === projection.length) return tuple;
  const row: TupleCell[] = new Array(projection.length);
  for (let index = 0; index < projection.length; index++) {
    const position = projection[index] ?? -1;
    row[index] = position < 0 ? null : (tuple[position] ?? null);
  }
  return row;
}

/**
 * A message's row in destination column order: the row itself when the
 * projection keeps it as it is (a view over the source's bytes stays one),
 * else its cells reordered.
 */
export function projectRow(row: Row, tracked: Pick<TrackedRelation, 'projection' | 'keepsTupleOrder'>): Row {
  if (tracked.keepsTupleOrder && row.width === tracked.projection.length) return row;
  return rowOfCells(project(row.cells(), tracked));
}

/**
 * An update's images in destination column order: the old key (or the whole
 * old row, REPLICA IDENTITY FULL) when the source sent one, and the new row,
 * its unchanged-TOAST cells filled from a whole old row.
 */
export function updatedRow(
  message: UpdateMessage,
  tracked: Pick<TrackedRelation, 'projection' | 'keepsTupleOrder'>,
): { readonly oldKey: Row | null; readonly newRow: Row } {
  const old = message.oldTuple ?? message.keyTuple;
  const oldKey = old ? projectRow(old, tracked) : null;
  const newRow = projectRow(message.newTuple, tracked);
  return { oldKey, newRow: message.oldTuple && oldKey ? filledRow(newRow, oldKey) : newRow };
}

function sourceKey(schema: string, table: string): string {
  return `${schema}\u0000${table}`;
}

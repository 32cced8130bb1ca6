// Follows Relation messages: which mapped table a relation id is, how
// its tuple columns line up with the destination's, and what changed in its
// schema since the last message.
import type { RelationMessage, Tuple, UpdateMessage } from '../connectors/changes.ts';
import type { DestinationTable, Row, RowImage, TupleCell } from '../connectors/records.ts';
import { filledRow, rowOfCells } from '../connectors/rows.ts';
import { formatTableName, type TableName } from '../resources/mirror.ts';
import type { ShapeColumn } from './schema-diff.ts';

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

/**
 * A source column of a table's shape as the mirror last followed it: every
 * column its Relation messages list, in attnum order, excluded ones too (so
 * that attnums line up, and an excluded column renamed stays excluded).
 */
export interface FollowedColumn extends ShapeColumn {
  /** Left out of the destination (the mapping's `exclude`, followed through renames). */
  readonly excluded?: boolean | undefined;
}

/** What the mirror follows of one source table: its source columns and its destination table. */
export interface FollowedShape {
  readonly source: readonly FollowedColumn[];
  readonly table: DestinationTable;
}

/** Who a mapped source table is: its identity (OID) and the name the destination follows it under. */
export interface FollowedIdentity {
  readonly oid?: number | undefined;
  /** `schema.table` (formatTableName); absent: the mapping's. */
  readonly name?: string | undefined;
}

export class RelationTracker {
  readonly #tablesBySource = new Map<string, DestinationTable>();
  /** Each mapped table's source columns as last followed, by source key. */
  readonly #sourceBySource = new Map<string, readonly FollowedColumn[]>();
  readonly #relations = new Map<number, TrackedRelation>();
  /** Relations whose last Relation message differs from the shape followed: settled before their next applied change. */
  readonly #unsettled = new Map<number, RelationMessage>();
  /**
   * Relations followed as the mapped partitioned table they are partitions of
   * (by its source key), because their changes arrived under their own names.
   */
  readonly #partitionOf = new Map<number, string>();
  /** Each mapped table's identity, by source key, and the other way round. */
  readonly #oidBySource = new Map<string, number>();
  readonly #sourceByOid = new Map<number, string>();
  /** The name (formatTableName) each mapped table is followed under, by source key. */
  readonly #nameBySource = new Map<string, string>();

  /**
   * `shapes`: the source columns each table was last followed with (by
   * formatTableName of its source); a table without one is taken as its
   * destination columns show it, plus the mapping's excluded columns unknown.
   * `identities`: who each table is (by formatTableName of its source): a
   * relation is its table by identity first, so a renamed table stays itself.
   */
  constructor(
    tables: readonly DestinationTable[],
    shapes: ReadonlyMap<string, readonly FollowedColumn[]> = new Map(),
    identities: ReadonlyMap<string, FollowedIdentity> = new Map(),
  ) {
    for (const table of tables) {
      const key = sourceKey(table.source.schema, table.source.table);
      const name = formatTableName(table.source);
      this.#tablesBySource.set(key, table);
      this.#sourceBySource.set(key, shapes.get(name) ?? followedColumnsOf(table));
      const identity = identities.get(name);
      this.#nameBySource.set(key, identity?.name ?? name);
      if (identity?.oid !== undefined) {
        this.#oidBySource.set(key, identity.oid);
        this.#sourceByOid.set(identity.oid, key);
      }
    }
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
   * another order); its Relation message is observed as that table's.
   */
  followAsPartition(relation: RelationMessage, ancestor: TableName): void {
    this.#partitionOf.set(relation.relationId, sourceKey(ancestor.schema, ancestor.table));
    this.observe(relation);
  }

  /** Whether the relation is followed as a partition of a mapped table (followAsPartition). */
  isFollowedPartition(relationId: number): boolean {
    return this.#partitionOf.has(relationId);
  }

  /**
   * Records a Relation message of a mapped table. When it lists the columns
   * the table is followed with (names and types), it is settled at once;
   * otherwise the relation is unsettled until `follow` is given the shape
   * that follows it (schema-evolution.ts). Either way the relation is
   * tracked, against the table as it is.
   */
  observe(relation: RelationMessage): void {
    const key = this.#keyFor(relation);
    const table = key === undefined ? undefined : this.#tablesBySource.get(key);
    if (key === undefined || !table) return;
    this.#track(relation.relationId, relation, table);
    const same =
      sameColumns(this.#sourceBySource.get(key) ?? [], relation) &&
      this.renameOf(relation) === undefined &&
      sameKey(announcedKey(relation) ?? table.keyColumns, table.keyColumns);
    if (same) this.#unsettled.delete(relation.relationId);
    else this.#unsettled.set(relation.relationId, relation);
  }

  /**
   * The relation's name (formatTableName) when it is not the name its table
   * is followed under: the table was renamed at the source. Never for a
   * partition followed as its table (its name is its own).
   */
  renameOf(relation: RelationMessage): string | undefined {
    if (this.#partitionOf.has(relation.relationId)) return undefined;
    const key = this.#keyFor(relation);
    const name = formatTableName({ schema: relation.schema, table: relation.name });
    return key !== undefined && this.#nameBySource.get(key) !== name ? name : undefined;
  }

  /**
   * The mapped table whose name the relation has while the table is known to
   * be another relation (its identity), with that identity: the followed
   * table was renamed away, or dropped, and a new one took its name.
   */
  namesakeOf(
    relation: Pick<RelationMessage, 'relationId' | 'schema' | 'name'>,
  ): { readonly table: DestinationTable; readonly oid: number } | undefined {
    const key = sourceKey(relation.schema, relation.name);
    const table = this.#tablesBySource.get(key);
    const oid = this.#oidBySource.get(key);
    return table && oid !== undefined && oid !== relation.relationId ? { table, oid } : undefined;
  }

  /** Who a mapped table is: its identity, and the name it is followed under. */
  identityOf(table: DestinationTable): FollowedIdentity {
    const key = sourceKey(table.source.schema, table.source.table);
    return { oid: this.#oidBySource.get(key), name: this.#nameBySource.get(key) };
  }

  /** The Relation message of an unsettled relation. Cheap: asked for every change. */
  unsettled(relationId: number): RelationMessage | undefined {
    return this.#unsettled.size === 0 ? undefined : this.#unsettled.get(relationId);
  }

  /** The source columns a mapped table is followed with. */
  followedSource(table: DestinationTable): readonly FollowedColumn[] {
    return this.#sourceBySource.get(sourceKey(table.source.schema, table.source.table)) ?? [];
  }

  /**
   * Follows `relation` with `shape` from now on: its source columns, and the
   * destination table its changes are written to (after the destination
   * took the change, or when the change leaves the destination as it is).
   */
  follow(relation: RelationMessage, shape: FollowedShape): void {
    const key = sourceKey(shape.table.source.schema, shape.table.source.table);
    this.#tablesBySource.set(key, shape.table);
    this.#sourceBySource.set(key, shape.source);
    if (!this.#partitionOf.has(relation.relationId)) {
      this.#nameBySource.set(key, formatTableName({ schema: relation.schema, table: relation.name }));
    }
    this.#track(relation.relationId, relation, shape.table);
    this.#unsettled.delete(relation.relationId);
  }

  /** The mapped table a relation is, by name or as a followed partition. */
  tableFor(relation: Pick<RelationMessage, 'relationId' | 'schema' | 'name'>): DestinationTable | undefined {
    return this.#tableFor(relation);
  }

  #tableFor(relation: Pick<RelationMessage, 'relationId' | 'schema' | 'name'>): DestinationTable | undefined {
    const key = this.#keyFor(relation);
    return key === undefined ? undefined : this.#tablesBySource.get(key);
  }

  /**
   * The mapped table a relation is: a partition followed as it, else by
   * identity (a renamed table is itself), else by name, unless the table of
   * that name is known to be another relation (the mapped one was renamed
   * away and a new table took its name).
   */
  #keyFor(relation: Pick<RelationMessage, 'relationId' | 'schema' | 'name'>): string | undefined {
    const followed = this.#partitionOf.get(relation.relationId) ?? this.#sourceByOid.get(relation.relationId);
    if (followed !== undefined) return this.#tablesBySource.has(followed) ? followed : undefined;
    const key = sourceKey(relation.schema, relation.name);
    if (!this.#tablesBySource.has(key)) return undefined;
    const oid = this.#oidBySource.get(key);
    return oid === undefined || oid === relation.relationId ? key : undefined;
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

/**
 * A table's source columns when no shape was given for it: its destination
 * columns. Its excluded columns are then not known: the first Relation
 * message that lists them settles them as excluded (schema-evolution.ts).
 */
function followedColumnsOf(table: DestinationTable): FollowedColumn[] {
  return table.columns.map(({ name, typeOid, typeModifier, attnum }) => ({
    name,
    typeOid,
    typeModifier,
    attnum,
  }));
}

/**
 * The key a Relation message says its table has, when it says one: under
 * REPLICA IDENTITY DEFAULT its key columns are the primary key's. (Under FULL
 * every column is flagged, under an index the index's.)
 */
export function announcedKey(relation: RelationMessage): string[] | undefined {
  if (relation.replicaIdentity !== 'default') return undefined;
  return relation.columns.filter((column) => column.isKey).map((column) => column.name);
}

/** The same key columns, in any order. */
export function sameKey(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((name) => b.includes(name));
}

/** Whether a Relation message lists the followed columns, by name and type (in any order: a partition's may differ). */
function sameColumns(followed: readonly FollowedColumn[], relation: RelationMessage): boolean {
  const byName = new Map(followed.map((column) => [column.name, column]));
  const listed = relation.columns.every((column) => {
    const known = byName.get(column.name);
    return (
      known !== undefined && known.typeOid === column.typeOid && known.typeModifier === column.typeModifier
    );
  });
  if (!listed) return false;
  // An excluded column a publication's column list leaves out is no change.
  const present = new Set(relation.columns.map((column) => column.name));
  return followed.every((column) => column.excluded === true || present.has(column.name));
}

function sourceKey(schema: string, table: string): string {
  return `${schema}\u0000${table}`;
}

// What the applier does with Relation messages: follows each relation's shape
// (relations.ts), decides at their first change what the changes of
// relations not mapped by name are (unmapped-relations.ts), and carries a
// mapped table's schema changes to the destination under the mirror's policy
// (docs/engine.md, "Schema changes").
//
// A Relation message that differs from the shape a table is followed with is
// settled just before the first change after it that is applied: a message
// in front of changes the destination holds already (a restart replays
// them) or that belong to the table's load changes nothing. Settling tells
// renames from drops and adds by attnum (schema-diff.ts), then, by policy:
// - apply: every change the destination can make is made (widening type
//   changes only: model/type-widening.ts), once every change under the old
//   shape is durable and no batch is in flight; one it cannot make holds
//   the table, with the reason, and none is made halfway;
// - hold: the table stops (`held`, the change in its problem) until a resync
//   accepts the change;
// - ignore: columns added are added; the rest stays as it is at the
//   destination (a dropped column gets null, a renamed one reads as a new
//   column beside the old, a type is kept), said in the mirror's log.
// The shape followed is recorded once the destination follows it, so a
// restart compares the stream with what the destination has; an alteration
// is recorded as under way before its first statement, so a start after a
// stop in its middle completes it first (table-shapes.ts).
import type { LogLevel, TableShape } from '../catalog/catalog.ts';
import type { RelationMessage } from '../connectors/changes.ts';
import type { Destination } from '../connectors/destination.ts';
import type { ColumnChange, DestinationTable, SourceColumn, TableSwap } from '../connectors/records.ts';
import { EngineError, isEngineError, tableFault } from '../errors.ts';
import { isWidening } from '../model/type-widening.ts';
import {
  formatTableName,
  type SchemaChangePolicy,
  type TableMapping,
  type TableName,
} from '../resources/mirror.ts';
import {
  announcedKey,
  type FollowedColumn,
  type FollowedShape,
  RelationTracker,
  sameKey,
  type TrackedRelation,
} from './relations.ts';
import { alignRelation, describeColumnChange, diffShapes } from './schema-diff.ts';
import { followedPartitionTruncated, UnmappedRelations } from './unmapped-relations.ts';

export interface SchemaEvolutionOptions {
  readonly destination: Pick<Destination, 'refuseAlteration' | 'alterColumns'>;
  /** The mirror's schema change policy (MirrorSpec.schemaChanges); apply when absent. */
  readonly schemaChanges?: SchemaChangePolicy | undefined;
  readonly tableMappings: readonly TableMapping[];
  readonly tables: readonly DestinationTable[];
  /** The shape each table was last followed with, by source table (Catalog.listTableShapes). */
  readonly shapes?: ReadonlyMap<string, TableShape> | undefined;
  /** Type names of columns a relation message adds or retypes (Source.typeNames). */
  readonly typeNames: (
    columns: readonly { readonly typeOid: number; readonly typeModifier: number }[],
  ) => Promise<string[]>;
  /**
   * The columns a relation has in the source's catalog now, once transaction
   * `xid` is visible there (Source.liveColumns).
   */
  readonly liveColumns?:
    | ((
        relationId: number,
        xid: number,
      ) => Promise<readonly { readonly attnum: number; readonly name: string }[]>)
    | undefined;
  /** The partitioned tables a relation is a partition of, parent first (Source.partitionAncestors). */
  readonly partitionAncestors: (relationId: number) => Promise<readonly TableName[]>;
  /** The publication the stream reads, and whether the mirror created it (for what unmapped changes mean). */
  readonly publication: { readonly name: string; readonly createdByMirror: boolean };
  /** A mirror log line (no row values). */
  readonly log: (level: LogLevel, message: string) => Promise<void>;
  /**
   * Called before a table's shape changes: resolves once the destination holds
   * every change buffered for `table` under the old shape and no batch is in
   * flight (BatchWriter.beforeSchemaChange).
   */
  readonly beforeChange: (table: DestinationTable) => Promise<void>;
  /** Records the shape a table's destination follows from now on (Catalog.recordTableShape). */
  readonly recordShape?: ((sourceTable: string, shape: TableShape) => Promise<void>) | undefined;
  /** Tables being resynced online (ChangeApplierOptions): their shadow was shaped before the change. */
  readonly resyncShadows?: ReadonlyMap<string, TableSwap> | undefined;
  /** Whether a table is being loaded online (an added table's backfill reads the columns it began with). */
  readonly isLoading?: ((table: DestinationTable) => boolean) | undefined;
  /**
   * Told when a mapped table is followed under a new name (SourceNames.learn),
   * so what is read of it from then on (an online load's chunks) reads that name.
   */
  readonly renamed?: ((mapped: TableName, current: TableName) => void) | undefined;
}

/**
 * A table stopped on a schema change it may not take yet: under `hold`, or
 * one the destination cannot make. Its state is `held` (table-faults.ts).
 */
export class HeldSchemaChange extends EngineError {
  constructor(table: string, message: string) {
    super('schema_mismatch', message, { table });
  }
}

export class SchemaEvolution {
  readonly #options: SchemaEvolutionOptions;
  /** The mapped relations as the last Relation message of each shaped them; read for every change. */
  readonly relations: RelationTracker;
  readonly #unmapped: UnmappedRelations;

  constructor(options: SchemaEvolutionOptions) {
    this.#options = options;
    const shapes = [...(options.shapes ?? new Map<string, TableShape>())];
    this.relations = new RelationTracker(
      options.tables,
      new Map(shapes.map(([table, shape]) => [table, shape.source])),
      new Map(shapes.map(([table, shape]) => [table, { oid: shape.sourceOid, name: shape.sourceName }])),
    );
    this.#unmapped = new UnmappedRelations({
      relations: this.relations,
      partitionAncestors: options.partitionAncestors,
      log: options.log,
      publication: options.publication,
    });
  }

  /** A Relation message: followed at once when its shape is the table's, else settled at the next applied change. */
  observe(relation: RelationMessage): void {
    if (this.relations.maps(relation)) this.relations.observe(relation);
    else this.#unmapped.announce(relation);
  }

  /**
   * Whether a change to the relation must wait for `resolve`: it is not mapped
   * by name and not decided yet. Cheap: asked for every change.
   */
  needsResolving(relationId: number): boolean {
    return this.#unmapped.needsResolving(relationId);
  }

  /**
   * Decides, at their first change, what the changes of these relations are:
   * a partition of a mapped table is followed as that table, any other
   * relation's changes are skipped.
   */
  async resolve(relationIds: readonly number[]): Promise<void> {
    for (const relationId of relationIds) {
      if (this.#unmapped.needsResolving(relationId)) await this.#unmapped.resolve(relationId);
    }
  }

  /** Whether a change to the relation that is to be applied must wait for `settle`. Cheap: asked for every change. */
  needsSettling(relationId: number): boolean {
    return this.relations.unsettled(relationId) !== undefined;
  }

  /**
   * Makes the table follow the relation's last Relation message before a
   * change under it is applied (see the head of this file), that change
   * being of transaction `xid` (the Relation message came in it or before
   * it). Throws the table's own fault (held, or errored) when it cannot.
   */
  async settle(relationId: number, xid: number): Promise<void> {
    const relation = this.relations.unsettled(relationId);
    const table = relation ? this.relations.tableFor(relation) : undefined;
    if (!relation || !table) return;
    const tableName = formatTableName(table.source);
    try {
      await this.#settle(relation, table, tableName, xid);
    } catch (error) {
      throw isEngineError(error) && !(error instanceof HeldSchemaChange)
        ? tableFault(error, tableName)
        : error;
    }
  }

  /**
   * A truncate of a relation followed as a partition of a mapped table cannot
   * be applied (the destination cannot tell the partition's rows apart):
   * throws with the fix. Any other truncate passes.
   */
  checkTruncate(relationId: number, tracked: TrackedRelation): void {
    if (!this.relations.isFollowedPartition(relationId)) return;
    throw followedPartitionTruncated(
      this.#unmapped.nameOf(relationId),
      tracked.sourceName,
      this.#options.publication.name,
    );
  }

  async #settle(
    relation: RelationMessage,
    table: DestinationTable,
    tableName: string,
    xid: number,
  ): Promise<void> {
    const { before, after } = await this.#sourceColumnsOf(
      relation,
      table,
      this.relations.followedSource(table),
      xid,
    );
    const changes = diffShapes(before, after);
    const renamedTo = this.relations.renameOf(relation);
    const policy = this.#options.schemaChanges ?? 'apply';
    // The destination's rows are keyed by the table's key: a new primary key
    // would merge or split them, under any policy.
    const key = announcedKey(relation);
    const keyFollowed = keyAfter(table.keyColumns, changes);
    if (key && !sameKey(key, keyFollowed)) {
      await this.#hold(
        table,
        tableName,
        `the primary key of ${tableName} changed at the source from (${keyFollowed.join(', ')}) to (${key.join(', ')}), and the destination's rows are keyed by the old one: drop the destination table ${formatTableName(table.destination)} so that the mirror creates it with the new key, then resync the table`,
      );
    }
    if (renamedTo !== undefined) {
      const renamedFrom = this.relations.identityOf(table).name ?? tableName;
      if (policy === 'hold') {
        await this.#hold(
          table,
          tableName,
          `schema change of ${tableName} held (schemaChanges: hold): source table ${renamedFrom} was renamed to ${renamedTo}`,
        );
      }
      // Nothing changes at the destination: its table keeps the name its
      // mapping gives it. Said in the log where the name is learnt (cdc.ts).
      this.#options.renamed?.(table.source, { schema: relation.schema, table: relation.name });
    }
    const excluded = new Set(after.filter((column) => column.excluded).map((column) => column.name));
    const written = new Set(table.columns.map((column) => column.name));
    // Changes of excluded columns, or of columns the destination does not
    // have (left there by `ignore`), change only what is followed.
    const destinationChanges = changes.filter((change) => {
      if (change.kind === 'add') return !excluded.has(change.column.name);
      const name = change.kind === 'rename' ? change.from : change.name;
      return written.has(name);
    });
    if (destinationChanges.length === 0) {
      this.relations.follow(relation, { source: after, table });
      await this.#record(tableName, { source: after, table });
      return;
    }
    const described = destinationChanges.map(describeColumnChange).join(', ');
    if (this.#options.resyncShadows?.has(tableName)) {
      // The shadow has the old shape: the table stops (errored), and a resync loads it again.
      throw new EngineError(
        'schema_mismatch',
        `the schema of ${tableName} changed at the source while it was being resynced (${described})`,
        { table: tableName },
      );
    }
    if (this.#options.isLoading?.(table)) {
      // Its load reads, and places among the stream, the columns it began with.
      throw new EngineError(
        'schema_mismatch',
        `the schema of ${tableName} changed at the source while it was being loaded (${described}); resync it to load it in its new shape`,
        { table: tableName },
      );
    }
    if (policy === 'hold') {
      await this.#hold(
        table,
        tableName,
        `schema change of ${tableName} held (schemaChanges: hold): ${described}`,
      );
    }
    const followed =
      policy === 'ignore'
        ? await this.#ignoring(table, after, destinationChanges)
        : await this.#applying(table, destinationChanges, tableName, described);
    await this.#options.beforeChange(table);
    const next: FollowedShape = { source: after, table: followed.table };
    if (followed.changes.length > 0) {
      // Recorded before the first statement: a start after a stop in the
      // middle completes the alteration before anything meets the table.
      await this.#record(
        tableName,
        { source: before, table },
        { changes: followed.changes, to: this.#shapeOf(tableName, next) },
      );
      await this.#options.destination.alterColumns({
        before: table,
        after: followed.table,
        changes: followed.changes,
      });
    }
    this.relations.follow(relation, next);
    await this.#record(tableName, next);
    if (followed.changes.length > 0) {
      await this.#options.log(
        'INFO',
        `${tableName} follows its schema change at the destination: ${followed.changes.map(describeColumnChange).join(', ')}`,
      );
    }
    if (followed.left.length > 0) {
      await this.#options.log(
        'WARN',
        `${tableName} changed at the source (${followed.left.map(describeColumnChange).join(', ')}); schemaChanges: ignore leaves the destination as it is: a dropped column gets null in new rows, a renamed one is a new column beside the old, a type stays`,
      );
    }
  }

  /** The relation's columns with their attnums (told apart from the followed ones) and exclusions. */
  /**
   * The relation's columns (`after`) with their attnums and exclusions, and
   * the followed ones (`before`) with any attnum learnt on the way (a column
   * added under a name the catalog no longer had: alignRelation).
   */
  async #sourceColumnsOf(
    relation: RelationMessage,
    table: DestinationTable,
    followed: readonly FollowedColumn[],
    xid: number,
  ): Promise<{ before: FollowedColumn[]; after: FollowedColumn[] }> {
    const names = relation.columns.map((column) => column.name);
    let before = [...followed];
    let byName = new Map(before.map((column) => [column.name, column]));
    let attnums: readonly (number | undefined)[] = names.map((name) => byName.get(name)?.attnum);
    const lookUp = this.#options.liveColumns;
    // A partition followed as its parent has attnums of its own: its columns are matched by name.
    if (lookUp && !this.relations.isFollowedPartition(relation.relationId)) {
      const aligned = alignRelation(before, names, await lookUp(relation.relationId, xid));
      attnums = aligned.attnums;
      before = before.map((column, index) => {
        const attnum = aligned.learnt.get(index);
        return attnum === undefined ? column : { ...column, attnum };
      });
      byName = new Map(before.map((column) => [column.name, column]));
      if (!aligned.exact) {
        await this.#options.log(
          'INFO',
          `the columns of ${formatTableName({ schema: relation.schema, table: relation.name })} changed again since this change was made: they are matched by name, and a column renamed reads as dropped and added`,
        );
      }
    }
    const mapping = this.#options.tableMappings.find(
      (candidate) => formatTableName(candidate.source) === formatTableName(table.source),
    );
    const excludedNames = new Set(mapping?.exclude ?? []);
    const beforeByAttnum = new Map(before.map((column) => [column.attnum, column]));
    const after = relation.columns.map((column, index) => {
      const attnum = attnums[index];
      const known = attnum === undefined ? byName.get(column.name) : beforeByAttnum.get(attnum);
      const excluded = known?.excluded === true || (known === undefined && excludedNames.has(column.name));
      return {
        name: column.name,
        typeOid: column.typeOid,
        typeModifier: column.typeModifier,
        attnum,
        ...(excluded ? { excluded: true } : {}),
      };
    });
    return { before, after };
  }

  /** Under `apply`: every change, or the table held with why the destination cannot take one. */
  async #applying(
    table: DestinationTable,
    changes: readonly ColumnChange<FollowedColumn>[],
    tableName: string,
    described: string,
  ): Promise<{ table: DestinationTable; changes: ColumnChange[]; left: ColumnChange[] }> {
    const resolved = await this.#resolveTypes(table, changes);
    const narrowing = resolved.find(
      (change) => change.kind === 'retype' && !isWidening(change.before.typeName, change.after.typeName),
    );
    if (narrowing?.kind === 'retype') {
      await this.#hold(
        table,
        tableName,
        `schema change of ${tableName} held: column ${narrowing.name} changed from ${narrowing.before.typeName} to ${narrowing.after.typeName}, which does not widen it, so rows at the destination could not all take it (${described})`,
      );
    }
    const next = alteredTable(table, resolved);
    const refusal = await this.#options.destination.refuseAlteration({
      before: table,
      after: next,
      changes: resolved,
    });
    if (refusal)
      await this.#hold(table, tableName, `schema change of ${tableName} held: ${refusal} (${described})`);
    return { table: next, changes: resolved, left: [] };
  }

  /** Under `ignore`: columns added (a rename's new name too) are added; the rest is left. */
  async #ignoring(
    table: DestinationTable,
    after: readonly FollowedColumn[],
    changes: readonly ColumnChange<FollowedColumn>[],
  ): Promise<{ table: DestinationTable; changes: ColumnChange[]; left: ColumnChange[] }> {
    const added = changes.flatMap((change): ColumnChange<FollowedColumn>[] => {
      if (change.kind === 'add') return [change];
      if (change.kind !== 'rename') return [];
      const column = after.find((candidate) => candidate.name === change.to);
      return column ? [{ kind: 'add', column }] : [];
    });
    const resolved = await this.#resolveTypes(table, added);
    const left = changes.filter((change) => change.kind !== 'add') as ColumnChange[];
    return { table: alteredTable(table, resolved), changes: resolved, left };
  }

  /** The changes with their columns as the destination knows columns (type names looked up at the source). */
  async #resolveTypes(
    table: DestinationTable,
    changes: readonly ColumnChange<FollowedColumn>[],
  ): Promise<ColumnChange[]> {
    const asked = changes.flatMap((change) =>
      change.kind === 'add' ? [change.column] : change.kind === 'retype' ? [change.after] : [],
    );
    const typeNames = await this.#options.typeNames(asked);
    const typed = new Map(asked.map((column, index) => [column, typeNames[index] ?? 'text']));
    const sourceColumn = (column: FollowedColumn): SourceColumn => ({
      name: column.name,
      typeOid: column.typeOid,
      typeModifier: column.typeModifier,
      typeName: typed.get(column) ?? 'text',
      notNull: false,
      attnum: column.attnum,
    });
    return changes.map((change): ColumnChange => {
      switch (change.kind) {
        case 'add':
          return { kind: 'add', column: sourceColumn(change.column) };
        case 'retype': {
          const current = table.columns.find((column) => column.name === change.before.name);
          const before = current ?? sourceColumn(change.before);
          return { kind: 'retype', name: change.name, before, after: { ...sourceColumn(change.after) } };
        }
        default:
          return change;
      }
    });
  }

  async #hold(table: DestinationTable, tableName: string, message: string): Promise<never> {
    // Every change of the table under the old shape is made durable first:
    // the table is held at the position just before its change.
    await this.#options.beforeChange(table);
    throw new HeldSchemaChange(tableName, message);
  }

  #shapeOf(tableName: string, shape: FollowedShape): TableShape {
    const identity = this.relations.identityOf(shape.table);
    return {
      source: shape.source,
      columns: shape.table.columns,
      keyColumns: shape.table.keyColumns,
      sourceOid: identity.oid,
      ...(identity.name !== undefined && identity.name !== tableName ? { sourceName: identity.name } : {}),
    };
  }

  async #record(tableName: string, shape: FollowedShape, altering?: TableShape['altering']): Promise<void> {
    await this.#options.recordShape?.(tableName, {
      ...this.#shapeOf(tableName, shape),
      ...(altering ? { altering } : {}),
    });
  }
}

/** `table` once `changes` are made: columns dropped, renamed, retyped in place, added at the end. */
export function alteredTable(table: DestinationTable, changes: readonly ColumnChange[]): DestinationTable {
  let columns = [...table.columns];
  let keyColumns = [...table.keyColumns];
  for (const change of changes) {
    switch (change.kind) {
      case 'add':
        if (!columns.some((column) => column.name === change.column.name)) columns.push(change.column);
        break;
      case 'drop':
        columns = columns.filter((column) => column.name !== change.name);
        break;
      case 'rename':
        columns = columns.map((column) =>
          column.name === change.from ? { ...column, name: change.to } : column,
        );
        keyColumns = keyColumns.map((name) => (name === change.from ? change.to : name));
        break;
      case 'retype':
        columns = columns.map((column) =>
          column.name === change.name ? { ...change.after, notNull: column.notNull } : column,
        );
        break;
    }
  }
  return { ...table, columns, keyColumns };
}

/** A table's key columns once `changes` are made: renamed ones by their new names, dropped ones gone. */
function keyAfter(keyColumns: readonly string[], changes: readonly ColumnChange<FollowedColumn>[]): string[] {
  let key = [...keyColumns];
  for (const change of changes) {
    if (change.kind === 'rename') key = key.map((name) => (name === change.from ? change.to : name));
    if (change.kind === 'drop') key = key.filter((name) => name !== change.name);
  }
  return key;
}

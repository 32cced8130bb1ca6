// Row filters where the publication does not apply them (PostgreSQL 13 and
// 14, or a publication the mirror does not own): the change stream is
// rewritten as a publication's row filter would have published it, before
// any other part of the pipeline sees it, so every destination gets the same
// changes on every server version. The filter itself is evaluated by the
// source (Source.evaluateRowFilter), once per table per read of the stream,
// so its result is PostgreSQL's own.
//
// PostgreSQL's rules (https://www.postgresql.org/docs/current/logical-replication-row-filter.html):
// an INSERT is published when the new row matches, a DELETE when the old row
// does; an UPDATE by its old and new rows: both match → UPDATE, only the old
// → DELETE, only the new → INSERT, neither → nothing. The old row of an UPDATE
// is only sent when the key changed (or under REPLICA IDENTITY FULL);
// otherwise its replica identity equals the new row's, and since a filter
// reads only replica identity columns, the old row matches exactly when the
// new one does.
import type { SourceMessage, StreamEvent, UpdateMessage } from '../connectors/changes.ts';
import { isUnchangedToast, type Row } from '../connectors/records.ts';
import type { Source, SourceTableInfo } from '../connectors/source.ts';
import { formatTableName, type TableMapping, type TableName } from '../resources/mirror.ts';

/** A table whose row filter the engine applies. */
export interface EngineFilteredTable {
  readonly source: TableName;
  readonly rowFilter: string;
  /** The columns the filter reads, with their types as the source spells them. */
  readonly columns: readonly { readonly name: string; readonly typeName: string }[];
}

/** The mapped tables with a row filter, each with the columns it reads (the source checks it again). */
export async function engineFilteredTables(
  source: Pick<Source, 'rowFilterColumns'>,
  mappings: readonly TableMapping[],
  found: ReadonlyMap<string, SourceTableInfo>,
): Promise<EngineFilteredTable[]> {
  const tables: EngineFilteredTable[] = [];
  for (const mapping of mappings) {
    const info = found.get(formatTableName(mapping.source));
    if (mapping.rowFilter === undefined || !info) continue;
    const names = await source.rowFilterColumns(info, mapping.rowFilter);
    const types = new Map(info.columns.map((column) => [column.name, column.typeName]));
    tables.push({
      source: mapping.source,
      rowFilter: mapping.rowFilter,
      columns: names.map((name) => ({ name, typeName: types.get(name) ?? 'text' })),
    });
  }
  return tables;
}

/** A filtered table's relation as last announced: where its filter's columns are in a tuple. */
interface FilteredRelation {
  readonly table: EngineFilteredTable;
  readonly positions: readonly number[];
}

/** What the filter says of one change's rows, once evaluated. */
interface Verdicts {
  readonly table: EngineFilteredTable;
  /** Indexes of the rows among the table's evaluated ones; undefined when not evaluated. */
  readonly newRow?: number | undefined;
  readonly oldRow?: number | undefined;
  /** The change carries an old row (a key change, or REPLICA IDENTITY FULL). */
  readonly hasOld?: boolean;
}

export class RowFilterStage {
  readonly #source: Pick<Source, 'evaluateRowFilter'>;
  readonly #tables: ReadonlyMap<string, EngineFilteredTable>;
  readonly #relations = new Map<number, FilteredRelation>();

  constructor(source: Pick<Source, 'evaluateRowFilter'>, tables: readonly EngineFilteredTable[]) {
    this.#source = source;
    this.#tables = new Map(tables.map((table) => [formatTableName(table.source), table]));
  }

  /** The events of one read, with each change of a filtered table as its publication would send it. */
  async apply(events: readonly StreamEvent[]): Promise<readonly StreamEvent[]> {
    // First the rows to evaluate, per table, with the relations as each change saw them.
    const pending = new Map<EngineFilteredTable, (string | null)[][]>();
    const verdicts = new Map<StreamEvent, Verdicts>();
    const add = (relation: FilteredRelation, row: Row, older?: Row): number | undefined => {
      const cells: (string | null)[] = [];
      for (const position of relation.positions) {
        let cell = row.cell(position);
        if (isUnchangedToast(cell) && older) cell = older.cell(position);
        // A value the stream does not carry (unchanged TOAST, no old row): not evaluated.
        if (isUnchangedToast(cell)) return undefined;
        cells.push(cell === null ? null : typeof cell === 'string' ? cell : cell.toString('utf8'));
      }
      let rows = pending.get(relation.table);
      if (!rows) {
        rows = [];
        pending.set(relation.table, rows);
      }
      rows.push(cells);
      return rows.length - 1;
    };
    for (const event of events) {
      if (event.tag !== 'change') continue;
      const { message } = event;
      if (message.tag === 'relation') {
        const table = this.#tables.get(formatTableName({ schema: message.schema, table: message.name }));
        if (!table) {
          this.#relations.delete(message.relationId);
          continue;
        }
        const byName = new Map(message.columns.map((column, index) => [column.name, index]));
        this.#relations.set(message.relationId, {
          table,
          positions: table.columns.map((column) => byName.get(column.name) ?? -1),
        });
        continue;
      }
      if (message.tag !== 'insert' && message.tag !== 'update' && message.tag !== 'delete') continue;
      const relation = this.#relations.get(message.relationId);
      if (!relation || relation.positions.includes(-1)) continue;
      if (message.tag === 'insert') {
        verdicts.set(event, { table: relation.table, newRow: add(relation, message.newTuple) });
      } else if (message.tag === 'delete') {
        const old = message.oldTuple ?? message.keyTuple;
        if (old) verdicts.set(event, { table: relation.table, oldRow: add(relation, old) });
      } else {
        const old = message.oldTuple ?? message.keyTuple;
        verdicts.set(event, {
          table: relation.table,
          newRow: add(relation, message.newTuple, old),
          ...(old ? { oldRow: add(relation, old), hasOld: true } : {}),
        });
      }
    }
    if (verdicts.size === 0) return events;
    const results = new Map<EngineFilteredTable, boolean[]>();
    for (const [table, rows] of pending) {
      results.set(
        table,
        await this.#source.evaluateRowFilter({
          table: table.source,
          rowFilter: table.rowFilter,
          columns: table.columns,
          rows,
        }),
      );
    }
    // Then the changes as the publication would send them.
    const filtered: StreamEvent[] = [];
    for (const event of events) {
      const verdict = verdicts.get(event);
      if (!verdict || event.tag !== 'change') {
        filtered.push(event);
        continue;
      }
      const { message } = event;
      const evaluated = results.get(verdict.table);
      const matches = (index: number | undefined) =>
        index === undefined ? undefined : evaluated?.[index] === true;
      if (message.tag === 'insert' || message.tag === 'delete') {
        const index = message.tag === 'insert' ? verdict.newRow : verdict.oldRow;
        // Not evaluated (a value the stream left out): passed on as it came.
        if (index === undefined || matches(index)) filtered.push(event);
        continue;
      }
      if (message.tag !== 'update') {
        filtered.push(event);
        continue;
      }
      const newMatches = matches(verdict.newRow);
      if (newMatches === undefined) {
        filtered.push(event);
        continue;
      }
      const oldMatches = verdict.hasOld ? matches(verdict.oldRow) : newMatches;
      const moved = movedUpdate(message, oldMatches ?? newMatches, newMatches);
      if (moved) filtered.push({ ...event, message: moved });
    }
    return filtered;
  }
}

/** An update as a row filter publishes it, from whether its old and new rows match. */
export function movedUpdate(
  update: UpdateMessage,
  oldMatches: boolean,
  newMatches: boolean,
): SourceMessage | undefined {
  if (oldMatches && newMatches) return update;
  if (!oldMatches && newMatches) {
    return { tag: 'insert', relationId: update.relationId, newTuple: update.newTuple };
  }
  if (oldMatches && !newMatches) {
    // The row leaves: deleted by its old key (the whole old row under REPLICA IDENTITY FULL).
    if (update.oldTuple) return { tag: 'delete', relationId: update.relationId, oldTuple: update.oldTuple };
    if (update.keyTuple) return { tag: 'delete', relationId: update.relationId, keyTuple: update.keyTuple };
  }
  return undefined;
}

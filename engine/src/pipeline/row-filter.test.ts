import { describe, expect, it } from 'vitest';
import type { RelationMessage, SourceMessage, StreamEvent } from '../connectors/changes.ts';
import { unchangedToast } from '../connectors/records.ts';
import { rowOfCells } from '../connectors/rows.ts';
import type { RowFilterEvaluation } from '../connectors/source.ts';
import { type EngineFilteredTable, RowFilterStage } from './row-filter.ts';

// The filter `region = 'eu'` of public.orders (id, region, note), evaluated here
// by a stand-in for the source; the stage's job is what it makes of the verdicts.
const table: EngineFilteredTable = {
  source: { schema: 'public', table: 'orders' },
  rowFilter: `region = 'eu'`,
  columns: [{ name: 'region', typeName: 'text' }],
};

const relation: RelationMessage = {
  tag: 'relation',
  relationId: 7,
  schema: 'public',
  name: 'orders',
  replicaIdentity: 'full',
  columns: ['id', 'region', 'note'].map((name) => ({
    name,
    typeOid: 25,
    typeModifier: -1,
    isKey: name === 'id',
  })),
};

const change = (message: SourceMessage, walStart = 1n): StreamEvent => ({ tag: 'change', walStart, message });
const row = (...cells: (string | null | typeof unchangedToast)[]) => rowOfCells(cells);

function stage() {
  const calls: RowFilterEvaluation[] = [];
  const filter = new RowFilterStage(
    {
      async evaluateRowFilter(request) {
        calls.push(request);
        return request.rows.map((cells) => cells[0] === 'eu');
      },
    },
    [table],
  );
  return { filter, calls };
}

/** The messages as tag and row cells, to compare. */
function shown(events: readonly StreamEvent[]) {
  return events.flatMap((event) => {
    if (event.tag !== 'change') return [];
    const { message } = event;
    switch (message.tag) {
      case 'insert':
        return [['insert', message.newTuple.cells()]];
      case 'update':
        return [['update', message.newTuple.cells()]];
      case 'delete':
        return [['delete', (message.oldTuple ?? message.keyTuple)?.cells()]];
      default:
        return [[message.tag]];
    }
  });
}

describe('RowFilterStage', () => {
  it('publishes inserts and deletes of matching rows only', async () => {
    const { filter, calls } = stage();
    const events = await filter.apply([
      change(relation),
      change({ tag: 'insert', relationId: 7, newTuple: row('1', 'eu', 'a') }),
      change({ tag: 'insert', relationId: 7, newTuple: row('2', 'us', 'b') }),
      change({ tag: 'delete', relationId: 7, oldTuple: row('3', 'us', 'c') }),
      change({ tag: 'delete', relationId: 7, oldTuple: row('4', 'eu', 'd') }),
    ]);
    expect(shown(events)).toEqual([['relation'], ['insert', ['1', 'eu', 'a']], ['delete', ['4', 'eu', 'd']]]);
    // One evaluation for the read.
    expect(calls).toHaveLength(1);
  });

  it('turns an update into what its old and new rows say: update, delete, insert or nothing', async () => {
    const { filter } = stage();
    const update = (old: string, now: string) =>
      change({ tag: 'update', relationId: 7, oldTuple: row('1', old, 'x'), newTuple: row('1', now, 'y') });
    const events = await filter.apply([
      change(relation),
      update('eu', 'eu'),
      update('eu', 'us'),
      update('us', 'eu'),
      update('us', 'apac'),
    ]);
    expect(shown(events)).toEqual([
      ['relation'],
      ['update', ['1', 'eu', 'y']],
      ['delete', ['1', 'eu', 'x']],
      ['insert', ['1', 'eu', 'y']],
    ]);
  });

  it('judges an update without an old row by its new row, and a value it was not sent from the old row', async () => {
    const { filter } = stage();
    const events = await filter.apply([
      change(relation),
      change({ tag: 'update', relationId: 7, newTuple: row('1', 'eu', 'y') }),
      change({ tag: 'update', relationId: 7, newTuple: row('2', 'us', 'y') }),
      change({
        tag: 'update',
        relationId: 7,
        oldTuple: row('3', 'eu', 'x'),
        newTuple: row('3', unchangedToast, 'y'),
      }),
      // Nothing to judge by: passed on as it came.
      change({ tag: 'update', relationId: 7, newTuple: row('4', unchangedToast, 'y') }),
    ]);
    expect(shown(events)).toEqual([
      ['relation'],
      ['update', ['1', 'eu', 'y']],
      ['update', ['3', unchangedToast, 'y']],
      ['update', ['4', unchangedToast, 'y']],
    ]);
  });

  it('leaves other tables, and reads without changes, as they are', async () => {
    const { filter, calls } = stage();
    const other: RelationMessage = { ...relation, relationId: 8, name: 'other' };
    const events: StreamEvent[] = [
      { tag: 'keepalive', walEnd: 5n },
      change(other),
      change({ tag: 'insert', relationId: 8, newTuple: row('1', 'us', 'a') }),
    ];
    expect(await filter.apply(events)).toBe(events);
    expect(calls).toEqual([]);
  });
});

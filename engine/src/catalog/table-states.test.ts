import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type TableMove, type TableState, type TableStatus, tableStates } from './catalog.ts';
import {
  canTransitionTable,
  moveTable,
  moveTablesIfAllowed,
  removeUnmappedTables,
  type TableRecord,
  type TableStateOrigin,
  TableStateTransitionError,
  tableStateEvents,
  tableStatesLeadingTo,
  tableStateTransitions,
} from './table-states.ts';

const repositoryDir = join(import.meta.dirname, '..', '..', '..');

/** The rows of the first table after `heading` in docs/mirror-lifecycle.md, as [first cell, second cell]. */
function documentedTable(heading: string): [string, string][] {
  const doc = readFileSync(join(repositoryDir, 'docs', 'mirror-lifecycle.md'), 'utf8');
  const start = doc.indexOf(heading);
  expect(start, heading).toBeGreaterThanOrEqual(0);
  const rows: [string, string][] = [];
  for (const line of doc.slice(start + heading.length).split('\n')) {
    if (!line.startsWith('|')) {
      if (rows.length > 0) break;
      continue;
    }
    const cells = line.split('|').map((cell) => cell.trim().replaceAll('`', ''));
    const [first = '', second = ''] = cells.slice(1);
    if (!/^\w+$/.test(first)) continue;
    rows.push([first, second]);
  }
  return rows.slice(1);
}

/**
 * A catalog's table rows in memory, moved as PostgresCatalog.transitionTable
 * moves them (the integration test walks the real one): refused moves throw.
 */
class MemoryTableRecord implements TableRecord {
  readonly tables = new Map<string, TableStatus>();

  async listTables(): Promise<TableStatus[]> {
    return [...this.tables.values()];
  }

  async transitionTable(mirror: string, move: TableMove): Promise<void> {
    const held = this.tables.get(move.sourceTable);
    const from = held?.state ?? 'new';
    if (!canTransitionTable(from, move.to))
      throw new TableStateTransitionError(mirror, move.sourceTable, from, move.to);
    this.tables.set(move.sourceTable, {
      inserts: 0n,
      updates: 0n,
      deletes: 0n,
      lastLsn: 0n,
      lastCommitTime: null,
      resyncToken: null,
      ...held,
      sourceTable: move.sourceTable,
      destinationTable: move.destinationTable,
      state: move.to,
      stateSince: new Date(),
      problem: move.problem ?? null,
      behindLsn: move.behindLsn ?? null,
    });
  }
}

const orders = { sourceTable: 'public.orders', destinationTable: 'public.orders_copy' };
const items = { sourceTable: 'public.items', destinationTable: 'public.items' };
const poison = {
  problem: { kind: 'destination_write' as const, message: 'value refused', remedy: 'fix it' },
  behindLsn: 42n,
};

function productionFiles(): string[] {
  return ['engine/src', 'api-server/src', 'operator/src', 'bin'].flatMap((folder) =>
    readdirSync(join(repositoryDir, folder), { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts') && !name.endsWith('.test.ts'))
      .map((name) => join(repositoryDir, folder, name)),
  );
}

describe('table states', () => {
  it('match the transition table in docs/mirror-lifecycle.md', () => {
    const documented = Object.fromEntries(
      documentedTable('### Table transitions').map(([from, to]) => [
        from,
        to.split(',').map((state) => state.trim()),
      ]),
    );
    expect(documented).toEqual(tableStateTransitions);
  });

  it('match the events in docs/mirror-lifecycle.md', () => {
    expect(Object.fromEntries(documentedTable('### Table events'))).toEqual(tableStateEvents);
  });

  it('match the states in docs/mirror-lifecycle.md', () => {
    expect(documentedTable('## Table states').map(([state]) => state)).toEqual([...tableStates]);
  });

  it('has an event for every state, and every state can be reached and left', () => {
    expect(new Set(Object.values(tableStateEvents))).toEqual(new Set(tableStates));
    for (const state of tableStates) {
      expect(tableStatesLeadingTo(state).length, state).toBeGreaterThan(0);
      expect(tableStateTransitions[state].length, state).toBeGreaterThan(0);
    }
  });

  it('lets a load start over from every state a table can be in while mapped', () => {
    for (const state of tableStates.filter((state) => state !== 'removed')) {
      expect(canTransitionTable(state, 'pending'), state).toBe(true);
      expect(canTransitionTable(state, 'loading'), state).toBe(true);
    }
  });

  it('lets every mapped table be removed, and a removed one be mapped again', () => {
    for (const state of tableStates.filter((state) => state !== 'removed'))
      expect(canTransitionTable(state, 'removed'), state).toBe(true);
    expect(tableStateTransitions.removed).toEqual(['pending', 'loading', 'streaming']);
  });

  it('never lets an errored table stream again without a load or resync', () => {
    expect(canTransitionTable('errored', 'streaming')).toBe(false);
    expect(canTransitionTable('errored', 'resyncing')).toBe(true);
  });

  it('holds, resyncs and fails only tables that run', () => {
    const stopOrResync: TableState[] = ['held', 'resyncing', 'errored'];
    for (const to of stopOrResync) {
      expect(canTransitionTable('new', to), to).toBe(false);
      expect(canTransitionTable('removed', to), to).toBe(false);
    }
    expect(tableStatesLeadingTo('held')).toEqual(['streaming']);
  });
});

describe('the table state writer', () => {
  it('walks every pair of the transition table', async () => {
    const origins = Object.keys(tableStateTransitions) as TableStateOrigin[];
    for (const from of origins) {
      for (const event of Object.keys(tableStateEvents) as (keyof typeof tableStateEvents)[]) {
        const record = new MemoryTableRecord();
        if (from !== 'new') {
          // Reach `from` through moves the table allows: new → pending → … as the engine would.
          const path: Record<TableState, (keyof typeof tableStateEvents)[]> = {
            pending: ['loadQueued'],
            loading: ['loadStarted'],
            streaming: ['joinedWithoutLoad'],
            resyncing: ['joinedWithoutLoad', 'resyncStarted'],
            held: ['joinedWithoutLoad', 'schemaChangeHeld'],
            errored: ['loadStarted', 'tableFailed'],
            removed: ['joinedWithoutLoad', 'unmapped'],
          };
          for (const step of path[from]) await moveTable(record, 'm', orders, step, poison);
          expect(record.tables.get(orders.sourceTable)?.state).toBe(from);
        }
        const to = tableStateEvents[event];
        const attempt = moveTable(record, 'm', orders, event, poison);
        if (canTransitionTable(from, to)) {
          await attempt;
          expect(record.tables.get(orders.sourceTable)?.state, `${from} ${event}`).toBe(to);
        } else {
          await expect(attempt, `${from} ${event}`).rejects.toBeInstanceOf(TableStateTransitionError);
          expect(record.tables.get(orders.sourceTable)?.state).toBe(from === 'new' ? undefined : from);
        }
      }
    }
  });

  it("walks today's engine: queued, loaded table by table, streaming, removed, mapped again", async () => {
    const record = new MemoryTableRecord();
    for (const table of [orders, items]) await moveTable(record, 'm', table, 'loadQueued');
    await moveTable(record, 'm', orders, 'loadStarted');
    await moveTable(record, 'm', orders, 'loadFinished');
    expect([...record.tables.values()].map((table) => [table.sourceTable, table.state])).toEqual([
      ['public.orders', 'streaming'],
      ['public.items', 'pending'],
    ]);
    await moveTable(record, 'm', items, 'loadStarted');
    await moveTable(record, 'm', items, 'loadFinished');
    expect(await removeUnmappedTables(record, 'm', new Set(['public.items']))).toEqual([
      expect.objectContaining(orders),
    ]);
    expect(record.tables.get('public.orders')?.state).toBe('removed');
    // Removed twice is nothing to do.
    expect(await removeUnmappedTables(record, 'm', new Set(['public.items']))).toEqual([]);
    expect(await moveTablesIfAllowed(record, 'm', [orders, items], 'joinedWithoutLoad')).toEqual([orders]);
    expect(record.tables.get('public.orders')?.state).toBe('streaming');
  });

  it('records the problem and position of a stopped table and clears them on the next move', async () => {
    const record = new MemoryTableRecord();
    await moveTable(record, 'm', orders, 'joinedWithoutLoad');
    await expect(moveTable(record, 'm', orders, 'tableFailed')).rejects.toThrow(/needs the problem/);
    await moveTable(record, 'm', orders, 'tableFailed', poison);
    expect(record.tables.get('public.orders')).toMatchObject({
      state: 'errored',
      problem: poison.problem,
      behindLsn: 42n,
    });
    await moveTable(record, 'm', orders, 'resyncStarted', poison);
    expect(record.tables.get('public.orders')).toMatchObject({
      state: 'resyncing',
      problem: null,
      behindLsn: null,
    });
  });

  it('moves only from the states it is told, when told', async () => {
    const record = new MemoryTableRecord();
    await moveTable(record, 'm', orders, 'joinedWithoutLoad');
    await moveTable(record, 'm', orders, 'schemaChangeHeld', poison);
    // held → streaming is a move the table allows, but not a join: a held table stays held.
    expect(
      await moveTablesIfAllowed(record, 'm', [orders, items], 'joinedWithoutLoad', ['new', 'removed']),
    ).toEqual([items]);
    expect(record.tables.get('public.orders')?.state).toBe('held');
  });

  it("is the only writer of a table's state", () => {
    const writer = join(repositoryDir, 'engine', 'src', 'catalog', 'table-states.ts');
    const files = productionFiles();
    expect(files.length).toBeGreaterThan(100);
    const offending = files
      .filter((file) => file !== writer && /\.transitionTable\(/.test(readFileSync(file, 'utf8')))
      .map((file) => relative(repositoryDir, file));
    expect(offending).toEqual([]);
    // The catalog's own SQL is the one place that names the column it writes.
    const sqlWriters = files
      .filter((file) => /UPDATE tributary\.mirror_tables[^`]*\bstate\s*=/.test(readFileSync(file, 'utf8')))
      .map((file) => relative(repositoryDir, file));
    expect(sqlWriters).toEqual(['engine/src/catalog/postgres-catalog.ts']);
  });
});

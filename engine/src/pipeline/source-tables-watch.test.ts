import { describe, expect, it } from 'vitest';
import type { MissingTables, Source } from '../connectors/source.ts';
import type { TableName } from '../resources/mirror.ts';
import { lookEveryMs, SourceTablesWatch } from './source-tables-watch.ts';

const name = (table: string): TableName => ({ schema: 'public', table });

/** A source whose missing tables and WAL position the test sets; counts the looks. */
function sourceWith(state: { missing: string[]; walLsn: bigint }) {
  let looks = 0;
  const source = {
    async missingTables(tables: readonly TableName[]): Promise<MissingTables> {
      looks++;
      return { missing: tables.filter((table) => state.missing.includes(table.table)), walLsn: state.walLsn };
    },
  } as Pick<Source, 'missingTables'> as Source;
  return { source, looks: () => looks };
}

describe('SourceTablesWatch', () => {
  it('stops a gone table only once what the destination holds passes the look', async () => {
    const state = { missing: ['b'], walLsn: 500n };
    const { source } = sourceWith(state);
    const watch = new SourceTablesWatch(source, [name('a'), name('b')], []);
    expect(await watch.check(0, 100n)).toBeUndefined();
    expect(await watch.check(1, 499n)).toBeUndefined();
    const outcome = await watch.check(2, 500n);
    expect(outcome?.kind).toBe('stop');
    if (outcome?.kind !== 'stop') return;
    expect(outcome.error.kind).toBe('source_schema');
    expect(outcome.error.table).toBe('public.b');
  });

  it('looks at most every lookEveryMs', async () => {
    const { source, looks } = sourceWith({ missing: [], walLsn: 1n });
    const watch = new SourceTablesWatch(source, [name('a')], []);
    await watch.check(0, 0n);
    await watch.check(lookEveryMs - 1, 0n);
    expect(looks()).toBe(1);
    await watch.check(lookEveryMs, 0n);
    expect(looks()).toBe(2);
  });

  it('forgets a table back before it stopped (renamed and renamed back)', async () => {
    const state = { missing: ['b'], walLsn: 500n };
    const { source } = sourceWith(state);
    const watch = new SourceTablesWatch(source, [name('b')], []);
    await watch.check(0, 0n);
    state.missing = [];
    expect(await watch.check(lookEveryMs, 0n)).toBeUndefined();
    expect(await watch.check(lookEveryMs + 1, 1000n)).toBeUndefined();
  });

  it('says a table stopped for its missing source is back', async () => {
    const state = { missing: ['gone'], walLsn: 1n };
    const { source } = sourceWith(state);
    const watch = new SourceTablesWatch(source, [name('a')], [name('gone')]);
    expect(await watch.check(0, 0n)).toBeUndefined();
    state.missing = [];
    expect(await watch.check(lookEveryMs, 0n)).toEqual({ kind: 'rejoin', sourceTable: 'public.gone' });
  });

  it('looks at nothing when there is nothing to look for', async () => {
    const { source, looks } = sourceWith({ missing: [], walLsn: 1n });
    expect(await new SourceTablesWatch(source, [], []).check(0, 0n)).toBeUndefined();
    expect(looks()).toBe(0);
  });
});

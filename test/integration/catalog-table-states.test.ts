// Walks every (from, to) pair of the table states against the real catalog:
// allowed moves happen, refused ones throw and leave the state as it was; and
// a finished batch adds its tables' rows in the statement that finishes it.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tableStates } from '../../engine/src/catalog/catalog.ts';
import { PostgresCatalog } from '../../engine/src/catalog/postgres-catalog.ts';
import {
  canTransitionTable,
  type TableStateOrigin,
  TableStateTransitionError,
  tableStateTransitions,
} from '../../engine/src/catalog/table-states.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';

describe('catalog table states', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let catalog: PostgresCatalog;

  beforeAll(async () => {
    database = await createTestDatabase('table_states');
    pool = new pg.Pool({ ...database.config, max: 2 });
    catalog = new PostgresCatalog(pool);
    await catalog.migrate();
  });

  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  const stateOf = async (mirror: string, table: string) =>
    (await catalog.listTables(mirror)).find((row) => row.sourceTable === table)?.state;

  const problem = { kind: 'destination_write' as const, message: 'refused', remedy: 'fix the value' };

  for (const from of Object.keys(tableStateTransitions) as TableStateOrigin[]) {
    it(`from ${from}`, async () => {
      const mirror = `m-${from}`;
      for (const to of tableStates) {
        const table = `public.${from}_${to}`;
        if (from !== 'new') {
          await pool.query(
            `INSERT INTO tributary.mirror_tables (mirror, source_table, destination_table, state)
             VALUES ($1, $2, $2, $3)`,
            [mirror, table, from],
          );
        }
        const attempt = catalog.transitionTable(mirror, {
          sourceTable: table,
          destinationTable: `d.${to}`,
          to,
          ...(to === 'errored' || to === 'held' ? { problem, behindLsn: 77n } : {}),
        });
        if (canTransitionTable(from, to)) {
          await attempt;
          expect(await stateOf(mirror, table)).toBe(to);
        } else {
          await expect(attempt).rejects.toBeInstanceOf(TableStateTransitionError);
          expect(await stateOf(mirror, table)).toBe(from === 'new' ? undefined : from);
        }
      }
    });
  }

  it('keeps the problem and position of an errored table until its next move', async () => {
    const move = { sourceTable: 'public.t', destinationTable: 'public.t_copy' };
    await catalog.transitionTable('stop', { ...move, to: 'streaming' });
    await catalog.transitionTable('stop', { ...move, to: 'errored', problem, behindLsn: 123n });
    expect((await catalog.listTables('stop'))[0]).toMatchObject({
      state: 'errored',
      destinationTable: 'public.t_copy',
      problem,
      behindLsn: 123n,
    });
    await catalog.transitionTable('stop', { ...move, to: 'resyncing' });
    expect((await catalog.listTables('stop'))[0]).toMatchObject({
      state: 'resyncing',
      problem: null,
      behindLsn: null,
    });
  });

  it('adds rows by operation and moves the last commit in the statement that finishes a batch', async () => {
    await catalog.transition('counts', 'setup');
    for (const table of ['public.a', 'public.b'])
      await catalog.transitionTable('counts', {
        sourceTable: table,
        destinationTable: table,
        to: 'streaming',
      });
    const commitMicros = 1_767_225_600_123_456n; // 2026-01-01T00:00:00.123456Z
    for (const [batchId, lsn] of [
      [1n, 1000n],
      [2n, 900n],
    ] as const) {
      await catalog.startBatch('counts', { batchId, startTime: new Date(), startLsn: 10n });
      await catalog.finishBatch('counts', {
        batchId,
        endTime: new Date(),
        rowCount: 6n,
        endLsn: 1001n,
        tables: [
          {
            sourceTable: 'public.a',
            inserts: 3n,
            updates: 2n,
            deletes: 1n,
            lastLsn: lsn,
            lastCommitTimeMicros: commitMicros + lsn,
          },
          // Not tracked: left out, no row made.
          {
            sourceTable: 'public.untracked',
            inserts: 1n,
            updates: 0n,
            deletes: 0n,
            lastLsn: lsn,
            lastCommitTimeMicros: commitMicros,
          },
        ],
      });
    }
    const [a, b, ...rest] = await catalog.listTables('counts');
    expect(rest).toEqual([]);
    // The older position of the second batch does not move the last commit back.
    expect(a).toMatchObject({
      sourceTable: 'public.a',
      inserts: 6n,
      updates: 4n,
      deletes: 2n,
      lastLsn: 1000n,
    });
    expect(a?.lastCommitTime?.toISOString()).toBe('2026-01-01T00:00:00.124Z');
    expect(b).toMatchObject({ sourceTable: 'public.b', inserts: 0n, lastLsn: 0n, lastCommitTime: null });
    const { batches } = await catalog.listBatches('counts', { limit: 0, ascending: true });
    expect(batches.map((batch) => batch.endLsn)).toEqual([1001n, 1001n]);
    // The exact microsecond is stored.
    const { rows } = await pool.query<{ micros: string }>(
      `SELECT (extract(epoch FROM last_commit_time) * 1000000)::bigint::text AS micros
       FROM tributary.mirror_tables WHERE mirror = 'counts' AND source_table = 'public.a'`,
    );
    expect(rows[0]?.micros).toBe((commitMicros + 1000n).toString());
  });

  it('forgets the tables of a dropped mirror when one is created again under its name', async () => {
    await catalog.transition('again', 'setup');
    await catalog.transitionTable('again', {
      sourceTable: 'public.t',
      destinationTable: 'public.t',
      to: 'loading',
    });
    await catalog.transition('again', 'terminating');
    await catalog.transition('again', 'terminated');
    expect(await catalog.listTables('again')).toHaveLength(1);
    expect(await catalog.startNewIncarnation('again')).toBe(true);
    expect(await catalog.listTables('again')).toEqual([]);
  });
});

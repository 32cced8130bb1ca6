// The swap of a resync, carried out after the batch that made it due
// committed: whichever statement a crash stops it at, running it again leaves
// the new table at the live name with the old one's comment, the old table
// gone and the due swap forgotten.
import { describe, expect, it } from 'vitest';
import { internalObjects } from './internal.ts';
import type { SnowflakeSession, StatementResult } from './session.ts';
import { completeSwaps, type ShadowContext, shadowMarker } from './shadow-tables.ts';

const live = '"DB"."PUBLIC"."ITEMS"';
const shadow = '"DB"."_TRIBUTARY_RESYNC_PUBLIC"."ITEMS"';

interface Table {
  readonly rows: string;
  comment: string | null;
}

/** Tables by identifier, a SWAPS row, and a crash at statement `crashAt` (1-based). */
class FakeWarehouse {
  readonly tables = new Map<string, Table>([
    [live, { rows: 'old rows', comment: 'the users comment' }],
    [shadow, { rows: 'new rows', comment: shadowMarker('m1') }],
  ]);
  swapDue = true;
  statementCount = 0;

  session(crashAt?: number): SnowflakeSession {
    return {
      execute: async (sql: string): Promise<StatementResult> => {
        this.statementCount++;
        if (this.statementCount === crashAt) throw new Error('killed');
        return this.#run(sql.replace(/\s+/g, ' ').trim());
      },
      close: async () => {},
    };
  }

  #run(sql: string): StatementResult {
    const none = { rows: [], affectedRows: 0 };
    if (sql.includes('INFORMATION_SCHEMA.TABLES') && sql.includes(`TABLE_NAME = 'SWAPS'`)) {
      return { rows: [{ FOUND: 1 }], affectedRows: 0 };
    }
    const info = /TABLE_SCHEMA = '([^']+)' AND TABLE_NAME = '([^']+)'/.exec(sql);
    if (sql.startsWith('SELECT COMMENT') && info) {
      const table = this.tables.get(`"DB"."${info[1]}"."${info[2]}"`);
      return { rows: table ? [{ TABLE_COMMENT: table.comment }] : [], affectedRows: 0 };
    }
    if (sql.startsWith('SELECT "LIVE_SCHEMA"')) {
      const row = {
        LIVE_SCHEMA: 'public',
        LIVE_TABLE: 'items',
        SHADOW_SCHEMA: '_tributary_resync_public',
        SHADOW_TABLE: 'items',
      };
      return { rows: this.swapDue ? [row] : [], affectedRows: 0 };
    }
    const swap = /^ALTER TABLE (\S+) SWAP WITH (\S+)$/.exec(sql);
    if (swap) {
      const [a, b] = [this.tables.get(swap[1] ?? ''), this.tables.get(swap[2] ?? '')];
      if (!a || !b) throw new Error('does not exist');
      this.tables.set(swap[1] ?? '', b);
      this.tables.set(swap[2] ?? '', a);
      return none;
    }
    const comment = /^COMMENT ON TABLE (\S+) IS '(.*)'$/.exec(sql);
    if (comment) {
      const table = this.tables.get(comment[1] ?? '');
      if (!table) throw new Error('does not exist');
      table.comment = comment[2] ?? '';
      return none;
    }
    const drop = /^DROP TABLE IF EXISTS (\S+)$/.exec(sql);
    if (drop) {
      this.tables.delete(drop[1] ?? '');
      return none;
    }
    if (sql.startsWith('DELETE FROM "DB"."_TRIBUTARY_INTERNAL"."SWAPS"')) {
      this.swapDue = false;
      return none;
    }
    throw new Error(`unexpected statement: ${sql}`);
  }
}

const context = (session: SnowflakeSession): ShadowContext => ({
  database: 'DB',
  mirror: 'm1',
  objects: internalObjects('DB', 'm1'),
  withSession: (_what, work) => work(session),
});

describe('completeSwaps', () => {
  it('puts the shadow in place, gives it the old comment, drops the old table and forgets the swap', async () => {
    const warehouse = new FakeWarehouse();
    const session = warehouse.session();
    expect(await completeSwaps(session, context(session))).toBe(1);
    expect([...warehouse.tables]).toEqual([[live, { rows: 'new rows', comment: 'the users comment' }]]);
    expect(warehouse.swapDue).toBe(false);
    // Nothing due: nothing done.
    expect(await completeSwaps(session, context(session))).toBe(0);
  });

  it('ends the same whichever statement a crash stops it at', async () => {
    const total = new FakeWarehouse();
    const counting = total.session();
    await completeSwaps(counting, context(counting));
    for (let crashAt = 1; crashAt <= total.statementCount; crashAt++) {
      const warehouse = new FakeWarehouse();
      const crashing = warehouse.session(crashAt);
      await expect(completeSwaps(crashing, context(crashing)), `crash at ${crashAt}`).rejects.toThrow(
        'killed',
      );
      const again = warehouse.session();
      await completeSwaps(again, context(again));
      expect([...warehouse.tables], `after a crash at ${crashAt}`).toEqual([
        [live, { rows: 'new rows', comment: 'the users comment' }],
      ]);
      expect(warehouse.swapDue).toBe(false);
    }
  });
});

// A batch's statements against a fake session that fails the k-th statement,
// for every k: whatever fails, no COMMIT follows the error, a ROLLBACK does when
// a transaction was open, and the checkpoint has not moved. The emulator cannot
// show a commit-after-error bug (it aborts the whole transaction on an error;
// Snowflake rolls back only the failed statement and would commit the rest).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { ChangeBatch, DestinationTable, RowChange, SourceTransaction } from '../records.ts';
import { ChangeList, unchangedToast } from '../records.ts';
import { rowOfCells } from '../rows.ts';
import { applyBatch, type BatchContext } from './batch.ts';
import { internalObjects } from './internal.ts';
import type { SnowflakeSession, StatementResult } from './session.ts';

const localDir = mkdtempSync(join(tmpdir(), 'tributary-snowflake-test-'));
afterAll(() => rmSync(localDir, { recursive: true, force: true }));

const column = (name: string, typeOid: number, typeName: string) => ({
  name,
  typeOid,
  typeModifier: -1,
  typeName,
  notNull: false,
});

const table: DestinationTable = {
  source: { schema: 'public', table: 'items' },
  destination: { schema: 'public', table: 'items' },
  columns: [column('id', 23, 'integer'), column('body', 25, 'text'), column('price', 1700, 'numeric')],
  keyColumns: ['id'],
};

const transaction: SourceTransaction = { xid: 1, commitLsn: 100n, commitTimeMicros: 0n };
const changes: RowChange[] = [
  { transaction, kind: 'truncate' },
  { transaction, kind: 'insert', newRow: rowOfCells(['1', 'a', '1.50']) },
  { transaction, kind: 'insert', newRow: rowOfCells(['2', 'b', '2.50']) },
  { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['2', unchangedToast, '3.00']) },
  {
    transaction,
    kind: 'update',
    oldKey: rowOfCells(['1', null, null]),
    newRow: rowOfCells(['3', 'a', '1.50']),
  },
  // A key change of a row this batch has no image of, its body not resent: the
  // body is read from the destination's row under key 9.
  {
    transaction,
    kind: 'update',
    oldKey: rowOfCells(['9', null, null]),
    newRow: rowOfCells(['10', unchangedToast, '9.00']),
  },
  { transaction, kind: 'delete', oldKey: rowOfCells(['2', null, null]) },
  { transaction, kind: 'insert', newRow: rowOfCells(['4', 'd', null]) },
];

const batch: ChangeBatch<ChangeList> = {
  mirror: 'm1',
  batchId: 8n,
  endLsn: 100n,
  tables: [{ table, held: ChangeList.of(changes) }],
  rowCount: changes.length,
};

const context: BatchContext = {
  database: 'DB',
  objects: internalObjects('DB', 'm1'),
  mirrorColumns: { softDeleteColumn: '_deleted', syncedAtColumn: '_synced_at' },
  logger: pino({ level: 'silent' }),
  localDir,
  beforeBegin: async (session) => {
    await session.execute('ALTER TABLE "DB"."PUBLIC"."ITEMS" ADD COLUMN IF NOT EXISTS "BODY" VARCHAR');
  },
};

/**
 * A session that keeps a committed checkpoint (batch 7), applies the guard's
 * move only at COMMIT, and throws on statement number `failAt` (1-based).
 */
class FakeSession implements SnowflakeSession {
  readonly statements: string[] = [];
  committedBatchId = 7n;
  #pendingBatchId: bigint | undefined;
  #inTransaction = false;
  failedAt: number | undefined;
  readonly #failAt: number | undefined;

  constructor(failAt?: number) {
    this.#failAt = failAt;
  }

  async execute(sqlText: string): Promise<StatementResult> {
    this.statements.push(sqlText);
    if (this.statements.length === this.#failAt) {
      this.failedAt = this.statements.length;
      throw Object.assign(new Error('injected failure'), { code: '100038', sqlState: '22018' });
    }
    const sql = sqlText.trim();
    if (sql.startsWith('BEGIN')) this.#inTransaction = true;
    else if (sql === 'COMMIT') {
      if (this.#pendingBatchId !== undefined) this.committedBatchId = this.#pendingBatchId;
      this.#pendingBatchId = undefined;
      this.#inTransaction = false;
    } else if (sql === 'ROLLBACK') {
      this.#pendingBatchId = undefined;
      this.#inTransaction = false;
    } else if (sql.startsWith('SELECT TO_VARCHAR("BATCH_ID")')) {
      return { rows: [{ BATCH_ID: String(this.committedBatchId), LSN: '90' }], affectedRows: 0 };
    } else if (sql.startsWith('UPDATE') && sql.includes('"CHECKPOINTS"')) {
      expect(this.#inTransaction).toBe(true);
      const previous = /"BATCH_ID" = (\d+)$/.exec(sql)?.[1];
      if (previous !== String(this.committedBatchId)) return { rows: [], affectedRows: 0 };
      this.#pendingBatchId = BigInt(/SET "BATCH_ID" = (\d+)/.exec(sql)?.[1] ?? '0');
      return { rows: [{ 'number of rows updated': 1 }], affectedRows: 1 };
    }
    return { rows: [], affectedRows: 0 };
  }

  async close(): Promise<void> {}
}

describe('applyBatch', () => {
  it('runs the guard, COPY and the apply inside one transaction', async () => {
    const session = new FakeSession();
    expect(await applyBatch(session, batch, context, 1)).toBe('applied');
    expect(session.committedBatchId).toBe(8n);
    const begin = session.statements.findIndex((sql) => sql.startsWith('BEGIN'));
    const statements = session.statements;
    expect(statements.slice(0, begin).some((sql) => sql.startsWith('PUT'))).toBe(true);
    expect(statements.slice(0, begin).some((sql) => sql.startsWith('ALTER TABLE'))).toBe(true);
    expect(statements[begin + 1]).toMatch(/^UPDATE .*"CHECKPOINTS"/s);
    expect(statements[begin + 2]).toMatch(/^COPY INTO .*FORCE = TRUE/s);
    expect(statements[begin]).toBe('BEGIN TRANSACTION NAME TRIBUTARY_M1');
    expect(statements.at(-1)).toBe('COMMIT');
    expect(statements.filter((sql) => sql === 'COMMIT')).toHaveLength(1);
    // truncate (soft), deletes (soft), update, insert, then the staged rows removed
    const applied = statements.slice(begin + 3, -1);
    expect(applied[0]).toMatch(/^UPDATE "DB"\."PUBLIC"\."ITEMS" SET "_DELETED" = TRUE/);
    expect(applied.at(-1)).toMatch(/^DELETE FROM .*"CHANGES_M1" WHERE "BATCH_ID" = 8$/);
    expect(applied.some((sql) => sql.includes('QUALIFY ROW_NUMBER()'))).toBe(true);
    // The refill from the old key comes before the (soft) delete of that key.
    const refill = applied.findIndex((sql) =>
      /^INSERT .* JOIN "DB"\."PUBLIC"\."ITEMS" o ON o\."ID" = s\."_TRIBUTARY_FILL_0"/s.test(sql),
    );
    const softDelete = applied.findIndex((sql) => /^UPDATE .* SET "_DELETED" = TRUE.* FROM/s.test(sql));
    expect(refill).toBeGreaterThan(0);
    expect(refill).toBeLessThan(softDelete);
  });

  it('records the swaps the batch makes due in its transaction, before COMMIT', async () => {
    const session = new FakeSession();
    const shadow = { ...table, destination: { schema: '_tributary_resync_public', table: 'items' } };
    expect(await applyBatch(session, { ...batch, swaps: [{ live: table, shadow }] }, context, 1)).toBe(
      'applied',
    );
    const statements = session.statements;
    const recorded = statements.findIndex((sql) =>
      sql.startsWith('INSERT INTO "DB"."_TRIBUTARY_INTERNAL"."SWAPS"'),
    );
    expect(recorded).toBeGreaterThan(statements.findIndex((sql) => sql.startsWith('BEGIN')));
    expect(statements[recorded + 1]).toBe('COMMIT');
    expect(statements[recorded]).toContain(`'_tributary_resync_public', 'items'`);
    // No DDL inside the transaction: the swap itself comes after the COMMIT (shadow-tables.ts).
    expect(statements.some((sql) => sql.includes('SWAP WITH'))).toBe(false);
  });

  it('skips a batch at or below the checkpoint without a transaction', async () => {
    const session = new FakeSession();
    session.committedBatchId = 8n;
    expect(await applyBatch(session, batch, context, 1)).toBe('skipped');
    expect(session.statements.some((sql) => sql.startsWith('BEGIN'))).toBe(false);
  });

  it('rolls back and skips when the guard finds the checkpoint already moved', async () => {
    const session = new FakeSession();
    const moving: SnowflakeSession = {
      execute: async (sql) => {
        // Another writer commits batch 8 between the read and the guard.
        if (sql.startsWith('BEGIN')) session.committedBatchId = 8n;
        return session.execute(sql);
      },
      close: async () => {},
    };
    expect(await applyBatch(moving, batch, context, 1)).toBe('skipped');
    expect(session.statements.filter((sql) => sql === 'COMMIT')).toHaveLength(0);
    expect(session.statements).toContain('ROLLBACK');
  });

  const statementCount = (() => {
    const session = new FakeSession();
    return applyBatch(session, batch, context, 1).then(() => session.statements.length);
  })();

  it('never commits after a failed statement, for every statement of the batch', async () => {
    const total = await statementCount;
    expect(total).toBeGreaterThan(8);
    for (let failAt = 1; failAt <= total; failAt++) {
      const session = new FakeSession(failAt);
      const failure = await applyBatch(session, batch, context, failAt).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure, `failure at statement ${failAt}`).toBeInstanceOf(Error);
      // A statement of the table's apply: its own fault; any other: the batch's, as the driver said.
      const failed = session.statements[failAt - 1] ?? '';
      const ofTable = failed.includes('"PUBLIC"."ITEMS"') && !failed.startsWith('ALTER TABLE');
      if (ofTable) {
        expect(failure, `failure at statement ${failAt}`).toMatchObject({
          kind: 'schema_mismatch',
          table: 'public.items',
        });
      } else {
        expect((failure as Error).message, `failure at statement ${failAt}`).toBe('injected failure');
      }
      const after = session.statements.slice(failAt);
      expect(after, `statements after failure ${failAt}`).not.toContain('COMMIT');
      const begun = session.statements.slice(0, failAt - 1).some((sql) => sql.startsWith('BEGIN'));
      const failedCommit = session.statements[failAt - 1] === 'COMMIT';
      if (begun || failedCommit) expect(after, `after failure ${failAt}`).toEqual(['ROLLBACK']);
      else expect(after).toEqual([]);
      expect(session.committedBatchId, `checkpoint after failure ${failAt}`).toBe(7n);
    }
  });
});

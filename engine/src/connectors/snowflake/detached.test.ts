// Transactions a killed engine left open: only the mirror's, only other sessions'.
import { describe, expect, it } from 'vitest';
import { abortDetachedTransactions, transactionName } from './detached.ts';
import type { SnowflakeSession, StatementResult } from './session.ts';

function session(transactions: Record<string, unknown>[], fail = false) {
  const statements: string[] = [];
  const fake: SnowflakeSession = {
    async execute(sql): Promise<StatementResult> {
      statements.push(sql);
      if (fail && sql.startsWith('SHOW')) throw new Error('unsupported');
      if (sql.startsWith('SELECT CURRENT_SESSION()')) return { rows: [{ SESSION: 7 }], affectedRows: 0 };
      if (sql === 'SHOW TRANSACTIONS') return { rows: transactions, affectedRows: 0 };
      return { rows: [], affectedRows: 0 };
    },
    async close() {},
  };
  return { fake, statements };
}

describe('abortDetachedTransactions', () => {
  it('names a mirror transaction as an unquoted identifier', () => {
    expect(transactionName('orders-to-wh.v2')).toBe('TRIBUTARY_ORDERS_TO_WH_V2');
  });

  it("aborts the mirror's transactions of other sessions only", async () => {
    const { fake, statements } = session([
      { id: '1700000000000000001', name: 'TRIBUTARY_M1', session: '5' },
      { id: '1700000000000000002', name: 'TRIBUTARY_M1', session: '7' },
      { id: '1700000000000000003', name: 'TRIBUTARY_OTHER', session: '5' },
    ]);
    expect(await abortDetachedTransactions(fake, 'm1')).toBe(1);
    expect(statements.filter((sql) => sql.includes('ABORT'))).toEqual([
      'SELECT SYSTEM$ABORT_TRANSACTION(1700000000000000001) AS "ABORTED"',
    ]);
  });

  it('reports a server that cannot list transactions', async () => {
    const { fake } = session([], true);
    expect(await abortDetachedTransactions(fake, 'm1')).toBeUndefined();
  });
});

// A pool over a test database that is dropped WITH (FORCE) (test/support/databases.ts):
// the termination of an idle or closing connection reaches the pool, where
// pg-pool re-emits it; droppablePool takes that one and no other.
import { describe, expect, it, vi } from 'vitest';
import { createTestDatabase, droppablePool } from '../support/databases.ts';

describe('droppablePool', () => {
  it("takes an idle connection's termination, as a forced drop delivers it, and no other error", async () => {
    const database = await createTestDatabase('droppable');
    const pool = droppablePool({ ...database.config, max: 1 });
    try {
      // Recorded without a listener of the test's own, which would take the error itself.
      const emitted = vi.spyOn(pool, 'emit');
      const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const removed = new Promise((resolve) => pool.once('remove', resolve));
      // The same FATAL 57P01 as DROP DATABASE … WITH (FORCE), on the pool's idle connection.
      await database.client.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]);
      await removed;
      // It reached the pool: without droppablePool's listener, an uncaught exception that fails the run.
      const errors = emitted.mock.calls.filter(([event]) => event === 'error');
      expect(errors.map(([, error]) => (error as { code?: string }).code)).toEqual(['57P01']);
      emitted.mockRestore();
      const other = Object.assign(new Error('connection lost'), { code: '08006' });
      expect(() => pool.emit('error', other)).toThrow('connection lost');
    } finally {
      await pool.end();
      await database.drop();
    }
  });
});

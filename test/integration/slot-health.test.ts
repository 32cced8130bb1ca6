// The slot health read (connectors/postgres/source/slot-health.ts) against a
// real server of the run's source major with max_slot_wal_keep_size = 1MB:
// slots of two databases in one read, WAL retained growing while nothing
// reads them, WAL at risk, then invalidation at a checkpoint, as each major
// reports it (conflicting 16+, invalidation_reason 17+); a refused login is a
// classified error without the password.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readServerSlots } from '../../engine/src/connectors/postgres/source/slot-health.ts';
import { slotHealthOf } from '../../engine/src/control/slot-health.ts';
import { isEngineError } from '../../engine/src/errors.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { type PrivatePostgres, startPrivatePostgres } from '../support/private-postgres.ts';
import { sourcePostgres } from '../support/testenv.ts';

describe(`slot health read on PostgreSQL ${sourcePostgres.major}`, () => {
  let server: PrivatePostgres;
  let source: pg.Client;
  const suffix = randomSuffix();
  const here = `slot_here_${suffix}`;
  const other = `slot_other_${suffix}`;

  beforeAll(async () => {
    server = await startPrivatePostgres({ settings: ['max_slot_wal_keep_size=1MB', 'wal_keep_size=0'] });
    source = await server.connect();
    await source.query(`CREATE DATABASE other`);
    await source.query(`CREATE TABLE filler (id int, pad text)`);
    await source.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [here]);
  }, 120_000);

  afterAll(async () => {
    await source?.end().catch(() => {});
    await server?.destroy();
  });

  it('reads the slots of every database of the server in one read', async () => {
    // The other database's slot, created from a connection to it.
    const inOther = new pg.Client({ ...server.config, database: 'other' });
    await inOther.connect();
    await inOther.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [other]);
    await inOther.end();

    const read = await readServerSlots(server.config, [here, other, `slot_absent_${suffix}`]);
    expect([...read.slots.keys()].sort()).toEqual([here, other].sort());
    expect(read.serverWalLsn).toBeGreaterThan(0n);
    const slot = read.slots.get(here);
    expect(slot).toMatchObject({ active: false, walStatus: 'reserved', invalidationReason: null });
    // max_slot_wal_keep_size is set: safe_wal_size says how much may still be written.
    expect(slot?.safeWalSizeBytes).toBeGreaterThan(0n);
    expect(slot?.conflicting).toBe(sourcePostgres.major >= 16 ? false : null);
    expect(slotHealthOf(here, 'paused', slot, new Date())).toMatchObject({
      healthy: true,
      reason: 'Healthy',
    });
    await source.query(`SELECT pg_drop_replication_slot($1)`, [other]);
  });

  it('shows retained WAL growing, then WAL at risk, then the slot invalidated', async () => {
    const before = (await readServerSlots(server.config, [here])).slots.get(here);
    for (let round = 0; round < 4; round++) {
      await source.query(
        `INSERT INTO filler SELECT g, repeat('x', 500) FROM generate_series($1::int * 5000, ($1::int + 1) * 5000 - 1) g`,
        [round],
      );
      await source.query(`SELECT pg_switch_wal()`);
    }
    const grown = (await readServerSlots(server.config, [here])).slots.get(here);
    expect((grown?.retainedWalBytes ?? 0n) - (before?.retainedWalBytes ?? 0n)).toBeGreaterThanOrEqual(
      4n * 1024n * 1024n,
    );
    expect(grown?.unconfirmedBytes).toBeGreaterThanOrEqual(4n * 1024n * 1024n);
    // Past max_slot_wal_keep_size, before a checkpoint removes it (a checkpoint
    // of the server's own may have come first: then it is lost already).
    if (grown?.walStatus === 'unreserved') {
      expect(slotHealthOf(here, 'paused', grown, new Date())).toMatchObject({
        healthy: false,
        reason: 'WalAtRisk',
      });
      expect(grown.safeWalSizeBytes).toBeLessThanOrEqual(0n);
    } else {
      expect(grown?.walStatus).toBe('lost');
    }

    await source.query(`CHECKPOINT`);
    let lost = grown;
    await waitFor(
      async () => {
        lost = (await readServerSlots(server.config, [here])).slots.get(here);
        return lost?.walStatus === 'lost';
      },
      30_000,
      'the slot invalidated',
    );
    const health = slotHealthOf(here, 'paused', lost, new Date());
    expect(health).toMatchObject({ healthy: false, reason: 'Invalidated' });
    expect(lost?.retainedWalBytes).toBeNull();
    expect(lost?.safeWalSizeBytes).toBeNull();
    if (sourcePostgres.major >= 17) {
      expect(lost?.invalidationReason).toBe('wal_removed');
      expect(health.message).toContain('wal_removed');
    } else {
      expect(lost?.invalidationReason).toBeNull();
    }
  });

  it('fails a refused login with a classified error that carries no password', async () => {
    const password = `wrong-${suffix}`;
    const failure = await readServerSlots({ ...server.config, password }, [here]).catch(
      (error: unknown) => error,
    );
    expect(isEngineError(failure)).toBe(true);
    if (!isEngineError(failure)) return;
    expect(failure.kind).toBe('source_auth');
    expect(failure.message).toContain(`${server.config.host}:${server.config.port}`);
    expect(JSON.stringify({ message: failure.message, cause: String(failure.cause) })).not.toContain(
      password,
    );
  });
});

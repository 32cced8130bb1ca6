// A ClickHouse resync's swap is written down in the checkpoint before it is
// made (connectors/clickhouse/shadow-tables.ts): whatever part of it a crash
// interrupted, the next start completes it, and completing it again changes
// nothing. Each interrupted point is set up by hand on the real servers:
// current ClickHouse (EXCHANGE TABLES) and clickhouse-server 18.16 (RENAME).
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckpointStore } from '../../engine/src/connectors/clickhouse/checkpoints.ts';
import { ClickHouseDestination } from '../../engine/src/connectors/clickhouse/destination.ts';
import { ClickHouseTransport } from '../../engine/src/connectors/clickhouse/transport.ts';
import type { DestinationTable } from '../../engine/src/connectors/records.ts';
import { clickhouseEngines } from '../support/clickhouse-engines.ts';
import { ClickHouseScratch } from '../support/clickhouse-scratch.ts';

const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });
const mirror = 'swapper';

function liveTable(database: string, name: string): DestinationTable {
  return {
    source: { schema: 'public', table: name },
    destination: { schema: database, table: name },
    columns: [
      { name: 'id', typeOid: 23, typeModifier: -1, typeName: 'integer', notNull: true },
      { name: 'v', typeOid: 25, typeModifier: -1, typeName: 'text', notNull: false },
    ],
    keyColumns: ['id'],
  };
}

describe.each(clickhouseEngines)('an interrupted resync swap on $name', (engine) => {
  const scratch = new ClickHouseScratch(engine, 'sw');
  const { database, config } = scratch;
  const destination = () =>
    new ClickHouseDestination(config, {
      mirror,
      mirrorColumns: {},
      tableMappings: [],
      maxBatchSize: 1000,
      logger,
    });
  const values = async (name: string) => {
    const result = await scratch.admin.query({
      query: `SELECT v FROM ${database}.${name} ORDER BY v`,
      format: 'JSONEachRow',
    });
    return (await result.json<{ v: string }>()).map((row) => row.v);
  };
  const tables = (name: string) => scratch.tables(name);

  /** A live table with the row 'old', its shadow with 'new', and the checkpoint naming their swap. */
  async function swapDue(name: string): Promise<DestinationTable> {
    const live = liveTable(database, name);
    const first = destination();
    try {
      await first.setupTables([live]);
      await scratch.admin.command({ query: `INSERT INTO ${database}.${name} (id, v) VALUES (1, 'old')` });
      const shadow = first.shadowTables.shadowOf(live);
      await first.shadowTables.create(live, shadow);
      await scratch.admin.command({
        query: `INSERT INTO ${database}.${shadow.destination.table} (id, v) VALUES (1, 'new')`,
      });
      const transport = new ClickHouseTransport(config);
      const checkpoints = new CheckpointStore(transport, database);
      const pending = await first.shadowTables.pending([{ live, shadow }]);
      expect(pending[0]?.uuid !== '').toBe(engine.modern);
      await checkpoints.write(
        mirror,
        { batchId: 7n, lsn: 70n },
        0n,
        await checkpoints.stored(mirror),
        pending,
      );
      await transport.close();
    } finally {
      await first.close();
    }
    return live;
  }

  /** What a start does: the stored checkpoint's swaps are completed before any table is set up. */
  async function start(live: DestinationTable): Promise<void> {
    const next = destination();
    try {
      await next.setupTables([live]);
    } finally {
      await next.close();
    }
  }

  beforeAll(() => scratch.create());
  afterAll(() => scratch.drop());

  it('makes a swap the checkpoint names but nobody began, once', async () => {
    const live = await swapDue('not_begun');
    expect(await tables('not_begun')).toEqual(['_tributary_resync_not_begun', 'not_begun']);
    await start(live);
    expect(await values('not_begun')).toEqual(['new']);
    expect(await tables('not_begun')).toEqual(['not_begun']);
    // The checkpoint still names it: the next start changes nothing.
    await start(live);
    expect(await values('not_begun')).toEqual(['new']);
    expect(await tables('not_begun')).toEqual(['not_begun']);
  });

  it('finishes a swap interrupted after its first statement', async () => {
    const live = await swapDue('half');
    const table = (name: string) => `${database}.${name}`;
    await scratch.admin.command({
      query: engine.modern
        ? `EXCHANGE TABLES ${table('half')} AND ${table('_tributary_resync_half')}`
        : `RENAME TABLE ${table('half')} TO ${table('_tributary_replaced_half')}, ${table('_tributary_resync_half')} TO ${table('half')}`,
    });
    await start(live);
    expect(await values('half')).toEqual(['new']);
    expect(await tables('half')).toEqual(['half']);
    await start(live);
    expect(await values('half')).toEqual(['new']);
  });

  it.skipIf(engine.modern)(
    'finishes a RENAME of which only the first part was made (a server crash)',
    async () => {
      const live = await swapDue('parted');
      await scratch.admin.command({
        query: `RENAME TABLE ${database}.parted TO ${database}._tributary_replaced_parted`,
      });
      await start(live);
      expect(await values('parted')).toEqual(['new']);
      expect(await tables('parted')).toEqual(['parted']);
    },
  );
});

// The online backfill wired into the change applier, over the in-memory
// destination: where a chunk enters the stream, which streamed changes apply,
// that a chunk is never split between batches, and that the progress each
// batch records is taken at its cut and written before the batch is.
import { describe, expect, it } from 'vitest';
import { memoryDestinationOf } from '../../../../test/support/memory-destinations.ts';
import type { BatchBackfill } from '../../catalog/catalog.ts';
import type { SourceMessage, StreamEvent } from '../../connectors/changes.ts';
import type { ChangeBatch } from '../../connectors/records.ts';
import { type DestinationTable, unchangedToast } from '../../connectors/records.ts';
import { rowOfCells } from '../../connectors/rows.ts';
import { ChangeApplier } from '../change-applier.ts';
import { Backfill } from './backfill.ts';
import { keyOrderOf } from './key-order.ts';
import { type ChunkRequest, freshProgress, type ReadChunk } from './table-backfill.ts';

const mirror = 'm';
const table: DestinationTable = {
  source: { schema: 'public', table: 't' },
  destination: { schema: 'public', table: 't' },
  columns: [
    { name: 'id', typeOid: 23, typeModifier: -1, typeName: 'integer', notNull: true },
    { name: 'v', typeOid: 25, typeModifier: -1, typeName: 'text', notNull: false },
  ],
  keyColumns: ['id'],
};
const order = keyOrderOf(table);
if (!order) throw new Error('orderable');

const change = (walStart: bigint, message: SourceMessage): StreamEvent => ({
  tag: 'change',
  walStart,
  message,
});
const relation: StreamEvent = change(1n, {
  tag: 'relation',
  relationId: 1,
  schema: 'public',
  name: 't',
  replicaIdentity: 'default',
  columns: [
    { name: 'id', typeOid: 23, typeModifier: -1, isKey: true },
    { name: 'v', typeOid: 25, typeModifier: -1, isKey: false },
  ],
});

/** One transaction of xid `xid` committing at `commitLsn` (ending one later), upserting `rows`. */
function transaction(
  xid: number,
  commitLsn: bigint,
  rows: readonly (readonly [string, string])[],
): StreamEvent[] {
  return [
    change(commitLsn - 100n, { tag: 'begin', finalLsn: commitLsn, commitTimeMicros: 0n, xid }),
    ...rows.map(([id, v], index) =>
      change(commitLsn - 50n + BigInt(index), {
        tag: 'update',
        relationId: 1,
        newTuple: rowOfCells([id, v]),
      }),
    ),
    change(commitLsn, { tag: 'commit', flags: 0, commitLsn, endLsn: commitLsn + 1n, commitTimeMicros: 0n }),
  ];
}

const rows = (ids: number[], v = 'copied') => ids.map((id) => rowOfCells([String(id), `${v}${id}`]));

async function setUp(chunks: ReadChunk[], maxRows = 1000) {
  const destination = await memoryDestinationOf([table]);
  const requests: ChunkRequest[] = [];
  const recorded: { batchId: bigint; progress: BatchBackfill; syncedBefore: boolean }[] = [];
  /** Each acknowledged position, with how many records were made before it. */
  const acknowledged: { lsn: bigint; recordsBefore: number }[] = [];
  const synced = new Set<bigint>();
  const loading = new Backfill({
    tables: [{ table, order: order as NonNullable<typeof order>, progress: freshProgress(1) }],
    chunkRows: 3,
    chunkBytes: 1 << 20,
    onChunkRead: () => {},
    readChunk: async (_table, _order, request) => {
      requests.push(request);
      const next = chunks.shift();
      if (!next) return new Promise<ReadChunk>(() => {});
      return next;
    },
  });
  const sync = destination.syncBatch.bind(destination);
  destination.syncBatch = async (batch) => {
    await sync(batch);
    synced.add(batch.batchId);
  };
  const applier = new ChangeApplier({
    mirror,
    destination,
    batches: { async startBatch() {}, async finishBatch() {} },
    acknowledge: (lsn) => {
      acknowledged.push({ lsn, recordsBefore: recorded.length });
    },
    typeNames: async (columns) => columns.map(() => 'text'),
    partitionAncestors: async () => [],
    publication: { name: 'pub', createdByMirror: true },
    log: async () => {},
    tableMappings: [{ source: table.source, destination: table.destination, exclude: [], columns: [] }],
    tables: [table],
    limits: { maxRows, maxBytes: 1 << 20 },
    checkpoint: { lsn: 0n, batchId: 0n, transactionPosition: undefined },
    loading,
    backfill: {
      progress: () => loading.progress(),
      record: async (batchId, progress) => {
        recorded.push({ batchId, progress, syncedBefore: synced.has(batchId) });
      },
      durable: async (progress) => {
        loading.durable(progress);
      },
      swaps: () => [],
    },
  });
  loading.start();
  // Lets the chunk read resolve.
  await new Promise((resolve) => setImmediate(resolve));
  return { destination, applier, requests, recorded, acknowledged, loading };
}

describe('online backfill in the change applier', () => {
  it('inserts a chunk once the stream passed its high LSN, after the changes it saw and before the later ones', async () => {
    const { destination, applier, requests, recorded } = await setUp([
      { snapshot: '100:100:', rows: rows([1, 2, 3]), pendingRows: [], highLsn: 2000n },
      { snapshot: '300:300:', rows: rows([4]), pendingRows: [], highLsn: 4000n },
    ]);
    expect(requests[0]).toEqual({ after: null, limit: 3, pendingKeys: [] });
    await applier.apply([relation]);
    // Before the chunk: every key is above the frontier, so nothing applies.
    await applier.apply(transaction(50, 1000n, [['2', 'streamed before']]));
    expect(applier.isEmpty).toBe(true);
    // xid 150 commits after the chunk's snapshot: its change of 3 is not in the chunk.
    await applier.apply(transaction(150, 1900n, [['3', 'not in the snapshot']]));
    // The next transaction begins past high: the chunk enters first, without key 3.
    await applier.apply(transaction(200, 2500n, [['1', 'streamed after']]));
    await applier.flush();
    expect(destination.rows('public.t').sort()).toEqual([
      ['1', 'streamed after'],
      ['2', 'copied2'],
    ]);
    expect(recorded[0]?.progress['public.t']).toMatchObject({
      after: ['3'],
      pending: [['3']],
      rowsCopied: 2,
    });
    expect(recorded.every((record) => !record.syncedBefore)).toBe(true);
    // The next chunk reads key 3 again, and the rest of the range.
    expect(requests[1]).toEqual({ after: ['3'], limit: 3, pendingKeys: [['3']] });
  });

  it('records a key only the pending keys hold before it acknowledges the commit that put it there', async () => {
    const { destination, applier, recorded, acknowledged } = await setUp([
      { snapshot: '100:100:', rows: rows([1, 2, 3]), pendingRows: [], highLsn: 2000n },
    ]);
    await applier.apply([relation, { tag: 'keepalive', walEnd: 2000n }]);
    await applier.flush();
    expect(recorded.map((record) => record.batchId)).toEqual([1n]);
    // Key 9 (above the frontier, never copied) moves to 0 (below it) without its
    // TOASTed value: nothing is written, and only the pending keys remember 0.
    await applier.apply([
      change(2900n, { tag: 'begin', finalLsn: 3000n, commitTimeMicros: 0n, xid: 250 }),
      change(2950n, {
        tag: 'update',
        relationId: 1,
        keyTuple: rowOfCells(['9', null]),
        newTuple: rowOfCells(['0', unchangedToast]),
      }),
      change(3000n, { tag: 'commit', flags: 0, commitLsn: 3000n, endLsn: 3001n, commitTimeMicros: 0n }),
    ]);
    expect(destination.rows('public.t')).toHaveLength(3);
    expect(recorded.at(-1)).toMatchObject({ batchId: 1n, progress: { 'public.t': { pending: [['0']] } } });
    const commit = acknowledged.find((entry) => entry.lsn === 3001n);
    expect(commit?.recordsBefore).toBe(2);
  });

  it('waits for a keepalive at or past high on a quiet stream, and never splits a chunk between batches', async () => {
    const { destination, applier, recorded, loading } = await setUp(
      [{ snapshot: '100:100:', rows: rows([1, 2]), pendingRows: [], highLsn: 2000n }],
      1,
    );
    await applier.apply([relation, { tag: 'keepalive', walEnd: 1999n }]);
    expect(applier.isEmpty).toBe(true);
    expect(applier.backfillWaitsForStream).toBe(true);
    await applier.apply([{ tag: 'keepalive', walEnd: 2000n }]);
    await applier.flush();
    expect(destination.rows('public.t')).toEqual([
      ['1', 'copied1'],
      ['2', 'copied2'],
    ]);
    // Two rows over a one-row batch limit: one batch, whose record says the range is done.
    expect(recorded.map((record) => record.batchId)).toEqual([1n]);
    expect(recorded[0]?.progress['public.t']).toMatchObject({ rangeDone: true, pending: [] });
    expect(loading.active).toBe(false);
  });
});

describe('an online resync in the change applier', () => {
  const shadow: DestinationTable = { ...table, destination: { schema: 'shadow', table: 't' } };

  async function setUpResync(chunks: ReadChunk[]) {
    const destination = await memoryDestinationOf([table, shadow]);
    const batches: ChangeBatch[] = [];
    const sync = destination.syncBatch.bind(destination);
    destination.syncBatch = async (batch) => {
      batches.push(batch);
      await sync(batch);
    };
    const loading = new Backfill({
      tables: [
        {
          table: shadow,
          order: order as NonNullable<typeof order>,
          progress: freshProgress(1),
          key: 'resync public.t',
        },
      ],
      chunkRows: 3,
      chunkBytes: 1 << 20,
      onChunkRead: () => {},
      readChunk: async () => chunks.shift() ?? new Promise<ReadChunk>(() => {}),
    });
    const resyncing = new Map([['public.t', { live: table, shadow }]]);
    const applier = new ChangeApplier({
      mirror,
      destination,
      batches: { async startBatch() {}, async finishBatch() {} },
      acknowledge: () => {},
      typeNames: async (columns) => columns.map(() => 'text'),
      partitionAncestors: async () => [],
      publication: { name: 'pub', createdByMirror: true },
      log: async () => {},
      tableMappings: [{ source: table.source, destination: table.destination, exclude: [], columns: [] }],
      tables: [table],
      limits: { maxRows: 1000, maxBytes: 1 << 20 },
      checkpoint: { lsn: 0n, batchId: 0n, transactionPosition: undefined },
      loading,
      resyncShadows: resyncing,
      backfill: {
        progress: () => loading.progress(),
        record: async () => {},
        durable: async (progress) => {
          loading.durable(progress);
        },
        swaps: (progress) => {
          const done = progress['resync public.t'];
          if (!done?.rangeDone || done.pending.length > 0 || !resyncing.has('public.t')) return [];
          resyncing.delete('public.t');
          return [{ live: table, shadow }];
        },
      },
    });
    loading.start();
    await new Promise((resolve) => setImmediate(resolve));
    return { destination, applier, batches };
  }

  it('writes each change to the live table and the shadow, and swaps them in a batch of its own when the last chunk is empty', async () => {
    const { destination, applier, batches } = await setUpResync([
      { snapshot: '100:100:', rows: rows([1, 2, 3]), pendingRows: [], highLsn: 2000n },
      { snapshot: '300:300:', rows: [], pendingRows: [], highLsn: 4000n },
    ]);
    await applier.apply([relation]);
    // Before the first chunk: the live table takes the change, the shadow skips it (above its frontier).
    await applier.apply(transaction(50, 1000n, [['2', 'streamed']]));
    await applier.apply(transaction(200, 2500n, [['1', 'after the chunk']]));
    await applier.flush();
    expect(destination.rows('public.t').sort()).toEqual([
      ['1', 'after the chunk'],
      ['2', 'streamed'],
    ]);
    expect(destination.rows('shadow.t').sort()).toEqual([
      ['1', 'after the chunk'],
      ['2', 'copied2'],
      ['3', 'copied3'],
    ]);
    // The next (empty) chunk ends the copy with nothing to write: a batch of the swap alone.
    await applier.apply([{ tag: 'keepalive', walEnd: 4000n }]);
    await applier.flush();
    const swapBatch = batches.at(-1);
    expect(swapBatch?.tables).toEqual([]);
    expect(swapBatch?.swaps).toEqual([{ live: table, shadow }]);
    // From then on the live table alone takes the changes.
    await applier.apply(transaction(400, 5000n, [['4', 'later']]));
    await applier.flush();
    expect(batches.at(-1)?.tables.map((changes) => changes.table)).toEqual([table]);
  });
});

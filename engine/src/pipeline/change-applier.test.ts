import { describe, expect, it, vi } from 'vitest';
import { GatedDestination, memoryDestinationOf } from '../../../test/support/memory-destinations.ts';
import { wireTuple } from '../../../test/support/wire-tuple.ts';
import type { RelationMessage, SourceMessage, StreamEvent } from '../connectors/changes.ts';
import type { Destination } from '../connectors/destination.ts';
import { MemoryDestination } from '../connectors/memory/destination.ts';
import { FaultInjectingDestination } from '../connectors/memory/fault-injecting.ts';
import { ChangeList, type DestinationTable, type RowChange, unchangedToast } from '../connectors/records.ts';
import { rowOfCells } from '../connectors/rows.ts';
import { type ChangeApplier as Applier, ChangeApplier, resumeStepRows } from './change-applier.ts';

const mirror = 'm';
const int4 = 23;
const text = 25;

const table: DestinationTable = {
  source: { schema: 'public', table: 't' },
  destination: { schema: 'public', table: 't' },
  columns: [
    { name: 'id', typeOid: int4, typeModifier: -1, typeName: 'integer', notNull: true },
    { name: 'v', typeOid: text, typeModifier: -1, typeName: 'text', notNull: false },
  ],
  keyColumns: ['id'],
};

const relation = (extraColumns: RelationMessage['columns'] = []): RelationMessage => ({
  tag: 'relation',
  relationId: 1,
  schema: 'public',
  name: 't',
  replicaIdentity: 'default',
  columns: [
    { name: 'id', typeOid: int4, typeModifier: -1, isKey: true },
    { name: 'v', typeOid: text, typeModifier: -1, isKey: false },
    ...extraColumns,
  ],
});

const change = (walStart: bigint, message: SourceMessage): StreamEvent => ({
  tag: 'change',
  walStart,
  message,
});

/**
 * One transaction: begin at `commitLsn`, the given inserts, commit ending at
 * `commitLsn + 1`. Change LSNs lie just before the commit.
 */
function transaction(commitLsn: bigint, rows: readonly (readonly [string, string])[]): StreamEvent[] {
  return [
    change(commitLsn - 100n, { tag: 'begin', finalLsn: commitLsn, commitTimeMicros: 0n, xid: 1 }),
    ...rows.map(([id, v], index) =>
      change(commitLsn - 50n + BigInt(index), {
        tag: 'insert',
        relationId: 1,
        newTuple: rowOfCells([id, v]),
      }),
    ),
    change(commitLsn, { tag: 'commit', flags: 0, commitLsn, endLsn: commitLsn + 1n, commitTimeMicros: 0n }),
  ];
}

interface Recorded {
  readonly applier: Applier;
  readonly acknowledged: bigint[];
  readonly started: bigint[];
  readonly finished: bigint[];
  readonly typeLookups: number[][];
  /** The mirror log lines, as `LEVEL message`. */
  readonly logs: string[];
}

async function applierOver(
  destination: Destination,
  options: {
    maxRows?: number;
    maxBytes?: number;
    tableStartLsns?: ReadonlyMap<string, bigint>;
    /** Source.partitionAncestors, by relation id (none by default). */
    partitionAncestors?: Readonly<Record<number, readonly { schema: string; table: string }[]>>;
    publicationCreatedByMirror?: boolean;
  } = {},
): Promise<Recorded> {
  const checkpoint = await destination.readCheckpoint(mirror);
  const acknowledged: bigint[] = [];
  const started: bigint[] = [];
  const finished: bigint[] = [];
  const typeLookups: number[][] = [];
  const logs: string[] = [];
  const applier = new ChangeApplier({
    mirror,
    destination,
    batches: {
      async startBatch(_mirror, batch) {
        started.push(batch.batchId);
      },
      async finishBatch(_mirror, batch) {
        finished.push(batch.batchId);
      },
    },
    // As the replication stream does: only a position further on is reported.
    acknowledge: (lsn) => {
      if (lsn > (acknowledged.at(-1) ?? 0n)) acknowledged.push(lsn);
    },
    typeNames: async (columns) => {
      typeLookups.push(columns.map((column) => column.typeOid));
      return columns.map(() => 'bigint');
    },
    partitionAncestors: async (relationId) => options.partitionAncestors?.[relationId] ?? [],
    publication: { name: 'pub', createdByMirror: options.publicationCreatedByMirror ?? true },
    log: async (level, message) => {
      logs.push(`${level} ${message}`);
    },
    tableMappings: [{ source: table.source, destination: table.destination, exclude: [], columns: [] }],
    tables: [table],
    limits: { maxRows: options.maxRows ?? 1000, maxBytes: options.maxBytes ?? 1 << 20 },
    checkpoint: {
      lsn: checkpoint?.lsn ?? 0n,
      batchId: checkpoint?.batchId ?? 0n,
      transactionPosition: checkpoint?.transactionPosition,
    },
    tableStartLsns: options.tableStartLsns,
  });
  return { applier, acknowledged, started, finished, typeLookups, logs };
}

const memoryDestination = () => memoryDestinationOf([table]);

describe('ChangeApplier', () => {
  it('acknowledges a commit only once the batch holding it is durable', async () => {
    const destination = await memoryDestination();
    const { applier, acknowledged, finished } = await applierOver(destination);
    await applier.apply([change(10n, relation()), ...transaction(1000n, [['1', 'a']])]);
    expect(acknowledged).toEqual([]);
    expect(destination.rows('public.t')).toEqual([]);

    await applier.flush();
    expect(destination.rows('public.t')).toEqual([['1', 'a']]);
    expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 1n, lsn: 1001n });
    expect(finished).toEqual([1n]);
    expect(acknowledged).toEqual([1001n]);
  });

  it('acknowledges commits and keepalives at once when nothing of the mirror is pending', async () => {
    const destination = await memoryDestination();
    const { applier, acknowledged } = await applierOver(destination);
    await applier.apply([
      change(10n, relation()),
      change(20n, { ...relation(), relationId: 99, name: 'other' }),
      // A transaction of a table the mirror does not replicate.
      change(100n, { tag: 'begin', finalLsn: 200n, commitTimeMicros: 0n, xid: 1 }),
      change(150n, { tag: 'insert', relationId: 99, newTuple: rowOfCells(['x']) }),
      { tag: 'keepalive', walEnd: 160n },
      change(200n, { tag: 'commit', flags: 0, commitLsn: 200n, endLsn: 201n, commitTimeMicros: 0n }),
      { tag: 'keepalive', walEnd: 300n },
    ]);
    // The keepalive inside the open transaction is not acknowledged.
    expect(acknowledged).toEqual([201n, 300n]);

    await applier.apply([...transaction(1000n, [['1', 'a']]), { tag: 'keepalive', walEnd: 2000n }]);
    // Buffered rows hold the slot back: the keepalive is not acknowledged either.
    expect(acknowledged).toEqual([201n, 300n]);
    expect(destination.appliedBatchIds).toEqual([]);
  });

  it('a full batch cut inside a transaction acknowledges only the last complete commit', async () => {
    const destination = await memoryDestination();
    const { applier, acknowledged } = await applierOver(destination, { maxRows: 2 });
    await applier.apply([change(10n, relation()), ...transaction(500n, [['1', 'a']])]);
    await applier.apply(
      transaction(1000n, [
        ['2', 'b'],
        ['3', 'c'],
      ]).slice(0, 2),
    );
    // Rows 1 and 2 filled the batch: synced, but row 2's transaction is still open.
    await applier.writing;
    expect(destination.appliedBatchIds).toEqual([1n]);
    expect(acknowledged).toEqual([501n]);
    // The checkpoint also says how far into the open transaction the destination is.
    expect(await destination.readCheckpoint(mirror)).toEqual({
      batchId: 1n,
      lsn: 501n,
      transactionPosition: { commitLsn: 1000n, changeLsn: 950n, changeRank: 1 },
    });
  });

  it('after a crash before the acknowledgement, skips the transactions the destination holds', async () => {
    const destination = await memoryDestination();
    const events = [
      change(10n, relation()),
      ...transaction(1000n, [['1', 'a']]),
      ...transaction(2000n, [['2', 'b']]),
    ];
    const first = await applierOver(destination);
    await first.applier.apply(events);
    await first.applier.flush();
    expect(first.acknowledged).toEqual([2001n]);

    // The acknowledgement never reached the server: the slot sends everything again.
    const second = await applierOver(destination);
    await second.applier.apply([...events, ...transaction(3000n, [['3', 'c']])]);
    await second.applier.flush();
    expect(destination.rows('public.t')).toEqual([
      ['1', 'a'],
      ['2', 'b'],
      ['3', 'c'],
    ]);
    expect(second.started).toEqual([2n]);
    expect(destination.appliedBatchIds).toEqual([1n, 2n]);
    expect(second.acknowledged).toEqual([3001n]);
  });

  it('a transaction larger than a batch goes on after each crash from the last change made durable', async () => {
    const destination = await memoryDestination();
    // 10 inserts in one transaction; rows 4 to 7 are one multi-insert record
    // (a COPY), so they share an LSN and only their rank tells them apart.
    const lsns = [900n, 901n, 902n, 903n, 903n, 903n, 903n, 904n, 905n, 906n];
    const big = [
      change(10n, relation()),
      ...transaction(500n, [['0', 'before']]),
      change(800n, { tag: 'begin', finalLsn: 1000n, commitTimeMicros: 0n, xid: 7 }),
      ...lsns.map((lsn, index) =>
        change(lsn, {
          tag: 'insert',
          relationId: 1,
          newTuple: rowOfCells([String(index + 1), `r${index + 1}`]),
        }),
      ),
      change(1000n, { tag: 'commit', flags: 0, commitLsn: 1000n, endLsn: 1001n, commitTimeMicros: 0n }),
    ];
    const positions: unknown[] = [];
    // Each run syncs one batch of 3 rows, then the engine dies: the slot was
    // only acknowledged to 501, so the next run is sent the whole transaction again.
    for (let run = 0; run < 3; run++) {
      const { applier, acknowledged } = await applierOver(destination, { maxRows: 3 });
      const before = destination.appliedBatchIds.length;
      for (const event of big) {
        await applier.apply([event]);
        if (destination.appliedBatchIds.length > before) break;
      }
      positions.push((await destination.readCheckpoint(mirror))?.transactionPosition);
      expect(acknowledged.every((lsn) => lsn <= 501n)).toBe(true);
    }
    expect(positions).toEqual([
      { commitLsn: 1000n, changeLsn: 901n, changeRank: 1 },
      { commitLsn: 1000n, changeLsn: 903n, changeRank: 2 },
      { commitLsn: 1000n, changeLsn: 904n, changeRank: 1 },
    ]);
    // The last run finishes the transaction: its checkpoint holds no position.
    const last = await applierOver(destination, { maxRows: 3 });
    await last.applier.apply(big);
    await last.applier.flush();
    expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 4n, lsn: 1001n });
    expect(last.acknowledged).toEqual([1001n]);
    expect(destination.rows('public.t').map((row) => row[0])).toEqual([
      '0',
      ...lsns.map((_, index) => String(index + 1)),
    ]);
    // Every change went to the destination exactly once: no batch replayed a prefix.
    expect(destination.appliedBatchIds).toEqual([1n, 2n, 3n, 4n]);
  });

  it('after a restart inside a transaction, makes a small first step durable, then batches as usual', async () => {
    const destination = await memoryDestination();
    const rows = 2 * resumeStepRows + 5_000;
    const big = [
      change(10n, relation()),
      change(100n, { tag: 'begin', finalLsn: 1_000_000n, commitTimeMicros: 0n, xid: 7 }),
      ...Array.from({ length: rows }, (_, index) =>
        change(1_000n + BigInt(index), {
          tag: 'insert',
          relationId: 1,
          newTuple: rowOfCells([String(index), 'v']),
        }),
      ),
      change(1_000_000n, {
        tag: 'commit',
        flags: 0,
        commitLsn: 1_000_000n,
        endLsn: 1_000_001n,
        commitTimeMicros: 0n,
      }),
    ];
    const maxRows = resumeStepRows + 2_000;
    const first = await applierOver(destination, { maxRows, maxBytes: 1 << 30 });
    await first.applier.apply(big.slice(0, 2 + maxRows));
    expect(destination.rows('public.t')).toHaveLength(maxRows);

    const second = await applierOver(destination, { maxRows, maxBytes: 1 << 30 });
    await second.applier.apply(big.slice(0, 2 + maxRows + resumeStepRows));
    // The first batch after the restart was cut at resumeStepRows, not maxRows.
    expect(destination.appliedBatchIds).toEqual([1n, 2n]);
    expect(destination.rows('public.t')).toHaveLength(maxRows + resumeStepRows);
    await second.applier.apply(big.slice(2 + maxRows + resumeStepRows));
    await second.applier.flush();
    expect(destination.rows('public.t')).toHaveLength(rows);
    expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 3n, lsn: 1_000_001n });
  });

  it('applies a transaction in full when the recorded position is of another one', async () => {
    const destination = await memoryDestination();
    const first = await applierOver(destination, { maxRows: 2 });
    await first.applier.apply([
      change(10n, relation()),
      ...transaction(1000n, [
        ['1', 'a'],
        ['2', 'b'],
        ['3', 'c'],
      ]).slice(0, 3),
    ]);
    expect((await destination.readCheckpoint(mirror))?.transactionPosition?.commitLsn).toBe(1000n);
    // A position whose transaction is not sent again (the slot moved past it)
    // must not make the applier skip changes of any other transaction.
    const second = await applierOver(destination, { maxRows: 10 });
    await second.applier.apply([
      change(10n, relation()),
      ...transaction(2000n, [
        ['1', 'x'],
        ['2', 'y'],
      ]),
    ]);
    await second.applier.flush();
    expect(destination.rows('public.t')).toEqual([
      ['1', 'x'],
      ['2', 'y'],
    ]);
  });

  it('skips a table’s transactions that committed before its initial load', async () => {
    const destination = await memoryDestination();
    const { applier, acknowledged } = await applierOver(destination, {
      tableStartLsns: new Map([['public.t', 1500n]]),
    });
    await applier.apply([
      change(10n, relation()),
      ...transaction(1000n, [['1', 'from before the load']]),
      ...transaction(2000n, [['2', 'after']]),
    ]);
    await applier.flush();
    expect(destination.rows('public.t')).toEqual([['2', 'after']]);
    expect(acknowledged).toEqual([1001n, 2001n]);
  });

  it('does not acknowledge a batch the destination failed to write, and replays it under the next run', async () => {
    const memory = await memoryDestination();
    const destination = new FaultInjectingDestination(memory);
    const events = [change(10n, relation()), ...transaction(1000n, [['1', 'a']])];
    const first = await applierOver(destination);
    destination.failNextSyncs(1);
    await first.applier.apply(events);
    await expect(first.applier.flush()).rejects.toMatchObject({ kind: 'destination_write' });
    expect(first.acknowledged).toEqual([]);
    expect(first.finished).toEqual([]);
    expect(memory.rows('public.t')).toEqual([]);

    const second = await applierOver(destination);
    await second.applier.apply(events);
    await second.applier.flush();
    expect(memory.rows('public.t')).toEqual([['1', 'a']]);
    expect(second.acknowledged).toEqual([1001n]);
    expect(destination.syncedBatchIds).toEqual([1n]);
  });

  it('a batch made durable whose reply was lost is not acknowledged, and is not applied twice', async () => {
    const memory = await memoryDestination();
    const destination = new FaultInjectingDestination(memory);
    const events = [
      change(10n, relation()),
      ...transaction(1000n, [['1', 'a']]),
      change(1500n, { tag: 'begin', finalLsn: 1600n, commitTimeMicros: 0n, xid: 2 }),
      change(1550n, { tag: 'update', relationId: 1, newTuple: rowOfCells(['1', 'b']) }),
      change(1600n, { tag: 'commit', flags: 0, commitLsn: 1600n, endLsn: 1601n, commitTimeMicros: 0n }),
    ];
    const first = await applierOver(destination);
    destination.failNextRepliesAfterSync(1);
    await first.applier.apply(events);
    await expect(first.applier.flush()).rejects.toMatchObject({ kind: 'connection' });
    expect(first.acknowledged).toEqual([]);
    expect(memory.rows('public.t')).toEqual([['1', 'b']]);

    // The rerun reads the checkpoint the batch stored and skips what it holds
    // (its stream starts at that checkpoint, so nothing is left to acknowledge);
    // a replay of the batch itself, by id, would change nothing either.
    const second = await applierOver(destination);
    await second.applier.apply(events);
    await second.applier.flush();
    expect(second.started).toEqual([]);
    expect(second.acknowledged).toEqual([]);
    expect(memory.appliedBatchIds).toEqual([1n]);
  });

  it('decodes the next batch while one is written, and acknowledges them in order', async () => {
    const destination = new GatedDestination();
    await destination.setupTables([table]);
    const { applier, acknowledged, started, finished } = await applierOver(destination, { maxRows: 2 });
    await applier.apply([
      change(10n, relation()),
      ...transaction(1000n, [
        ['1', 'a'],
        ['2', 'b'],
      ]),
    ]);
    // Batch 1 is full and being written; the next changes are read meanwhile.
    expect(destination.writesStarted).toEqual([1n]);
    await applier.apply(transaction(2000n, [['3', 'c']]));
    expect(started).toEqual([1n, 2n]);
    expect(acknowledged).toEqual([]);
    expect(finished).toEqual([]);

    destination.release();
    await applier.writing;
    expect(destination.rows('public.t')).toEqual([
      ['1', 'a'],
      ['2', 'b'],
    ]);
    expect(acknowledged).toEqual([1001n]);
    expect(finished).toEqual([1n]);

    const flushed = applier.flush();
    await vi.waitFor(() => expect(destination.writesStarted).toEqual([1n, 2n]));
    destination.release();
    await flushed;
    expect(destination.rows('public.t')).toHaveLength(3);
    expect(acknowledged).toEqual([1001n, 2001n]);
    expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 2n, lsn: 2001n });
  });

  it('a full batch waits for the one in flight: at most one is written at a time', async () => {
    const destination = new GatedDestination();
    await destination.setupTables([table]);
    const { applier, acknowledged } = await applierOver(destination, { maxRows: 1 });
    await applier.apply([change(10n, relation()), ...transaction(1000n, [['1', 'a']])]);
    let secondApplied = false;
    const second = applier.apply(transaction(2000n, [['2', 'b']])).then(() => {
      secondApplied = true;
    });
    // Batch 2 is full, but batch 1 is not durable yet: the reading waits.
    await new Promise((resolve) => setImmediate(resolve));
    expect(destination.writesStarted).toEqual([1n]);
    expect(secondApplied).toBe(false);

    destination.release();
    await second;
    expect(destination.writesStarted).toEqual([1n, 2n]);
    destination.release();
    await applier.flush();
    expect(acknowledged).toEqual([1001n, 2001n]);
  });

  it('acknowledges a commit or keepalive that arrives during a write only once the write is durable', async () => {
    const destination = new GatedDestination();
    await destination.setupTables([table]);
    const { applier, acknowledged } = await applierOver(destination, { maxRows: 1 });
    await applier.apply([
      change(10n, relation()),
      change(20n, { ...relation(), relationId: 99, name: 'other' }),
      ...transaction(1000n, [['1', 'a']]),
    ]);
    await applier.apply([
      // A transaction of a table the mirror does not replicate, then a keepalive.
      change(2500n, { tag: 'begin', finalLsn: 3000n, commitTimeMicros: 0n, xid: 2 }),
      change(2600n, { tag: 'insert', relationId: 99, newTuple: rowOfCells(['x']) }),
      change(3000n, { tag: 'commit', flags: 0, commitLsn: 3000n, endLsn: 3001n, commitTimeMicros: 0n }),
      { tag: 'keepalive', walEnd: 4000n },
    ]);
    // Batch 1 (commit 1001) is not durable: nothing after it may be acknowledged.
    expect(acknowledged).toEqual([]);

    // Batch 1 was cut at its row, before commit 1001 arrived; the commit and the
    // keepalive after it waited for the write and are acknowledged together.
    destination.release();
    await applier.writing;
    expect(acknowledged).toEqual([4000n]);
  });

  it('a write that fails is reported to whoever waits, and nothing is acknowledged', async () => {
    const memory = await memoryDestination();
    const destination = new FaultInjectingDestination(memory);
    const { applier, acknowledged, finished } = await applierOver(destination, { maxRows: 1 });
    destination.failNextSyncs(1);
    await applier.apply([change(10n, relation()), ...transaction(1000n, [['1', 'a']])]);
    await expect(applier.writing).rejects.toMatchObject({ kind: 'destination_write' });
    // The next batch is not written after the failed one.
    await expect(applier.apply(transaction(2000n, [['2', 'b']]))).rejects.toMatchObject({
      kind: 'destination_write',
    });
    expect(destination.syncedBatchIds).toEqual([]);
    expect(acknowledged).toEqual([]);
    expect(finished).toEqual([]);
  });

  it('adds columns only after the batch in flight is durable', async () => {
    const destination = new GatedDestination();
    await destination.setupTables([table]);
    const { applier } = await applierOver(destination, { maxRows: 1 });
    await applier.apply([change(10n, relation()), ...transaction(1000n, [['1', 'a']])]);
    // The change is made at the first row after it, once the batch in flight is durable.
    const altered = applier.apply([
      change(1100n, relation([{ name: 'w', typeOid: 20, typeModifier: -1, isKey: false }])),
      change(1150n, { tag: 'begin', finalLsn: 1200n, commitTimeMicros: 0n, xid: 3 }),
      change(1160n, { tag: 'insert', relationId: 1, newTuple: rowOfCells(['2', 'b', '7']) }),
    ]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(destination.columns('public.t')).toEqual(['id', 'v']);

    destination.release();
    await altered;
    expect(destination.columns('public.t')).toEqual(['id', 'v', 'w']);
    expect(destination.appliedBatchIds).toEqual([1n]);
  });

  it('syncs the rows of the old shape, then adds new columns with their looked-up types', async () => {
    const destination = await memoryDestination();
    const { applier, typeLookups } = await applierOver(destination);
    await applier.apply([change(10n, relation()), ...transaction(1000n, [['1', 'a']])]);
    await applier.apply([
      change(1100n, relation([{ name: 'w', typeOid: 20, typeModifier: -1, isKey: false }])),
      change(1150n, { tag: 'begin', finalLsn: 1200n, commitTimeMicros: 0n, xid: 3 }),
      change(1160n, { tag: 'insert', relationId: 1, newTuple: rowOfCells(['2', 'b', '7']) }),
      change(1200n, { tag: 'commit', flags: 0, commitLsn: 1200n, endLsn: 1201n, commitTimeMicros: 0n }),
    ]);
    // The first row under the new shape flushed the batch written under the old one.
    expect(destination.appliedBatchIds).toEqual([1n]);
    expect(typeLookups).toEqual([[20]]);
    await applier.flush();
    expect(destination.columns('public.t')).toEqual(['id', 'v', 'w']);
    expect(destination.rows('public.t')).toEqual([
      ['1', 'a', null],
      ['2', 'b', '7'],
    ]);
  });
});

/**
 * A MemoryDestination that records how each change's new row came to its
 * buffer: still the source's bytes, or decoded (reordered, filled, or sent so).
 */
class ArrivalRecordingDestination extends MemoryDestination {
  readonly arrivals: ('source bytes' | 'decoded' | 'no new row')[] = [];

  override changeBuffer(): ChangeList {
    const list = new ChangeList();
    const add = list.add.bind(list);
    list.add = (change: RowChange) => {
      const row = change.kind === 'insert' || change.kind === 'update' ? change.newRow : undefined;
      this.arrivals.push(row === undefined ? 'no new row' : row.fromSourceBytes ? 'source bytes' : 'decoded');
      return add(change);
    };
    return list;
  }
}

describe('ChangeApplier with changes of relations it does not map by name', () => {
  const leaf = (relationId: number, name: string): RelationMessage => ({
    tag: 'relation',
    relationId,
    schema: 'public',
    name,
    replicaIdentity: 'default',
    // A partition attached from a table of its own may hold its columns in another order.
    columns: [
      { name: 'v', typeOid: text, typeModifier: -1, isKey: false },
      { name: 'id', typeOid: int4, typeModifier: -1, isKey: true },
    ],
  });
  const inTransaction = (commitLsn: bigint, ...messages: SourceMessage[]): StreamEvent[] => [
    change(commitLsn - 100n, { tag: 'begin', finalLsn: commitLsn, commitTimeMicros: 0n, xid: 1 }),
    ...messages.map((message, index) => change(commitLsn - 50n + BigInt(index), message)),
    change(commitLsn, { tag: 'commit', flags: 0, commitLsn, endLsn: commitLsn + 1n, commitTimeMicros: 0n }),
  ];

  it('applies a partition’s changes sent under its own name as the mapped table it belongs to', async () => {
    const destination = await memoryDestination();
    const lookups: number[] = [];
    const { applier, logs } = await applierOver(destination, {
      partitionAncestors: new Proxy({} as Record<number, { schema: string; table: string }[]>, {
        get: (_target, key) => {
          lookups.push(Number(key));
          return Number(key) === 7 ? [table.source] : [];
        },
      }),
    });
    await applier.apply([
      change(10n, leaf(7, 't_p1')),
      ...inTransaction(
        1000n,
        { tag: 'insert', relationId: 7, newTuple: rowOfCells(['a', '1']) },
        { tag: 'insert', relationId: 7, newTuple: rowOfCells(['b', '2']) },
        { tag: 'update', relationId: 7, newTuple: rowOfCells(['c', '2']) },
        { tag: 'delete', relationId: 7, keyTuple: rowOfCells([null, '1']) },
      ),
    ]);
    await applier.flush();
    expect(destination.rows('public.t')).toEqual([['2', 'c']]);
    expect(lookups).toEqual([7]);
    expect(logs).toEqual([
      'INFO changes of partition public.t_p1 arrive under its own name (publication pub does not publish via the partition root): they are applied as public.t',
    ]);
  });

  it('looks nothing up for partitions announced beside their root when changes come under the root', async () => {
    const destination = await memoryDestination();
    const { applier, logs } = await applierOver(destination, {
      partitionAncestors: new Proxy(
        {},
        {
          get: () => {
            throw new Error('no lookup expected');
          },
        },
      ),
    });
    // pgoutput announces the root and then the partition a change was made in.
    await applier.apply([
      change(10n, relation()),
      change(11n, leaf(7, 't_p1')),
      ...inTransaction(1000n, { tag: 'insert', relationId: 1, newTuple: rowOfCells(['1', 'a']) }),
    ]);
    await applier.flush();
    expect(destination.rows('public.t')).toEqual([['1', 'a']]);
    expect(logs).toEqual([]);
  });

  it('skips the changes of a table it does not map, saying so once with the table’s name', async () => {
    for (const createdByMirror of [false, true]) {
      const destination = await memoryDestination();
      const { applier, logs } = await applierOver(destination, {
        publicationCreatedByMirror: createdByMirror,
      });
      await applier.apply([
        change(10n, relation()),
        change(11n, { ...relation(), relationId: 9, name: 'other' }),
        ...inTransaction(
          1000n,
          { tag: 'insert', relationId: 9, newTuple: rowOfCells(['1', 'x']) },
          { tag: 'insert', relationId: 1, newTuple: rowOfCells(['1', 'a']) },
          { tag: 'insert', relationId: 9, newTuple: rowOfCells(['2', 'y']) },
          { tag: 'truncate', relationIds: [9], cascade: false, restartIdentity: false },
        ),
      ]);
      await applier.flush();
      expect(destination.rows('public.t')).toEqual([['1', 'a']]);
      expect(logs).toEqual([
        createdByMirror
          ? "INFO changes of public.other are skipped: it is not among the mirror's tables (removed by an edit, and in publication pub when they were made)"
          : 'INFO changes of public.other are skipped: publication pub publishes it, but the mirror does not map it',
      ]);
    }
  });

  it('stops with the fix when a partition followed under its own name is truncated', async () => {
    const destination = await memoryDestination();
    const { applier } = await applierOver(destination, { partitionAncestors: { 7: [table.source] } });
    await expect(
      applier.apply([
        change(10n, leaf(7, 't_p1')),
        ...inTransaction(1000n, {
          tag: 'truncate',
          relationIds: [7],
          cascade: false,
          restartIdentity: false,
        }),
      ]),
    ).rejects.toMatchObject({
      kind: 'source_setup',
      message: expect.stringContaining(
        'ALTER PUBLICATION "pub" SET (publish_via_partition_root = true), then resync public.t',
      ),
    });
  });

  it('refuses a change to a relation that was never announced', async () => {
    const destination = await memoryDestination();
    const { applier } = await applierOver(destination);
    await expect(
      applier.apply(inTransaction(1000n, { tag: 'insert', relationId: 5, newTuple: rowOfCells(['1', 'a']) })),
    ).rejects.toMatchObject({ kind: 'decode' });
  });
});

describe('ChangeApplier with inserts that come undecoded', () => {
  const inserts = (rows: readonly (readonly string[])[]) => [
    change(900n, { tag: 'begin', finalLsn: 1000n, commitTimeMicros: 0n, xid: 1 }),
    ...rows.map((row, index) =>
      change(950n + BigInt(index), { tag: 'insert', relationId: 1, newTuple: wireTuple(row) }),
    ),
    change(1000n, { tag: 'commit', flags: 0, commitLsn: 1000n, endLsn: 1001n, commitTimeMicros: 0n }),
  ];

  it('hands them on over the source’s bytes, undecoded, when their cells are the table’s columns in order', async () => {
    const destination = new ArrivalRecordingDestination();
    await destination.setupTables([table]);
    const { applier } = await applierOver(destination);
    await applier.apply([
      change(10n, relation()),
      ...inserts([
        ['1', 'a'],
        ['2', 'b\tc'],
      ]),
    ]);
    await applier.flush();
    expect(destination.arrivals).toEqual(['source bytes', 'source bytes']);
    expect(destination.rows('public.t')).toEqual([
      ['1', 'a'],
      ['2', 'b\tc'],
    ]);
  });

  it('decodes and reorders them when the source has columns the destination does not, in another order', async () => {
    const destination = new ArrivalRecordingDestination();
    await destination.setupTables([table]);
    const { applier } = await applierOver(destination);
    const reordered: RelationMessage = {
      ...relation(),
      columns: [
        { name: 'extra', typeOid: text, typeModifier: -1, isKey: false },
        { name: 'v', typeOid: text, typeModifier: -1, isKey: false },
        { name: 'id', typeOid: int4, typeModifier: -1, isKey: true },
      ],
    };
    // `extra` is new to the destination, which adds it last: the tuple's order is not the table's.
    await applier.apply([change(10n, reordered)]);
    await applier.apply(inserts([['x', 'a', '1']]));
    await applier.flush();
    expect(destination.arrivals).toEqual(['decoded']);
    expect(destination.rows('public.t')).toEqual([['1', 'a', 'x']]);
  });
});

describe('ChangeApplier with updates that come undecoded', () => {
  it('hands an update’s new row on as it came, and decodes one it fills from the old image', async () => {
    const destination = new ArrivalRecordingDestination();
    await destination.setupTables([table]);
    const { applier } = await applierOver(destination);
    await applier.apply([
      change(10n, relation()),
      change(900n, { tag: 'begin', finalLsn: 1000n, commitTimeMicros: 0n, xid: 1 }),
      change(950n, { tag: 'insert', relationId: 1, newTuple: wireTuple(['1', 'a']) }),
      change(951n, { tag: 'update', relationId: 1, newTuple: wireTuple(['1', 'b']) }),
      // A value not sent, and no old image to fill it from: the destination keeps its value.
      change(952n, { tag: 'update', relationId: 1, newTuple: wireTuple(['1', unchangedToast]) }),
      // A key change carries the old key; its new row still goes on as it came.
      change(953n, {
        tag: 'update',
        relationId: 1,
        keyTuple: rowOfCells(['1', null]),
        newTuple: wireTuple(['2', 'c']),
      }),
      // A whole old image (REPLICA IDENTITY FULL) fills the value not sent: a row of decoded cells.
      change(954n, {
        tag: 'update',
        relationId: 1,
        oldTuple: rowOfCells(['2', 'c']),
        newTuple: wireTuple(['2', unchangedToast]),
      }),
      change(1000n, { tag: 'commit', flags: 0, commitLsn: 1000n, endLsn: 1001n, commitTimeMicros: 0n }),
    ]);
    await applier.flush();
    expect(destination.arrivals).toEqual([
      'source bytes',
      'source bytes',
      'source bytes',
      'source bytes',
      'decoded',
    ]);
    expect(destination.rows('public.t')).toEqual([['2', 'c']]);
  });
});

describe('MemoryDestination', () => {
  it('recognises a replayed batch by its id and changes nothing', async () => {
    const destination = await memoryDestination();
    const transactionOf = { xid: 1, commitLsn: 10n, commitTimeMicros: 0n };
    const batch = {
      mirror,
      batchId: 1n,
      endLsn: 11n,
      rowCount: 1,
      tables: [
        {
          table,
          held: ChangeList.of([
            { kind: 'insert' as const, transaction: transactionOf, newRow: rowOfCells(['1', 'a']) },
          ]),
        },
      ],
    };
    await destination.syncBatch(batch);
    await destination.truncateTables([table]);
    await destination.syncBatch(batch);
    expect(destination.rows('public.t')).toEqual([]);
    expect(destination.replayedBatchIds).toEqual([1n]);
    expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 1n, lsn: 11n });
  });
});

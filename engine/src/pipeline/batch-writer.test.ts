import { describe, expect, it } from 'vitest';
import { idTextTable } from '../../../test/support/id-text-table.ts';
import { GatedDestination, memoryDestinationOf } from '../../../test/support/memory-destinations.ts';
import type { TableApplied } from '../catalog/catalog.ts';
import type { Destination } from '../connectors/destination.ts';
import { FaultInjectingDestination } from '../connectors/memory/fault-injecting.ts';
import { rowOfCells } from '../connectors/rows.ts';
import { Acknowledgements } from './acknowledgements.ts';
import { BatchBuilder } from './batch-builder.ts';
import { BatchWriter } from './batch-writer.ts';

const mirror = 'm';
const table = idTextTable('t');

function writerOver(destination: Destination, options: { maxRows?: number; lastBatchId?: bigint } = {}) {
  const acknowledged: bigint[] = [];
  const started: { batchId: bigint; startLsn: bigint }[] = [];
  const finished: { batchId: bigint; endLsn: bigint; rowCount: bigint }[] = [];
  const applied: (readonly TableApplied[] | undefined)[] = [];
  const acknowledgements = new Acknowledgements((lsn) => acknowledged.push(lsn));
  const builder = new BatchBuilder({ maxRows: options.maxRows ?? 1000, maxBytes: 1 << 20 }, 0n, (table) =>
    destination.changeBuffer(table),
  );
  const writer = new BatchWriter({
    mirror,
    destination,
    batches: {
      async startBatch(_mirror, { batchId, startLsn }) {
        started.push({ batchId, startLsn });
      },
      async finishBatch(_mirror, { batchId, endLsn, rowCount, tables }) {
        finished.push({ batchId, endLsn, rowCount });
        applied.push(tables);
      },
    },
    builder,
    acknowledgements,
    lastBatchId: options.lastBatchId ?? 0n,
  });
  /** One committed insert, as the applier hands it over: the builder takes it, the writer is told. */
  const insert = (id: number, commitLsn: bigint) => {
    const transaction = { xid: id, commitLsn, commitTimeMicros: 0n };
    const lsn = commitLsn - 1n;
    const opened = builder.add(
      table,
      { kind: 'insert', transaction, newRow: rowOfCells([String(id), 'v']) },
      lsn,
      Date.now,
    );
    builder.commit(commitLsn + 1n);
    return writer.added(opened, lsn);
  };
  return { writer, builder, acknowledgements, acknowledged, started, finished, applied, insert };
}

const memoryDestination = () => memoryDestinationOf([table]);

describe('BatchWriter', () => {
  it('numbers batches after the checkpoint’s and records each as it opens and once durable', async () => {
    const destination = await memoryDestination();
    const { writer, started, finished, acknowledged, insert } = writerOver(destination, { lastBatchId: 7n });
    // Only the change that opens a batch makes the caller wait (its catalog record).
    const opening = insert(1, 100n);
    expect(opening).toBeInstanceOf(Promise);
    await opening;
    expect(insert(2, 200n)).toBeUndefined();
    expect(started).toEqual([{ batchId: 8n, startLsn: 99n }]);
    await writer.flush();
    expect(finished).toEqual([{ batchId: 8n, endLsn: 201n, rowCount: 2n }]);
    expect(acknowledged).toEqual([201n]);
    expect(writer.lastBatchId).toBe(8n);
    expect(destination.appliedBatchIds).toEqual([8n]);
    // Nothing buffered: a cut writes nothing.
    await writer.cut();
    expect(destination.appliedBatchIds).toEqual([8n]);
  });

  it("records each table's rows by operation and last commit with the batch that applied them", async () => {
    const other = idTextTable('u');
    const destination = await memoryDestinationOf([table, other]);
    const { writer, builder, applied } = writerOver(destination);
    const first = { xid: 1, commitLsn: 100n, commitTimeMicros: 1_700_000_000_000_001n };
    const second = { xid: 2, commitLsn: 200n, commitTimeMicros: 1_700_000_000_000_002n };
    const opened = builder.add(
      table,
      { kind: 'insert', transaction: first, newRow: rowOfCells(['1', 'a']) },
      90n,
      Date.now,
    );
    await writer.added(opened, 90n);
    builder.add(table, { kind: 'insert', transaction: first, newRow: rowOfCells(['2', 'b']) }, 91n, Date.now);
    builder.add(other, { kind: 'insert', transaction: first, newRow: rowOfCells(['1', 'a']) }, 92n, Date.now);
    builder.commit(101n);
    builder.add(
      table,
      { kind: 'update', transaction: second, oldKey: null, newRow: rowOfCells(['1', 'c']) },
      190n,
      Date.now,
    );
    builder.add(
      table,
      { kind: 'delete', transaction: second, oldKey: rowOfCells(['2', null]) },
      191n,
      Date.now,
    );
    builder.add(table, { kind: 'truncate', transaction: second }, 192n, Date.now);
    builder.commit(201n);
    await writer.flush();
    expect(applied).toEqual([
      [
        {
          sourceTable: 'public.t',
          inserts: 2n,
          updates: 1n,
          deletes: 1n,
          lastLsn: 200n,
          lastCommitTimeMicros: 1_700_000_000_000_002n,
        },
        {
          sourceTable: 'public.u',
          inserts: 1n,
          updates: 0n,
          deletes: 0n,
          lastLsn: 100n,
          lastCommitTimeMicros: 1_700_000_000_000_001n,
        },
      ],
    ]);
    // The next batch counts from nothing.
    const reopened = builder.add(
      table,
      { kind: 'insert', transaction: second, newRow: rowOfCells(['3', 'd']) },
      195n,
      Date.now,
    );
    await writer.added(reopened, 195n);
    await writer.flush();
    expect(applied[1]).toEqual([
      expect.objectContaining({ sourceTable: 'public.t', inserts: 1n, updates: 0n }),
    ]);
  });

  it('cuts a full batch, and writes the next only after the one in flight is durable', async () => {
    const destination = new GatedDestination();
    await destination.setupTables([table]);
    const { writer, acknowledged, finished, insert } = writerOver(destination, { maxRows: 1 });
    await insert(1, 100n);
    expect(destination.writesStarted).toEqual([1n]);
    let secondCut = false;
    const second = Promise.resolve(insert(2, 200n)).then(() => {
      secondCut = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(destination.writesStarted).toEqual([1n]);
    expect(secondCut).toBe(false);
    expect(acknowledged).toEqual([]);

    destination.release();
    await second;
    expect(finished.map((batch) => batch.batchId)).toEqual([1n]);
    expect(acknowledged).toEqual([101n]);
    expect(destination.writesStarted).toEqual([1n, 2n]);
    destination.release();
    await writer.flush();
    expect(acknowledged).toEqual([101n, 201n]);
    expect(writer.writing).toBeUndefined();
  });

  it('keeps a failed write in flight: every wait throws, nothing more is written or acknowledged', async () => {
    const destination = new FaultInjectingDestination(await memoryDestination());
    const { writer, acknowledgements, acknowledged, finished, insert } = writerOver(destination, {
      maxRows: 1,
    });
    destination.failNextSyncs(1);
    await insert(1, 100n);
    await expect(writer.writing).rejects.toMatchObject({ kind: 'destination_write' });
    acknowledgements.atRest(150n);
    await expect(insert(2, 200n)).rejects.toMatchObject({ kind: 'destination_write' });
    await expect(writer.flush()).rejects.toMatchObject({ kind: 'destination_write' });
    await writer.settle();
    expect(destination.syncedBatchIds).toEqual([]);
    expect(finished).toEqual([]);
    expect(acknowledged).toEqual([]);
  });

  it('before a schema change, writes the table’s buffered changes, and waits for the write', async () => {
    const destination = new GatedDestination();
    await destination.setupTables([table]);
    const { writer, insert } = writerOver(destination);
    await insert(1, 100n);
    let idle = false;
    const change = writer.beforeSchemaChange(table).then(() => {
      idle = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(destination.writesStarted).toEqual([1n]);
    expect(idle).toBe(false);
    destination.release();
    await change;
    expect(idle).toBe(true);
    // Nothing buffered for the table and nothing in flight: nothing to wait for.
    await writer.beforeSchemaChange(table);
    expect(destination.writesStarted).toEqual([1n]);
  });
});

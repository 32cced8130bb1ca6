import { describe, expect, it } from 'vitest';
import { seededIntegers } from '../../../../../test/support/seeded-random.ts';
import { textTable } from '../../../../../test/support/text-table.ts';
import { wireTuple } from '../../../../../test/support/wire-tuple.ts';
import { coalesceChanges } from '../../coalesce.ts';
import { copyChunkBytes } from '../../copy-chunks.ts';
import { parseCopyTextLine } from '../../copy-text.ts';
import {
  type DestinationTable,
  type RowChange,
  type RowImage,
  type TupleCell,
  unchangedToast,
} from '../../records.ts';
import { rowOfCells } from '../../rows.ts';
import { StagedChanges } from './staged-changes.ts';

const transaction = { xid: 1, commitLsn: 100n, commitTimeMicros: 0n };
const table = textTable(['id', 'big', 'note']);
type RowOrKeyChange = Exclude<RowChange, { kind: 'truncate' }>;

interface StageRow {
  readonly op: string;
  readonly unchanged: string | null;
  readonly row: (string | null)[];
}

/** The stage rows COPY would read from the lines. */
function stageRows(staged: StagedChanges): StageRow[] {
  const text = Buffer.concat(staged.fold().chunks).toString('utf8');
  return text
    .split('\n')
    .slice(0, -1)
    .map((line) => {
      const [op, unchanged, ...row] = parseCopyTextLine(line);
      return { op: op ?? '', unchanged: unchanged ?? null, row };
    });
}

function staged(changes: readonly RowOrKeyChange[], onTable = table): StagedChanges {
  const held = new StagedChanges(onTable);
  for (const change of changes) held.add(change);
  return held;
}

/** What coalesceChanges makes of the same changes, as the stage rows a destination would write. */
function expectedRows(changes: readonly RowOrKeyChange[], onTable = table): StageRow[] {
  const { upserts, deletes } = coalesceChanges(changes, [0]);
  const cells = (row: RowImage) => row.map((cell) => (typeof cell === 'string' ? cell : null));
  const unchangedNames = (row: RowImage) => {
    const names = onTable.columns
      .filter((_, index) => row[index] === unchangedToast)
      .map((c) => `"${c.name}"`);
    return names.length > 0 ? `{${names.join(',')}}` : null;
  };
  return [
    ...deletes.map((row) => ({ op: 'D', unchanged: null, row: cells(row.cells()) })),
    ...upserts.map((row) => ({ op: 'U', unchanged: unchangedNames(row.cells()), row: cells(row.cells()) })),
  ];
}

const byKeyAndOp = (rows: StageRow[]) =>
  [...rows].sort((a, b) => `${a.row[0]}${a.op}`.localeCompare(`${b.row[0]}${b.op}`));

describe('StagedChanges', () => {
  it('keeps the last change of each key, and counts what the stage upserts and deletes', () => {
    const held = staged([
      { transaction, kind: 'insert', newRow: rowOfCells(['1', 'a', 'x']) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['1', 'b', 'y']) },
      { transaction, kind: 'insert', newRow: rowOfCells(['2', 'c', null]) },
      { transaction, kind: 'delete', oldKey: rowOfCells(['2', null, null]) },
      { transaction, kind: 'delete', oldKey: rowOfCells(['3', null, null]) },
    ]);
    expect(stageRows(held)).toEqual([
      { op: 'U', unchanged: null, row: ['1', 'b', 'y'] },
      { op: 'D', unchanged: null, row: ['2', null, null] },
      { op: 'D', unchanged: null, row: ['3', null, null] },
    ]);
    const { upsertCount, deleteCount } = held.fold();
    expect([upsertCount, deleteCount]).toEqual([1, 2]);
  });

  it('deletes the old key of a key change, and fills the new row from the old key’s image', () => {
    const held = staged([
      { transaction, kind: 'insert', newRow: rowOfCells(['1', 'big value', 'a']) },
      {
        transaction,
        kind: 'update',
        oldKey: rowOfCells(['1', null, null]),
        newRow: rowOfCells(['5', unchangedToast, 'moved']),
      },
    ]);
    expect(stageRows(held)).toEqual([
      { op: 'U', unchanged: null, row: ['5', 'big value', 'moved'] },
      { op: 'D', unchanged: null, row: ['1', null, null] },
    ]);
    expect(held.fold().mayKeepUnchanged).toBe(false);
    expect(held.fold().moves).toEqual([]);
  });

  it('names the moves whose unchanged cells are in the destination’s row under the first old key', () => {
    // 1 → 2 → 3, none of them in the batch before: 3 keeps row 1's value.
    const chain = staged([
      {
        transaction,
        kind: 'update',
        oldKey: rowOfCells(['1', null, null]),
        newRow: rowOfCells(['2', unchangedToast, 'a']),
      },
      {
        transaction,
        kind: 'update',
        oldKey: rowOfCells(['2', null, null]),
        newRow: rowOfCells(['3', unchangedToast, 'b']),
      },
    ]);
    expect(byKeyAndOp(stageRows(chain))).toEqual([
      { op: 'D', unchanged: null, row: ['1', null, null] },
      { op: 'D', unchanged: null, row: ['2', null, null] },
      { op: 'U', unchanged: '{"big"}', row: ['3', null, 'b'] },
    ]);
    expect(chain.fold().moves).toEqual([{ newKey: ['3'], oldKey: ['1'] }]);
    // Back to where it started: the destination's own row under the key holds the value.
    const back = staged([
      {
        transaction,
        kind: 'update',
        oldKey: rowOfCells(['1', null, null]),
        newRow: rowOfCells(['2', unchangedToast, 'a']),
      },
      {
        transaction,
        kind: 'update',
        oldKey: rowOfCells(['2', null, null]),
        newRow: rowOfCells(['1', unchangedToast, 'b']),
      },
    ]);
    expect(back.fold().moves).toEqual([]);
    expect(back.fold().mayKeepUnchanged).toBe(true);
    // A change that sends the value leaves nothing to move.
    const sent = staged([
      {
        transaction,
        kind: 'update',
        oldKey: rowOfCells(['1', null, null]),
        newRow: rowOfCells(['2', unchangedToast, 'a']),
      },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['2', 'sent', 'c']) },
    ]);
    expect(sent.fold().moves).toEqual([]);
  });

  it('names the unchanged TOAST columns no earlier image of the batch fills, for the destination to keep', () => {
    const held = staged([
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['1', unchangedToast, 'a']) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['1', unchangedToast, 'b']) },
    ]);
    expect(stageRows(held)).toEqual([{ op: 'U', unchanged: '{"big"}', row: ['1', null, 'b'] }]);
    expect(held.fold().mayKeepUnchanged).toBe(true);
    // Superseded by a change that sends the value: nothing is left to keep.
    const sent = staged([
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['1', unchangedToast, 'a']) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['1', 'sent', 'c']) },
    ]);
    expect(sent.fold().mayKeepUnchanged).toBe(false);
  });

  it('fills from an earlier image in a sealed chunk, with values that need escapes', () => {
    const held = new StagedChanges(table);
    held.add({
      transaction,
      kind: 'insert',
      newRow: rowOfCells(['1', 'tab\tnew\nline back\\slash é', null]),
    });
    // Enough other rows to seal the first line into a chunk of its own.
    const filler = 'x'.repeat(200);
    const fillers = Math.ceil(copyChunkBytes / 200) + 10;
    for (let id = 2; id < 2 + fillers; id++) {
      held.add({ transaction, kind: 'insert', newRow: rowOfCells([String(id), filler, null]) });
    }
    held.add({
      transaction,
      kind: 'update',
      oldKey: null,
      newRow: rowOfCells(['1', unchangedToast, 'later']),
    });
    const rows = stageRows(held);
    expect(rows).toHaveLength(1 + fillers);
    expect(rows.find((row) => row.row[0] === '1')).toEqual({
      op: 'U',
      unchanged: null,
      row: ['1', 'tab\tnew\nline back\\slash é', 'later'],
    });
  });

  it('holds one line per key in chunks that end on line ends, superseded lines left out', () => {
    const held = new StagedChanges(table);
    const ids = 3_000;
    for (let round = 0; round < 2; round++) {
      for (let id = 0; id < ids; id++) {
        held.add({
          transaction,
          kind: 'update',
          oldKey: null,
          newRow: rowOfCells([String(id), `round ${round} ü`, null]),
        });
      }
    }
    const chunks = held.fold().chunks;
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks) expect(chunk.at(-1)).toBe(0x0a);
    const rows = stageRows(held);
    expect(rows).toHaveLength(ids);
    expect(rows.every((row) => row.row[1] === 'round 1 ü')).toBe(true);
  });

  it('takes nothing more once folded', () => {
    const held = staged([{ transaction, kind: 'insert', newRow: rowOfCells(['1', 'a', null]) }]);
    const folded = held.fold();
    expect(() => held.add({ transaction, kind: 'delete', oldKey: rowOfCells(['1', null, null]) })).toThrow(
      /already folded/,
    );
    expect(held.fold()).toBe(folded);
  });

  it('leaves lines whose keys ascend as written, counted', () => {
    // 9 → 10 crosses a digit: ascending by length first, then by characters.
    const changes: RowOrKeyChange[] = [
      { transaction, kind: 'insert', newRow: rowOfCells(['8', 'a', null]) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['9', 'b', 'x']) },
      { transaction, kind: 'delete', oldKey: rowOfCells(['10', null, null]) },
      // A key change writes the new key's line, then the old key's.
      {
        transaction,
        kind: 'update',
        oldKey: rowOfCells(['13', null, null]),
        newRow: rowOfCells(['12', 'c', null]),
      },
    ];
    const held = staged(changes);
    expect(stageRows(held)).toEqual([
      { op: 'U', unchanged: null, row: ['8', 'a', null] },
      { op: 'U', unchanged: null, row: ['9', 'b', 'x'] },
      { op: 'D', unchanged: null, row: ['10', null, null] },
      { op: 'U', unchanged: null, row: ['12', 'c', null] },
      { op: 'D', unchanged: null, row: ['13', null, null] },
    ]);
    expect(stageRows(held)).toEqual(
      expectedRows(changes).sort((a, b) => Number(a.row[0]) - Number(b.row[0])),
    );
    const { upsertCount, deleteCount } = held.fold();
    expect([upsertCount, deleteCount]).toEqual([3, 2]);
  });

  it('folds once a key comes out of order, even after ascending keys', () => {
    const held = staged([
      { transaction, kind: 'insert', newRow: rowOfCells(['9', 'a', null]) },
      { transaction, kind: 'insert', newRow: rowOfCells(['10', 'b', null]) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['9', 'changed', null]) },
    ]);
    expect(stageRows(held)).toEqual([
      { op: 'U', unchanged: null, row: ['10', 'b', null] },
      { op: 'U', unchanged: null, row: ['9', 'changed', null] },
    ]);
    const { upsertCount, deleteCount } = held.fold();
    expect([upsertCount, deleteCount]).toEqual([2, 0]);
  });

  it('folds to what coalesceChanges folds to, over changes of mostly ascending keys', () => {
    const next = seededIntegers(11);
    for (let run = 0; run < 200; run++) {
      const changes: RowOrKeyChange[] = [];
      // Half the runs only ascend (the lines stand as written); in the others,
      // now and then the same key comes again, an earlier one, or a key change.
      const ascendingOnly = run % 2 === 0;
      let key = next(3);
      for (let step = 0; step < 20; step++) {
        const pick = ascendingOnly ? 2 : next(10);
        key = pick === 0 ? key : pick === 1 ? Math.max(0, key - 1 - next(3)) : key + 1 + next(12);
        const newRow = [String(key), `v${run}.${step}`, null];
        if (next(4) === 0)
          changes.push({ transaction, kind: 'delete', oldKey: rowOfCells([String(key), null, null]) });
        else if (!ascendingOnly && next(6) === 0)
          changes.push({
            transaction,
            kind: 'update',
            oldKey: rowOfCells([String(key + 1000), null, null]),
            newRow: rowOfCells(newRow),
          });
        else changes.push({ transaction, kind: 'update', oldKey: null, newRow: rowOfCells(newRow) });
      }
      expect(byKeyAndOp(stageRows(staged(changes)))).toEqual(byKeyAndOp(expectedRows(changes)));
    }
  });

  it('folds to what coalesceChanges folds to, over random changes of a few keys', () => {
    const next = seededIntegers(7);
    const present = new Map<string, RowImage>();
    for (let run = 0; run < 200; run++) {
      present.clear();
      const changes: RowOrKeyChange[] = [];
      for (let step = 0; step < 30; step++) {
        const key = String(next(6));
        const value = (): TupleCell => (next(4) === 0 ? unchangedToast : `v${run}.${step}`);
        const moved = String(Number(key) + 10);
        const pick = next(8);
        if (!present.has(key)) {
          const inserted = [key, `big ${step}`, next(3) === 0 ? null : `n${step}`];
          changes.push({ transaction, kind: 'insert', newRow: rowOfCells(inserted) });
          present.set(key, inserted);
        } else if (pick < 2) {
          changes.push({ transaction, kind: 'delete', oldKey: rowOfCells([key, null, null]) });
          present.delete(key);
        } else if (pick < 4 && !present.has(moved)) {
          const newRow: RowImage = [moved, value(), `moved ${step}`];
          changes.push({
            transaction,
            kind: 'update',
            oldKey: rowOfCells([key, null, null]),
            newRow: rowOfCells(newRow),
          });
          present.delete(key);
          present.set(moved, newRow);
        } else {
          const newRow: RowImage = [key, value(), `u${step}`];
          changes.push({ transaction, kind: 'update', oldKey: null, newRow: rowOfCells(newRow) });
          present.set(key, newRow);
        }
      }
      expect(byKeyAndOp(stageRows(staged(changes)))).toEqual(byKeyAndOp(expectedRows(changes)));
    }
  });
});

/**
 * The same changes held twice: with rows of decoded cells, and with every row
 * over TupleData bytes, as the source's come: one encoder, the same lines.
 */
function stagedBothWays(changes: readonly RowOrKeyChange[], onTable: DestinationTable = table) {
  const decoded = staged(changes, onTable);
  const fromBytes = new StagedChanges(onTable);
  let tuples = 0;
  for (const change of changes) {
    fromBytes.add(overSourceBytes(change));
    if (change.kind !== 'delete') tuples++;
  }
  return { decoded: decoded.fold(), fromBytes: fromBytes.fold(), tuples };
}

/** The change with its rows over TupleData bytes, as the source's come. */
function overSourceBytes(change: RowOrKeyChange): RowOrKeyChange {
  switch (change.kind) {
    case 'insert':
      return { ...change, newRow: wireTuple(change.newRow.cells()) };
    case 'update':
      return {
        ...change,
        oldKey: change.oldKey && wireTuple(change.oldKey.cells()),
        newRow: wireTuple(change.newRow.cells()),
      };
    case 'delete':
      return { ...change, oldKey: wireTuple(change.oldKey.cells()) };
  }
}

describe('StagedChanges of updates given undecoded (addUpsertTuple)', () => {
  it('folds to the same stage text as the decoded updates, over random changes of a few keys', () => {
    const next = seededIntegers(23);
    let tuples = 0;
    for (let run = 0; run < 200; run++) {
      const changes: RowOrKeyChange[] = [];
      for (let step = 0; step < 30; step++) {
        const key = String(next(6));
        const value = (): TupleCell => (next(5) === 0 ? unchangedToast : `v\t${run}.${step} ✓`);
        const pick = next(6);
        if (pick === 0) changes.push({ transaction, kind: 'delete', oldKey: rowOfCells([key, null, null]) });
        else if (pick === 1)
          changes.push({ transaction, kind: 'insert', newRow: rowOfCells([key, 'big', null]) });
        else if (pick === 2)
          changes.push({
            transaction,
            kind: 'update',
            oldKey: rowOfCells([String(next(6)), null, null]),
            newRow: rowOfCells([key, value(), 'moved']),
          });
        else
          changes.push({
            transaction,
            kind: 'update',
            oldKey: null,
            newRow: rowOfCells([key, value(), next(3) === 0 ? null : 'n']),
          });
      }
      const { decoded, fromBytes, tuples: given } = stagedBothWays(changes);
      tuples += given;
      expect(Buffer.concat(fromBytes.chunks).toString()).toBe(Buffer.concat(decoded.chunks).toString());
      expect({ ...fromBytes, chunks: [] }).toEqual({ ...decoded, chunks: [] });
    }
    expect(tuples).toBeGreaterThan(1000);
  });

  it('keys rows of a composite key, nulls and text past ASCII as the decoded cells do', () => {
    const composite = { ...textTable(['region', 'id', 'note']), keyColumns: ['region', 'id'] };
    const changes: RowOrKeyChange[] = [
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['é', '1', 'first']) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells([null, '1', 'null region']) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['', '1', 'empty region']) },
      { transaction, kind: 'delete', oldKey: rowOfCells(['é', '1', null]) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['é', '1', 'again']) },
      { transaction, kind: 'update', oldKey: null, newRow: rowOfCells([null, '1', 'null region again']) },
    ];
    const { decoded, fromBytes, tuples } = stagedBothWays(changes, composite);
    expect(tuples).toBe(5);
    expect(Buffer.concat(fromBytes.chunks).toString()).toBe(Buffer.concat(decoded.chunks).toString());
    expect(fromBytes.upsertCount).toBe(3);
  });

  it('fails on a binary cell as the decoded cells do, holding nothing of it', () => {
    const row = ['1', Buffer.from('binary'), 'n'];
    const decoded = new StagedChanges(table);
    expect(() => decoded.add({ transaction, kind: 'update', oldKey: null, newRow: rowOfCells(row) })).toThrow(
      'binary tuple value',
    );
    const fromBytes = new StagedChanges(table);
    expect(() =>
      fromBytes.add({ transaction, kind: 'update', oldKey: null, newRow: wireTuple(row) }),
    ).toThrow('binary tuple value');
    // Nothing of it was recorded.
    expect(fromBytes.fold()).toMatchObject({ chunks: [], upsertCount: 0, deleteCount: 0 });
  });
});

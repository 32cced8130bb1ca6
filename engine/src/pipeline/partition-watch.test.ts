import { describe, expect, it } from 'vitest';
import type { Catalog, RecordedLeaf } from '../catalog/catalog.ts';
import type { PartitionLeaf, PartitionLeaves, Source } from '../connectors/source.ts';
import { comparedLeaves, PartitionWatch, recordedLeaf } from './partition-watch.ts';
import { lookEveryMs } from './source-tables-watch.ts';

function leaf(oid: number, fileNode = oid * 10, classXmin = 100, attachXmin = 100): PartitionLeaf {
  return { oid, name: { schema: 'public', table: `p${oid}` }, fileNode, classXmin, attachXmin };
}

describe('comparedLeaves', () => {
  const recorded = [leaf(1), leaf(2), leaf(3)].map(recordedLeaf);

  it('finds nothing when the leaves are as recorded', () => {
    expect(comparedLeaves(recorded, [leaf(1), leaf(2), leaf(3)], new Set())).toEqual({
      changes: [],
      added: [],
    });
  });

  it('tells a leaf gone, one with new storage, and the new ones', () => {
    const { changes, added } = comparedLeaves(recorded, [leaf(1), leaf(3, 31, 200), leaf(4)], new Set());
    expect(changes).toEqual([
      { kind: 'detached', leaf: 'public.p2' },
      { kind: 'truncated', leaf: 'public.p3' },
    ]);
    expect(added).toEqual([leaf(4)]);
  });

  it('takes new storage written by a TRUNCATE of the whole table the stream carried for that one', () => {
    const current = [leaf(1, 11, 500), leaf(2, 21, 500), leaf(3, 31, 501)];
    expect(comparedLeaves(recorded, current, new Set([500])).changes).toEqual([
      { kind: 'truncated', leaf: 'public.p3' },
    ]);
  });
});

/** A source whose leaves the test sets, and which says which leaves held rows when attached. */
class FakeSource {
  leaves = new Map<string, PartitionLeaf[]>();
  walLsn = 100n;
  attachedWithRows = new Set<number>();
  looks = 0;

  async partitionLeaves(tables: readonly { schema: string; table: string }[]): Promise<PartitionLeaves> {
    this.looks++;
    const byTable = new Map<string, PartitionLeaf[]>();
    for (const table of tables) {
      const found = this.leaves.get(`${table.schema}.${table.table}`);
      if (found) byTable.set(`${table.schema}.${table.table}`, found);
    }
    return { byTable, walLsn: this.walLsn };
  }

  async rowsBeforeAttach(candidate: PartitionLeaf): Promise<boolean> {
    return this.attachedWithRows.has(candidate.oid);
  }
}

class FakeCatalog {
  readonly records = new Map<string, readonly RecordedLeaf[]>();

  async listPartitionLeaves(): Promise<Map<string, readonly RecordedLeaf[]>> {
    return new Map(this.records);
  }

  async recordPartitionLeaves(_mirror: string, sourceTable: string, leaves: readonly RecordedLeaf[]) {
    this.records.set(sourceTable, leaves);
  }
}

function watchOver(source: FakeSource, catalog: FakeCatalog): PartitionWatch {
  return new PartitionWatch({
    source: source as unknown as Source,
    catalog: catalog as unknown as Catalog,
    mirror: 'm',
    tables: [
      { schema: 'public', table: 'events' },
      { schema: 'public', table: 'plain' },
    ],
  });
}

describe('PartitionWatch', () => {
  it('records a partitioned table first seen, and no table that is not partitioned', async () => {
    const source = new FakeSource();
    source.leaves.set('public.events', [leaf(1), leaf(2)]);
    const catalog = new FakeCatalog();
    await watchOver(source, catalog).start();
    expect([...catalog.records.keys()]).toEqual(['public.events']);
    expect(catalog.records.get('public.events')).toEqual([leaf(1), leaf(2)].map(recordedLeaf));
  });

  it('judges a look only once the destination holds what was written before it', async () => {
    const source = new FakeSource();
    source.leaves.set('public.events', [leaf(1), leaf(2)]);
    const catalog = new FakeCatalog();
    const watch = watchOver(source, catalog);
    await watch.start();
    source.leaves.set('public.events', [leaf(1)]);
    source.walLsn = 500n;
    expect(await watch.check(0, 400n)).toBeUndefined();
    // Still behind the look: nothing judged, and no second look meanwhile.
    expect(await watch.check(lookEveryMs * 2, 499n)).toBeUndefined();
    expect(source.looks).toBe(2);
    expect(await watch.check(lookEveryMs * 2, 500n)).toEqual([
      {
        sourceTable: 'public.events',
        changes: [{ kind: 'detached', leaf: 'public.p2' }],
        leaves: [recordedLeaf(leaf(1))],
      },
    ]);
  });

  it('records a partition created empty, or truncated with the whole table, without a finding', async () => {
    const source = new FakeSource();
    source.leaves.set('public.events', [leaf(1), leaf(2)]);
    const catalog = new FakeCatalog();
    const watch = watchOver(source, catalog);
    await watch.start();
    watch.truncated('public.events', 700);
    source.leaves.set('public.events', [leaf(1, 11, 700), leaf(2, 21, 700), leaf(3)]);
    await watch.check(0, 0n);
    expect(await watch.check(lookEveryMs, 100n)).toBeUndefined();
    expect(catalog.records.get('public.events')).toEqual(
      [leaf(1, 11, 700), leaf(2, 21, 700), leaf(3)].map(recordedLeaf),
    );
    // Judged against the new record: nothing more to find.
    await watch.check(lookEveryMs * 2, 100n);
    expect(await watch.check(lookEveryMs * 2, 100n)).toBeUndefined();
  });

  it('finds a partition attached with rows it held, and not found again once accepted', async () => {
    const source = new FakeSource();
    source.leaves.set('public.events', [leaf(1)]);
    const catalog = new FakeCatalog();
    const watch = watchOver(source, catalog);
    await watch.start();
    source.leaves.set('public.events', [leaf(1), leaf(5, 50, 300, 300)]);
    source.attachedWithRows.add(5);
    await watch.check(0, 0n);
    const findings = await watch.check(1, 100n);
    expect(findings?.map((finding) => finding.changes)).toEqual([[{ kind: 'attached', leaf: 'public.p5' }]]);
    const [finding] = findings ?? [];
    if (finding) await watch.accept(finding.sourceTable, finding.leaves);
    await watch.check(lookEveryMs * 2, 100n);
    expect(await watch.check(lookEveryMs * 2, 100n)).toBeUndefined();
  });
});

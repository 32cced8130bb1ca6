import { describe, expect, it } from 'vitest';
import type { TableShape } from '../catalog/catalog.ts';
import type { MissingTables, Source, SourceTableInfo } from '../connectors/source.ts';
import { formatTableName, type TableName } from '../resources/mirror.ts';
import { RenamingSource, resolveSourceNames, SourceNames } from './source-names.ts';

const name = (table: string, schema = 'public'): TableName => ({ schema, table });
const shape = (sourceOid?: number): TableShape => ({ source: [], columns: [], keyColumns: [], sourceOid });

/**
 * The calls a Source gets about tables, over a catalog of tables by OID (what
 * the translation is tested against; the real one is test/e2e/schema-changes.test.ts).
 */
function sourceOver(tables: Map<number, TableName>) {
  const asked: string[] = [];
  const byName = () => new Map([...tables].map(([oid, table]) => [formatTableName(table), oid]));
  const source = {
    async tableNames(oids: readonly number[]) {
      asked.push(`tableNames ${oids.join(',')}`);
      return new Map(oids.flatMap((oid) => (tables.has(oid) ? [[oid, tables.get(oid) as TableName]] : [])));
    },
    async missingTables(names: readonly TableName[]): Promise<MissingTables> {
      asked.push(`missingTables ${names.map(formatTableName).join(',')}`);
      return { missing: names.filter((table) => !byName().has(formatTableName(table))), walLsn: 7n };
    },
    async validate(input: { tables: readonly TableName[] }) {
      asked.push(`validate ${input.tables.map(formatTableName).join(',')}`);
      const found = input.tables.filter((table) => byName().has(formatTableName(table)));
      return {
        serverVersion: '18',
        tables: found.map(
          (table): SourceTableInfo => ({
            name: table,
            oid: byName().get(formatTableName(table)) ?? 0,
            columns: [],
            keyColumns: [],
            replicaIdentity: 'default',
            partitioned: false,
            partitionOf: [],
          }),
        ),
        missing: input.tables.filter((table) => !found.includes(table)),
      };
    },
    async planPartitions(table: TableName) {
      asked.push(`planPartitions ${formatTableName(table)}`);
      return [];
    },
    async ensurePublication(_publication: string, published: readonly { name: TableName }[]) {
      asked.push(`ensurePublication ${published.map((table) => formatTableName(table.name)).join(',')}`);
      return { rowFilters: false };
    },
    async partitionAncestors() {
      return [name('renamed_parent')];
    },
  };
  return { source: source as unknown as Source, asked };
}

describe('resolveSourceNames', () => {
  it('finds each mapped table by the identity its shape records, in one lookup', async () => {
    const { source, asked } = sourceOver(new Map([[11, name('orders_v2')]]));
    const names = await resolveSourceNames(
      source,
      [name('orders'), name('gone'), name('unrecorded')],
      new Map([
        ['public.orders', shape(11)],
        ['public.gone', shape(12)],
        ['public.unrecorded', shape()],
      ]),
    );
    expect(asked).toEqual(['tableNames 11,12']);
    expect(names.current(name('orders'))).toEqual(name('orders_v2'));
    expect(names.mapped(name('orders_v2'))).toEqual(name('orders'));
    expect(names.oidOf(name('orders'))).toBe(11);
    // Gone, or never identified: looked for by the mapped name.
    expect(names.current(name('gone'))).toEqual(name('gone'));
    expect(names.oidOf(name('gone'))).toBeUndefined();
    expect(names.current(name('unrecorded'))).toEqual(name('unrecorded'));
    expect(names.takeNews()).toEqual([
      { mapped: name('orders'), from: name('orders'), to: name('orders_v2') },
    ]);
    expect(names.takeNews()).toEqual([]);
  });

  it('leaves a table renamed to a name a mapping of its own names to that mapping', async () => {
    const { source } = sourceOver(new Map([[11, name('orders_v2')]]));
    const names = await resolveSourceNames(
      source,
      [name('orders'), name('orders_v2')],
      new Map([['public.orders', shape(11)]]),
    );
    expect(names.current(name('orders'))).toEqual(name('orders'));
    expect(names.oidOf(name('orders'))).toBeUndefined();
    expect(names.mapped(name('orders_v2'))).toEqual(name('orders_v2'));
  });

  it('asks nothing when no identity is recorded', async () => {
    const { source, asked } = sourceOver(new Map());
    await resolveSourceNames(source, [name('orders')], new Map());
    expect(asked).toEqual([]);
  });
});

describe('RenamingSource', () => {
  it('asks the source under the names of now and answers under the mapped ones', async () => {
    const { source, asked } = sourceOver(new Map([[11, name('orders_v2')]]));
    const names = new SourceNames([name('orders'), name('items')]);
    names.learn(name('orders'), name('orders_v2'));
    const renaming = new RenamingSource(source, names);
    const validated = await renaming.validate({ tables: [name('orders')] });
    expect(validated.tables.map((info) => info.name)).toEqual([name('orders')]);
    expect(names.oidOf(name('orders'))).toBe(11);
    await renaming.planPartitions(name('orders'), null, 10);
    await renaming.ensurePublication('pub', [{ name: name('orders') }, { name: name('items') }]);
    expect(asked).toEqual([
      'validate public.orders_v2',
      'planPartitions public.orders_v2',
      'ensurePublication public.orders_v2,public.items',
    ]);
  });

  it('looks for identified tables by identity: renamed is not missing, gone is even under a taken name', async () => {
    const tables = new Map([
      [11, name('orders')],
      [12, name('items')],
      [14, name('events')],
    ]);
    const { source, asked } = sourceOver(tables);
    const names = new SourceNames([name('orders'), name('items'), name('events'), name('logs')]);
    names.identify(name('orders'), 11);
    names.identify(name('items'), 12);
    names.identify(name('events'), 13);
    const renaming = new RenamingSource(source, names);
    expect(
      await renaming.missingTables([name('orders'), name('items'), name('events'), name('logs')]),
    ).toEqual({
      walLsn: 7n,
      // events: table 13 is gone; 14 is another table of its name.
      missing: [name('events'), name('logs')],
    });
    tables.set(11, name('orders_v2', 'archive'));
    expect((await renaming.missingTables([name('orders'), name('items')])).missing).toEqual([]);
    expect(names.current(name('orders'))).toEqual(name('orders_v2', 'archive'));
    expect(names.takeNews()).toEqual([
      { mapped: name('orders'), from: name('orders'), to: name('orders_v2', 'archive') },
    ]);
    // The WAL position is read after the look by identity.
    expect(asked).toEqual([
      'tableNames 11,12,13',
      'missingTables public.logs',
      'tableNames 11,12',
      'missingTables ',
    ]);
    // Forgotten (stopped for it): looked for by its mapped name again.
    names.forget(name('events'));
    expect((await renaming.missingTables([name('events')])).missing).toEqual([]);
  });

  it('answers partition parents under their mapped names', async () => {
    const { source } = sourceOver(new Map());
    const names = new SourceNames([name('parent')]);
    names.learn(name('parent'), name('renamed_parent'));
    expect(await new RenamingSource(source, names).partitionAncestors(5)).toEqual([name('parent')]);
  });
});

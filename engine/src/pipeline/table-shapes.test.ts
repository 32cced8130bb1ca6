import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { idTextTable } from '../../../test/support/id-text-table.ts';
import type { Catalog, LogLevel, TableShape } from '../catalog/catalog.ts';
import { MemoryDestination } from '../connectors/memory/destination.ts';
import type { DestinationTable, SourceColumn } from '../connectors/records.ts';
import { mirrorSpecSchema } from '../resources/mirror.ts';
import type { MirrorContext } from './context.ts';
import { followedTables } from './table-shapes.ts';

const base = idTextTable('t');
const [id, v] = base.columns.map((column, index) => ({ ...column, attnum: index + 1 })) as [
  SourceColumn,
  SourceColumn,
];
const w: SourceColumn = { ...v, name: 'w' };
const x: SourceColumn = {
  name: 'x',
  typeOid: 23,
  typeModifier: -1,
  typeName: 'integer',
  notNull: false,
  attnum: 3,
};
const shapeOf = (columns: readonly SourceColumn[]): TableShape => ({
  source: columns.map(({ name, typeOid, typeModifier, attnum }) => ({ name, typeOid, typeModifier, attnum })),
  columns,
  keyColumns: ['id'],
  sourceOid: 4242,
});
/** The table as the source has it now: v renamed to w, x added. */
const now: DestinationTable = { ...base, columns: [id, w, x] };
/** Recorded when the engine stopped: the alteration to `now` was under way. */
const underWay: TableShape = {
  ...shapeOf([id, v]),
  altering: {
    changes: [
      { kind: 'rename', from: 'v', to: 'w' },
      { kind: 'add', column: x },
    ],
    to: shapeOf(now.columns),
  },
};

/** A start's context over a destination holding `columns`, with `underWay` recorded. */
async function startOver(columns: readonly SourceColumn[]) {
  const destination = new MemoryDestination();
  await destination.setupTables([{ ...base, columns }]);
  const shapes = new Map([['public.t', underWay]]);
  const logs: string[] = [];
  const catalog = {
    listTableShapes: async () => new Map(shapes),
    recordTableShape: async (_mirror: string, sourceTable: string, shape: TableShape) => {
      shapes.set(sourceTable, shape);
    },
    appendLog: async (_mirror: string, level: LogLevel, message: string) => {
      logs.push(`${level} ${message}`);
    },
  } as Partial<Catalog> as Catalog;
  const context = {
    spec: mirrorSpecSchema.parse({
      name: 'm',
      sourcePeer: 's',
      destinationPeer: 'd',
      tableMappings: [{ source: base.source, destination: base.destination }],
      doInitialSnapshot: false,
    }),
    destination,
    catalog,
    logger: pino({ level: 'silent' }),
  } as Partial<MirrorContext> as MirrorContext;
  const tables = await followedTables(context, [{ table: now, shape: shapeOf(now.columns) }], () => false);
  return { destination, shapes, logs, tables };
}

describe('followedTables', () => {
  it('completes an alteration the engine stopped in the middle of before the table is set up', async () => {
    // The rename was made, the add was not.
    const { destination, shapes, logs, tables } = await startOver([id, w]);
    expect(destination.columns('public.t')).toEqual(['id', 'w', 'x']);
    expect(tables.map((table) => table.columns.map((column) => column.name))).toEqual([['id', 'w', 'x']]);
    expect(shapes.get('public.t')).toEqual(underWay.altering?.to);
    expect(logs).toEqual([
      'INFO public.t follows its schema change at the destination, completed after the engine stopped in its middle: column v renamed to w, column x added',
    ]);
  });

  it('makes nothing twice when the alteration was done and only its record was not', async () => {
    const { destination, shapes, tables } = await startOver([id, w, x]);
    expect(destination.columns('public.t')).toEqual(['id', 'w', 'x']);
    expect(tables[0]?.columns).toEqual(now.columns);
    expect(shapes.get('public.t')?.altering).toBeUndefined();
  });

  it('makes all of it when the engine stopped before its first statement', async () => {
    const { destination } = await startOver([id, v]);
    expect(destination.columns('public.t')).toEqual(['id', 'w', 'x']);
  });
});

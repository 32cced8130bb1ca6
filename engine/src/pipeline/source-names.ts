// Where each mapped table is at the source now. A mirror knows its tables by
// identity: the OID PostgreSQL keeps through `ALTER TABLE … RENAME TO` and
// `SET SCHEMA`, recorded with each table's shape (catalog TableShape). A table
// mapping names a table as it was; the mirror goes on knowing it by that name
// (catalog, status, resync requests, the stream's tables), and only what is
// asked of the source is translated to the table's name of now, here, in one
// place: the pipeline runs against a `RenamingSource` (docs/engine.md,
// "Schema changes": a table renamed).

import type { Readable } from 'node:stream';
import type { TableShape } from '../catalog/catalog.ts';
import type {
  BackfillChunkRequest,
  BackfillReader,
  ChangeStream,
  CreatedSlot,
  CreateSlotOptions,
  MissingTables,
  PartitionLeaf,
  PartitionLeaves,
  PublicationFiltering,
  PublishedTable,
  RowFilterEvaluation,
  SlotRow,
  SnapshotPartition,
  SnapshotReader,
  Source,
  SourceTableInfo,
  SourceValidationInput,
  ValidatedSource,
} from '../connectors/source.ts';
import type { EngineError } from '../errors.ts';
import { formatTableName, type TableName } from '../resources/mirror.ts';
import { type MirrorContext, mirrorLog } from './context.ts';

interface Whereabouts {
  readonly mapped: TableName;
  /** The table's name at the source now. */
  readonly current: TableName;
  /** Its identity, once known (recorded, or read by validation). */
  readonly oid: number | undefined;
}

const noNews: readonly never[] = [];

/** The mapped tables' names at the source now, by the name their mapping gives them. */
export class SourceNames {
  /** By formatTableName of the mapped name. */
  readonly #byMapped = new Map<string, Whereabouts>();
  /** The mapped name of each renamed table, by formatTableName of its name now. */
  readonly #mappedByCurrent = new Map<string, TableName>();
  /** formatTableName of every mapped name. */
  readonly #mappedNames: ReadonlySet<string>;
  /** Renames learnt and not told yet (takeNews). */
  #news: { readonly mapped: TableName; readonly from: TableName; readonly to: TableName }[] = [];

  /** `mapped`: the source tables of the mirror's table mappings. */
  constructor(mapped: readonly TableName[]) {
    this.#mappedNames = new Set(mapped.map(formatTableName));
  }

  /** The table's name at the source now: its own when it is not a renamed mapped table. */
  current(name: TableName): TableName {
    return this.#byMapped.get(formatTableName(name))?.current ?? name;
  }

  /** The mapped name of a renamed table by its name now: the name itself otherwise. */
  mapped(name: TableName): TableName {
    return this.#mappedByCurrent.get(formatTableName(name)) ?? name;
  }

  /** The identity of a mapped table, when known. */
  oidOf(mapped: TableName): number | undefined {
    return this.#byMapped.get(formatTableName(mapped))?.oid;
  }

  /** Records a mapped table's identity (found by its name now). */
  identify(mapped: TableName, oid: number): void {
    const known = this.#byMapped.get(formatTableName(mapped));
    this.#byMapped.set(formatTableName(mapped), { mapped, current: known?.current ?? mapped, oid });
  }

  /**
   * Records that a mapped table is named `current` at the source now; false
   * (nothing learnt) when a mapping of its own names `current` (the table
   * mapped again under its new name): that mapping is the table then, and
   * this one's table is gone.
   */
  learn(mapped: TableName, current: TableName): boolean {
    const key = formatTableName(mapped);
    const renamed = formatTableName(current) !== key;
    if (renamed && this.#mappedNames.has(formatTableName(current))) return false;
    const known = this.#byMapped.get(key);
    const from = known?.current ?? mapped;
    if (known) this.#mappedByCurrent.delete(formatTableName(known.current));
    this.#byMapped.set(key, { mapped, current, oid: known?.oid });
    if (renamed) this.#mappedByCurrent.set(formatTableName(current), mapped);
    if (formatTableName(from) !== formatTableName(current)) this.#news.push({ mapped, from, to: current });
    return true;
  }

  /**
   * Forgets a mapped table's identity and name now: it stopped because the
   * source no longer has it, and is looked for by its mapped name from then
   * on (a table made under that name is the one it loads when it rejoins).
   */
  forget(mapped: TableName): void {
    const known = this.#byMapped.get(formatTableName(mapped));
    if (known) this.#mappedByCurrent.delete(formatTableName(known.current));
    this.#byMapped.delete(formatTableName(mapped));
  }

  /** The renames learnt since the last call, for the mirror's log. Cheap when there are none: asked by the stream loop. */
  takeNews(): readonly { readonly mapped: TableName; readonly from: TableName; readonly to: TableName }[] {
    if (this.#news.length === 0) return noNews;
    const news = this.#news;
    this.#news = [];
    return news;
  }
}

/**
 * The mapped tables' names now, from the identities their recorded shapes
 * hold (one query): a table whose identity the source no longer has keeps
 * its mapped name (dropped, or dropped and made again under that name: the
 * mirror looks for it by name, as before identities were recorded).
 */
export async function resolveSourceNames(
  source: Pick<Source, 'tableNames'>,
  mapped: readonly TableName[],
  shapes: ReadonlyMap<string, TableShape>,
): Promise<SourceNames> {
  const names = new SourceNames(mapped);
  const identified = mapped.flatMap((name) => {
    const oid = shapes.get(formatTableName(name))?.sourceOid;
    return oid === undefined ? [] : [{ name, oid }];
  });
  if (identified.length === 0) return names;
  const found = await source.tableNames(identified.map(({ oid }) => oid));
  for (const { name, oid } of identified) {
    const current = found.get(oid);
    if (current && names.learn(name, current)) names.identify(name, oid);
  }
  return names;
}

/** Says in the mirror's log each rename learnt since the last time. */
export async function tellRenames(context: MirrorContext, names: SourceNames): Promise<void> {
  for (const { mapped, from, to } of names.takeNews()) {
    await mirrorLog(
      context,
      'INFO',
      `source table ${formatTableName(from)} is named ${formatTableName(to)} now: the mirror follows it by its identity, as ${formatTableName(mapped)} of its table mappings, into the same destination table`,
    );
  }
}

/**
 * A Source whose table names are the mappings': each is translated to the
 * table's name now on the way in and back on the way out. What is not about
 * a table passes through.
 */
export class RenamingSource implements Source {
  readonly #inner: Source;
  readonly names: SourceNames;

  constructor(inner: Source, names: SourceNames) {
    this.#inner = inner;
    this.names = names;
  }

  #in = (name: TableName): TableName => this.names.current(name);
  #out = (name: TableName): TableName => this.names.mapped(name);

  check(): Promise<{ version: string }> {
    return this.#inner.check();
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  reportConfigWarnings(peerName: string, warn: (message: string) => void): void {
    this.#inner.reportConfigWarnings(peerName, warn);
  }

  async validate(input: SourceValidationInput): Promise<ValidatedSource> {
    const validated = await this.#inner.validate({ ...input, tables: input.tables.map(this.#in) });
    const tables = validated.tables.map((info) => {
      const mapped = this.#out(info.name);
      this.names.identify(mapped, info.oid);
      return { ...info, name: mapped, partitionOf: info.partitionOf.map(this.#out) };
    });
    return { ...validated, tables, missing: validated.missing.map(this.#out) };
  }

  /**
   * A mapped table whose identity is known is looked for by it: one renamed
   * since is not missing (and is known by its new name from then on), one
   * whose identity is gone is, even when another table took its name. The
   * others are looked for by name. The WAL position is read after both looks.
   */
  async missingTables(tables: readonly TableName[]): Promise<MissingTables> {
    const identified: { mapped: TableName; oid: number }[] = [];
    const byName: TableName[] = [];
    for (const mapped of tables) {
      const oid = this.names.oidOf(mapped);
      if (oid === undefined) byName.push(mapped);
      else identified.push({ mapped, oid });
    }
    const found =
      identified.length > 0 ? await this.#inner.tableNames(identified.map(({ oid }) => oid)) : new Map();
    const missing: TableName[] = [];
    for (const { mapped, oid } of identified) {
      const current = found.get(oid);
      if (current && this.names.learn(mapped, current)) continue;
      missing.push(mapped);
    }
    const looked = await this.#inner.missingTables(byName.map(this.#in));
    return { walLsn: looked.walLsn, missing: [...missing, ...looked.missing.map(this.#out)] };
  }

  tableNames(oids: readonly number[]): Promise<Map<number, TableName>> {
    return this.#inner.tableNames(oids);
  }

  /** The partitioned tables asked for under their names of now, answered under the mapped ones; leaves are no mapped tables. */
  async partitionLeaves(tables: readonly TableName[]): Promise<PartitionLeaves> {
    const current = tables.map(this.#in);
    const found = await this.#inner.partitionLeaves(current);
    const byTable = new Map<string, readonly PartitionLeaf[]>();
    current.forEach((name, index) => {
      const leaves = found.byTable.get(formatTableName(name));
      const mapped = tables[index];
      if (leaves && mapped) byTable.set(formatTableName(mapped), leaves);
    });
    return { byTable, walLsn: found.walLsn };
  }

  rowsBeforeAttach(leaf: PartitionLeaf): Promise<boolean> {
    return this.#inner.rowsBeforeAttach(leaf);
  }

  defaultNames(mirror: string, installationId: string): { slotName: string; publicationName: string } {
    return this.#inner.defaultNames(mirror, installationId);
  }

  database(): Promise<string> {
    return this.#inner.database();
  }

  readSlot(slotName: string): Promise<SlotRow | undefined> {
    return this.#inner.readSlot(slotName);
  }

  slotExists(slotName: string): Promise<boolean> {
    return this.#inner.slotExists(slotName);
  }

  slotLoss(slotName: string): Promise<EngineError | undefined> {
    return this.#inner.slotLoss(slotName);
  }

  slotFailover(slotName: string): Promise<boolean | null> {
    return this.#inner.slotFailover(slotName);
  }

  setSlotFailover(slotName: string, failover: boolean): Promise<void> {
    return this.#inner.setSlotFailover(slotName, failover);
  }

  publicationExists(publicationName: string): Promise<boolean> {
    return this.#inner.publicationExists(publicationName);
  }

  ensurePublication(
    publicationName: string,
    tables: readonly PublishedTable[],
  ): Promise<PublicationFiltering> {
    return this.#inner.ensurePublication(
      publicationName,
      tables.map((table) => ({ ...table, name: this.#in(table.name) })),
    );
  }

  removeFromPublication(publicationName: string, tables: readonly TableName[]): Promise<void> {
    return this.#inner.removeFromPublication(publicationName, tables.map(this.#in));
  }

  createSlot(
    slotName: string,
    options: CreateSlotOptions,
    whileOpen: (slot: CreatedSlot) => Promise<void>,
  ): Promise<CreatedSlot> {
    return this.#inner.createSlot(slotName, options, whileOpen);
  }

  async planPartitions(
    table: TableName,
    snapshotName: string | null,
    rowsPerPartition: number,
  ): Promise<SnapshotPartition[]> {
    return this.#inner.planPartitions(this.#in(table), snapshotName, rowsPerPartition);
  }

  async openSnapshotReader(snapshotName: string | null): Promise<SnapshotReader> {
    const reader = await this.#inner.openSnapshotReader(snapshotName);
    return {
      copyPartition: (
        table: TableName,
        columns: readonly string[],
        partition: SnapshotPartition,
        write: (copyText: Readable) => Promise<number>,
        rowFilter?: string,
      ) => reader.copyPartition(this.#in(table), columns, partition, write, rowFilter),
      close: () => reader.close(),
    };
  }

  async openBackfillReader(): Promise<BackfillReader> {
    const reader = await this.#inner.openBackfillReader();
    return {
      readChunk: (request: BackfillChunkRequest) =>
        reader.readChunk({ ...request, table: this.#in(request.table) }),
      close: () => reader.close(),
    };
  }

  openStream(options: Parameters<Source['openStream']>[0]): Promise<ChangeStream> {
    return this.#inner.openStream(options);
  }

  emitHeartbeat(): Promise<bigint> {
    return this.#inner.emitHeartbeat();
  }

  typeNames(
    columns: readonly { readonly typeOid: number; readonly typeModifier: number }[],
  ): Promise<string[]> {
    return this.#inner.typeNames(columns);
  }

  async partitionAncestors(relationId: number): Promise<TableName[]> {
    return (await this.#inner.partitionAncestors(relationId)).map(this.#out);
  }

  liveColumns(
    relationId: number,
    xid: number,
  ): Promise<{ readonly attnum: number; readonly name: string }[]> {
    return this.#inner.liveColumns(relationId, xid);
  }

  rowFilterColumns(table: SourceTableInfo, rowFilter: string): Promise<string[]> {
    return this.#inner.rowFilterColumns({ ...table, name: this.#in(table.name) }, rowFilter);
  }

  evaluateRowFilter(request: RowFilterEvaluation): Promise<boolean[]> {
    return this.#inner.evaluateRowFilter({ ...request, table: this.#in(request.table) });
  }

  dropSlot(slotName: string): Promise<void> {
    return this.#inner.dropSlot(slotName);
  }

  dropPublication(publicationName: string): Promise<void> {
    return this.#inner.dropPublication(publicationName);
  }
}

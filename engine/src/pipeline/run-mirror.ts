// Sequences one mirror: setup → initial load → CDC, and teardown on drop. The
// steps' I/O lives in the connectors; this module decides order and moves
// the phase as each step begins or ends (through catalog/phases.ts).
// Re-running it after a crash or a pause picks up where the catalog and the
// destination's checkpoint say the mirror was.

import type { SnapshotTableProgress, SourceSetup, TableShape, TableStatus } from '../catalog/catalog.ts';
import { forgetDroppedMirror, movePhase } from '../catalog/phases.ts';
import {
  moveTable,
  moveTablesIfAllowed,
  removeUnmappedTables,
  stoppedTableStates,
} from '../catalog/table-states.ts';
import type { DestinationTable } from '../connectors/records.ts';
import type { CreatedSlot } from '../connectors/source.ts';
import { EngineError } from '../errors.ts';
import { formatTableName, parseTableIdentifier, type TableName } from '../resources/mirror.ts';
import { keyOrderOf } from './backfill/key-order.ts';
import { type OnlineLoad, runCdc } from './cdc.ts';
import { type MirrorContext, mirrorLog, watched } from './context.ts';
import { recordLoadedPartitions } from './partition-watch.ts';
import { type EngineFilteredTable, engineFilteredTables } from './row-filter.ts';
import { runSnapshot } from './snapshot.ts';
import { RenamingSource, resolveSourceNames, tellRenames } from './source-names.ts';
import {
  checkSlotIdentity,
  claimDestinationTables,
  planSourceSetup,
  slotIdentityOf,
} from './source-ownership.ts';
import {
  mappedTableWithoutColumns,
  missingSourceTable,
  rejoinRestoredTables,
  stoppedForMissingSource,
} from './source-tables-watch.ts';
import {
  destinationTableDropped,
  faultedTable,
  rejoinDroppedDestinations,
  reloadFromNothing,
  stopTable,
} from './table-faults.ts';
import { actOnResyncRequests, plannedResyncs, type ResyncLoad } from './table-resync.ts';
import { followedTables, inRecordedShapes, loadsFromNothing, sourceShape } from './table-shapes.ts';
import { destinationTable, publishedTable } from './tables.ts';

/** How a run ended when it did not throw. */
export type RunOutcome = 'stopped' | 'completed';

export async function runMirror(context: MirrorContext): Promise<RunOutcome> {
  try {
    for (;;) {
      // A table back at the source after it went: the steps again, which load it.
      const outcome = await runMirrorSteps(context);
      if (outcome !== 'rejoin') return outcome;
    }
  } catch (error) {
    // Stopped mid-step (e.g. paused during the initial load): the step is
    // redone from its start or from the checkpoint when the mirror resumes.
    if (context.signal.aborted && error instanceof Error && error.name === 'AbortError') return 'stopped';
    throw error;
  }
}

async function runMirrorSteps(mirror: MirrorContext): Promise<RunOutcome | 'rejoin'> {
  const { spec, catalog } = mirror;
  const stored = await catalog.getRuntime(spec.name);
  if (stored?.phase === 'completed') return 'completed';
  // A mirror re-created under a dropped one's name starts from nothing.
  if (stored?.phase === 'terminated') await forgetDroppedMirror(catalog, spec.name);
  const runtime = stored?.phase === 'terminated' ? undefined : stored;
  // Every step asks the source for its tables under their names of now (source-names.ts).
  const recordedShapes = await catalog.listTableShapes(spec.name);
  const names = await watched(mirror, 'setup: source: find the mapped tables by identity', () =>
    resolveSourceNames(
      mirror.source,
      spec.tableMappings.map((mapping) => mapping.source),
      recordedShapes,
    ),
  );
  const context: MirrorContext = { ...mirror, source: new RenamingSource(mirror.source, names) };
  const { source } = context;
  let setup: SourceSetup;
  let tables: DestinationTable[];
  let backfills: OnlineLoad[] = [];
  let resyncs: ResyncLoad[] = [];
  let engineRowFilters: EngineFilteredTable[] = [];
  /** Mapped tables the source does not have, stopped for it: looked for while streaming, to rejoin. */
  const gone: TableName[] = [];
  try {
    if (!runtime) await movePhase(catalog, spec.name, 'setupStarted');
    if (runtime?.setup) {
      setup = runtime.setup;
      await checkSlotIdentity(source, spec.name, setup);
    } else {
      // Recorded before anything is created, so a crash in between leaves
      // nothing on the source that the catalog does not claim.
      setup = await planSourceSetup(source, spec, await catalog.installationId());
      await catalog.saveSourceSetup(spec.name, setup);
      if (!setup.slotCreatedByMirror) {
        await mirrorLog(
          context,
          'WARN',
          `adopted existing replication slot ${setup.slotName}; it is kept on drop`,
        );
      }
    }
    // A mirror whose tables are tracked already: one gone from the source is
    // that table's fault (source-tables-watch.ts), not the mirror's.
    const tracked = new Map((await catalog.listTables(spec.name)).map((table) => [table.sourceTable, table]));
    const validated = await watched(context, 'setup: source: validate', () =>
      source.validate({
        tables: spec.tableMappings.map((mapping) => mapping.source),
        publicationName: setup.publicationCreatedByMirror ? undefined : setup.publicationName,
        existingSlotName: setup.slotName,
        failoverSlot: spec.failoverSlot,
        missingTablesAllowed: tracked.size > 0,
      }),
    );
    const found = new Map(validated.tables.map((info) => [formatTableName(info.name), info]));
    await tellRenames(context, names);
    const current: { table: DestinationTable; shape: TableShape }[] = [];
    for (const mapping of spec.tableMappings) {
      const sourceTable = formatTableName(mapping.source);
      const info = found.get(sourceTable);
      if (info) {
        const table = destinationTable(mapping, info);
        current.push({ table, shape: sourceShape(mapping, info, table, names.current(mapping.source)) });
        await reloadReplacedTable(
          context,
          table,
          tracked.get(sourceTable),
          recordedShapes.get(sourceTable),
          info.oid,
        );
      } else if (!tracked.has(sourceTable)) {
        throw new EngineError(
          'source_setup',
          `source is not ready for replication: source table ${sourceTable} does not exist`,
        );
      } else {
        gone.push(mapping.source);
        const status = tracked.get(sourceTable);
        if (!stoppedForMissingSource(status)) {
          await stopTable(context, mappedTableWithoutColumns(mapping), missingSourceTable(sourceTable));
        }
      }
    }
    await rejoinRestoredTables(
      context,
      current.map(({ table }) => table),
      tracked,
    );
    await rejoinDroppedDestinations(
      context,
      current.map(({ table }) => table),
      tracked,
    );
    // Each table in the shape its destination follows (table-shapes.ts).
    const statuses = new Map(
      (await catalog.listTables(spec.name)).map((table) => [table.sourceTable, table]),
    );
    const initialLoadPending = spec.doInitialSnapshot && runtime?.snapshotCompleted !== true;
    tables = await followedTables(context, current, (sourceTable) =>
      loadsFromNothing(context, statuses.get(sourceTable), initialLoadPending),
    );
    await watched(context, 'setup: destination: create tables', () =>
      context.destination.setupTables(tables),
    );
    const published = spec.tableMappings.flatMap((mapping) => {
      const info = found.get(formatTableName(mapping.source));
      return info ? [publishedTable(mapping, info)] : [];
    });
    // Checked by the source first, on every server: an edited filter that
    // reads a column outside the replica identity would make PostgreSQL 15+
    // refuse every UPDATE and DELETE of the table once in the publication.
    const filtered = await watched(context, 'setup: source: check the row filters', () =>
      engineFilteredTables(source, spec.tableMappings, found),
    );
    const filtering = setup.publicationCreatedByMirror
      ? await watched(context, 'setup: source: create the publication', () =>
          source.ensurePublication(setup.publicationName, published),
        )
      : { rowFilters: false };
    // Where the publication does not filter, the engine does, by the source's own evaluation.
    engineRowFilters = filtering.rowFilters ? [] : filtered;

    const snapshotDone = runtime?.snapshotCompleted === true;
    if (spec.doInitialSnapshot && !snapshotDone) {
      setup = await loadInitialSnapshot(context, setup, tables);
    } else if (!(await source.slotExists(setup.slotName))) {
      if (runtime?.phase === 'running' || runtime?.phase === 'paused') {
        throw new EngineError(
          'slot_invalidated',
          `replication slot ${setup.slotName} is gone; changes since the last sync cannot be recovered`,
        );
      }
      setup = await createOwnedSlot(context, setup, false, async () => {});
    }

    if (setup.slotCreatedByMirror) await matchSlotFailover(context, setup.slotName);

    // A slot invalidated while the mirror was paused or down (max_slot_wal_keep_size,
    // or a conflict on a standby) still exists but cannot be read: fail now with
    // the resync remedy instead of retrying START_REPLICATION.
    if (!spec.initialSnapshotOnly) {
      const lost = await source.slotLoss(setup.slotName);
      if (lost) throw lost;
    }

    await actOnResyncRequests(context, tables);
    backfills = await reconcileMappedTables(context, setup, tables);
    resyncs = await plannedResyncs(context, tables);
    const backfilled = new Set(backfills.map((backfill) => backfill.table));
    // Every load before streaming is done: a table not tracked yet (a mirror
    // without an initial load, or one set up before tables had states), mapped
    // again without a load, or whose load finished just before a crash,
    // streams. A table stopped on its own (errored, held) or resyncing stays
    // as it is, and one loaded online stays `loading` until its copy is done.
    await moveTablesIfAllowed(
      catalog,
      spec.name,
      tables
        .filter((table) => !backfilled.has(table))
        .map((table) => ({
          sourceTable: formatTableName(table.source),
          destinationTable: formatTableName(table.destination),
        })),
      'joinedWithoutLoad',
      ['new', 'removed', 'pending', 'loading'],
    );

    if (spec.initialSnapshotOnly) {
      // No CDC follows: keep no slot that would hold WAL on the source.
      if (setup.slotCreatedByMirror) await source.dropSlot(setup.slotName);
      if (setup.publicationCreatedByMirror) await source.dropPublication(setup.publicationName);
      await movePhase(catalog, spec.name, 'loadOnlyFinished');
      await mirrorLog(context, 'INFO', 'initial load only: mirror completed');
      return 'completed';
    }
  } finally {
    await source.close();
  }

  if (context.signal.aborted) return 'stopped';
  const progress = await catalog.listSnapshotProgress(spec.name);
  const tableStartLsns = new Map(progress.map((table) => [table.sourceTable, table.cdcStartLsn]));
  // Tables stopped on a fault of their own stay stopped; a fault of another
  // one stops it too, and the stream goes on from the checkpoint without it.
  const stopped = new Set(
    (await catalog.listTables(spec.name))
      .filter((table) => stoppedTableStates.includes(table.state))
      .map((table) => table.sourceTable),
  );
  for (;;) {
    try {
      // A schema change settled before a table's fault restarted the stream was recorded.
      const shapes = await catalog.listTableShapes(spec.name);
      tables = inRecordedShapes(tables, shapes);
      const outcome = await runCdc(context, {
        slotName: setup.slotName,
        publicationName: setup.publicationName,
        publicationCreatedByMirror: setup.publicationCreatedByMirror,
        tables,
        shapes,
        tableStartLsns,
        backfills: backfills.filter((load) => !stopped.has(formatTableName(load.table.source))),
        resyncs: resyncs.filter((load) => !stopped.has(formatTableName(load.live.source))),
        stoppedTables: stopped,
        goneTables: gone,
        rowFilters: engineRowFilters,
        sourceNames: names,
      });
      return outcome;
    } catch (error) {
      const fault = context.signal.aborted ? undefined : faultedTable(error, tables, stopped);
      if (!fault) throw error;
      await stopTable(context, fault.table, fault.error);
      stopped.add(formatTableName(fault.table.source));
      if (fault.error.kind === 'source_schema') {
        gone.push(fault.table.source);
        names.forget(fault.table.source);
      } else if (await destinationTableDropped(context, fault.table, fault.error)) {
        // The steps again: they load it again, into a table created anew (rejoinDroppedDestinations).
        return 'rejoin';
      }
    }
  }
}

/**
 * A streaming table whose source is another table than the one followed (the
 * followed one dropped, or renamed away, and a table made under its name)
 * holds rows the source no longer has, and misses what the new one had
 * before it was published: it is stopped and loaded again from nothing.
 */
async function reloadReplacedTable(
  context: MirrorContext,
  table: DestinationTable,
  status: TableStatus | undefined,
  shape: TableShape | undefined,
  oid: number,
): Promise<void> {
  if (shape?.sourceOid === undefined || shape.sourceOid === oid) return;
  if (status?.state !== 'streaming' && status?.state !== 'loading') return;
  const sourceTable = formatTableName(table.source);
  await reloadFromNothing(
    context,
    table,
    status,
    new EngineError(
      'source_schema',
      `source table ${sourceTable} is another table than the one the mirror followed (dropped, or renamed away, and made again under its name)`,
      { table: sourceTable },
    ),
    `source table ${sourceTable} was made again`,
  );
}

/**
 * After an edit: stops publishing tables that were removed, and plans the
 * load of tables added since the initial load. A table whose key the engine
 * can order (backfill/key-order.ts) is loaded online, in chunks interleaved
 * with the stream once CDC runs (pipeline/backfill/): returned, `loading`.
 * Any other is copied now, before CDC starts, under the snapshot of a
 * temporary slot created after it joined the publication; CDC skips its
 * changes from transactions that committed before that slot's consistent
 * point, since the copy already holds them.
 */
async function reconcileMappedTables(
  context: MirrorContext,
  setup: SourceSetup,
  tables: readonly DestinationTable[],
): Promise<OnlineLoad[]> {
  const { spec, catalog } = context;
  const progress = await catalog.listSnapshotProgress(spec.name);
  // The spec's tables, found at the source or not (one gone stays, stopped).
  const mapped = new Set(spec.tableMappings.map((mapping) => formatTableName(mapping.source)));
  await removeUnmappedTables(catalog, spec.name, mapped);
  const removed = progress
    .filter((table) => !mapped.has(table.sourceTable))
    .map((table) => table.sourceTable);
  if (removed.length > 0) {
    if (setup.publicationCreatedByMirror) {
      await context.source.removeFromPublication(setup.publicationName, removed.map(parseTableIdentifier));
    }
    await catalog.removeSnapshotTables(spec.name, removed);
    await mirrorLog(context, 'INFO', `stopped replicating ${removed.join(', ')}; destination tables kept`);
  }
  if (progress.length === 0) return [];
  const loaded = new Set(
    progress.filter((table) => table.consolidateCompleted).map((table) => table.sourceTable),
  );
  // Without an initial load, an added table streams from now on; a table
  // loaded back on request (table-resync.ts: its load record begun, not
  // completed) is loaded all the same.
  const begun = new Set(progress.map((table) => table.sourceTable));
  // A table stopped on its own fault (its load, say) or held waits for its resync.
  const errored = new Set(
    (await catalog.listTables(spec.name))
      .filter((table) => stoppedTableStates.includes(table.state))
      .map((table) => table.sourceTable),
  );
  const addedTables = tables.filter((table) => {
    const name = formatTableName(table.source);
    return !loaded.has(name) && !errored.has(name) && (spec.doInitialSnapshot || begun.has(name));
  });
  if (addedTables.length === 0) return [];
  const online = spec.initialSnapshotOnly ? [] : addedTables.filter((table) => keyOrderOf(table));
  const added = addedTables.filter((table) => !online.includes(table));
  const loads = await planOnlineLoads(context, online, progress);
  if (added.length === 0) return loads;
  if (!spec.initialSnapshotOnly) {
    await mirrorLog(
      context,
      'INFO',
      `added table(s) ${added.map((t) => formatTableName(t.source)).join(', ')} load before streaming goes on: their key is not of a type the engine orders (int2, int4, int8, oid, uuid, text, varchar, bpchar, name), or they have none`,
    );
  }

  await claimTables(context, added);
  await movePhase(catalog, spec.name, 'loadStarted');
  await watched(context, 'setup: destination: empty added tables', () =>
    context.destination.truncateTables(added),
  );
  await recordLoadedPartitions(context, added);
  await context.source.createSlot(
    `${setup.slotName}_add`.slice(0, 63),
    { exportSnapshot: true, temporary: true },
    (temporarySlot) =>
      runSnapshot(context, added, {
        name: temporarySlot.snapshotName,
        consistentPoint: temporarySlot.consistentPoint,
      }),
  );
  await mirrorLog(
    context,
    'INFO',
    `loaded added table(s) ${added.map((t) => formatTableName(t.source)).join(', ')}`,
  );
  return loads;
}

/**
 * The added tables loaded online: claimed (only tables the mirror may empty
 * are), and `loading` from the first start of their load on. A load that
 * begins records its start (its snapshot record, with no CDC start position:
 * the backfill decides which changes apply), so a restart resumes it from
 * the progress recorded with the destination's checkpoint batch (cdc.ts).
 */
async function planOnlineLoads(
  context: MirrorContext,
  tables: readonly DestinationTable[],
  progress: readonly SnapshotTableProgress[],
): Promise<OnlineLoad[]> {
  if (tables.length === 0) return [];
  const { spec, catalog } = context;
  await claimTables(context, tables);
  const loads: OnlineLoad[] = [];
  for (const table of tables) {
    const names = {
      sourceTable: formatTableName(table.source),
      destinationTable: formatTableName(table.destination),
    };
    let started = progress.find((entry) => entry.sourceTable === names.sourceTable)?.startTime;
    if (!started) {
      await recordLoadedPartitions(context, [table]);
      await catalog.startSnapshotTable(spec.name, { ...names, partitionsTotal: 0, cdcStartLsn: 0n });
      started = (await catalog.listSnapshotProgress(spec.name)).find(
        (entry) => entry.sourceTable === names.sourceTable,
      )?.startTime;
      await moveTable(catalog, spec.name, names, 'loadQueued');
      await mirrorLog(context, 'INFO', `loading added table ${names.sourceTable} online while streaming`);
    }
    await moveTablesIfAllowed(catalog, spec.name, [names], 'loadStarted', ['new', 'pending', 'removed']);
    const order = keyOrderOf(table);
    if (order) loads.push({ table, order, since: started?.getTime() ?? 0 });
  }
  return loads;
}

/**
 * Empties only destination tables the mirror may empty (see
 * claimDestinationTables) and records them as the mirror's, so a load that
 * starts over may empty its own partial rows.
 */
async function claimTables(context: MirrorContext, tables: readonly DestinationTable[]): Promise<void> {
  const owned = new Set(await context.catalog.listOwnedTables(context.spec.name));
  const claimed = await watched(context, 'setup: destination: inspect tables', () =>
    claimDestinationTables(context.destination, context.spec, tables, owned),
  );
  await context.catalog.recordOwnedTables(context.spec.name, claimed);
}

/**
 * Creates the mirror's slot, recording first that the mirror is creating it
 * and then the slot's identity. `whileOpen` runs while the replication
 * connection that created it is open (an exported snapshot lives that long).
 */
async function createOwnedSlot(
  context: MirrorContext,
  planned: SourceSetup,
  exportSnapshot: boolean,
  whileOpen: (slot: CreatedSlot) => Promise<void>,
): Promise<SourceSetup> {
  const { spec, catalog } = context;
  const creating: SourceSetup = { ...planned, slotCreatedByMirror: true, slotIdentity: null };
  await catalog.saveSourceSetup(spec.name, creating);
  const database = await context.source.database();
  let created: SourceSetup | undefined;
  await context.source.createSlot(
    creating.slotName,
    { exportSnapshot, failover: spec.failoverSlot },
    async (slot) => {
      created = { ...creating, slotIdentity: slotIdentityOf(database, slot.consistentPoint) };
      await catalog.saveSourceSetup(spec.name, created);
      await mirrorLog(context, 'INFO', `created replication slot ${slot.slotName}`);
      await whileOpen(slot);
    },
  );
  if (!created) throw new EngineError('internal', 'source: slot creation returned before the slot existed');
  return created;
}

/**
 * Makes the failover property of the mirror's own slot what the spec asks, so
 * `failoverSlot` can be turned on or off for a mirror that already has its
 * slot. Servers before 17 have no failover slots (validation refused asking
 * for one there).
 */
async function matchSlotFailover(context: MirrorContext, slotName: string) {
  const failover = await context.source.slotFailover(slotName);
  if (failover === null || failover === context.spec.failoverSlot) return;
  await context.source.setSlotFailover(slotName, context.spec.failoverSlot);
  await mirrorLog(
    context,
    'INFO',
    `replication slot ${slotName} is ${context.spec.failoverSlot ? 'now' : 'no longer'} a failover slot`,
  );
}

/**
 * Creates the slot with an exported snapshot and copies every table under it.
 * A load that was interrupted starts over: the old slot and snapshot are gone
 * with the connection that held them, so the slot is recreated and the
 * destination tables are emptied first. Only tables the mirror may empty are
 * (claimTables); the existing slot is the mirror's or one it was told to adopt.
 */
async function loadInitialSnapshot(
  context: MirrorContext,
  setup: SourceSetup,
  tables: readonly DestinationTable[],
): Promise<SourceSetup> {
  const { spec, catalog } = context;
  await claimTables(context, tables);
  if (await context.source.slotExists(setup.slotName)) {
    await mirrorLog(
      context,
      'WARN',
      setup.slotCreatedByMirror
        ? 'initial load was interrupted; starting it over with a new slot'
        : `replacing adopted replication slot ${setup.slotName}: an initial load needs a slot of its own`,
    );
    await context.source.dropSlot(setup.slotName);
  }
  await watched(context, 'setup: destination: empty tables', async () => {
    await context.destination.truncateTables(tables);
    await context.destination.removeCheckpoint(spec.name);
  });
  await catalog.resetSnapshotProgress(spec.name);
  await movePhase(catalog, spec.name, 'loadStarted');
  await recordLoadedPartitions(context, tables);

  // The exporting connection must stay open and idle until every partition has
  // imported the snapshot.
  const created = await createOwnedSlot(context, setup, true, (slot) =>
    runSnapshot(context, tables, { name: slot.snapshotName, consistentPoint: slot.consistentPoint }),
  );
  await catalog.setSnapshotCompleted(spec.name, true);
  return created;
}

/** Drop: removes the slot and a publication the mirror created; destination tables stay. */
export async function teardownMirror(
  context: Omit<MirrorContext, 'signal' | 'batchMemoryBudgetBytes'>,
): Promise<void> {
  const { spec, catalog } = context;
  const runtime = await catalog.getRuntime(spec.name);
  if (runtime?.phase === 'terminated') return;
  await movePhase(catalog, spec.name, 'dropStarted');
  const { source } = context;
  const kept: string[] = [];
  try {
    // Without a recorded setup the mirror created nothing on the source.
    const setup = runtime?.setup;
    if (setup?.slotCreatedByMirror) {
      try {
        await checkSlotIdentity(source, spec.name, setup);
        await source.dropSlot(setup.slotName);
      } catch (error) {
        if (!(error instanceof EngineError) || error.kind !== 'config') throw error;
        kept.push(`replication slot ${setup.slotName} (${error.message})`);
      }
    } else if (setup) {
      kept.push(`adopted replication slot ${setup.slotName}`);
    }
    if (setup?.publicationCreatedByMirror) await source.dropPublication(setup.publicationName);
    else if (setup) kept.push(`publication ${setup.publicationName}, which the mirror did not create`);
  } finally {
    await source.close();
  }
  await context.destination.removeCheckpoint(spec.name);
  await movePhase(catalog, spec.name, 'dropFinished');
  await catalog.appendLog(
    spec.name,
    'INFO',
    kept.length > 0
      ? `mirror dropped: removed what it created on the source, kept ${kept.join('; ')}; tables kept`
      : 'mirror dropped: slot and publication removed, tables kept',
  );
}

import type { FastifyInstance } from 'fastify';
import {
  defaultPublicationName,
  defaultSlotName,
  flowStateByPhase,
  formatTableName,
  isSupportedDestination,
  type LogLevel,
  lagSecondsOf,
  type MirrorPhase,
  type MirrorResource,
  type MirrorResourceSpec,
  parseTableIdentifier,
  ResourceConflictError,
  ResourceExistsError,
  resyncsOnline,
  type TableMapping,
  tableStatusView,
  workflowId,
} from '../../../../engine/src/index.ts';
import { requireRole, stateChangeAccess, stateChangeOf } from '../access.ts';
import { noteAuditSubject } from '../audit.ts';
import type { FacadeContext } from '../context.ts';
import {
  checkDistinctTables,
  type FieldNamer,
  mappingFromWire,
  mirrorConfigToWire,
  mirrorSpecFromWire,
  parseRequest,
  slotHealthToWire,
  validMirrorSpec,
} from '../convert.ts';
import { ApiError } from '../errors.ts';
import {
  batchesRequest,
  createMirrorRequest,
  type flowStates,
  logsRequest,
  mirrorStatusRequest,
  type ResyncTableRequest,
  resyncTableRequest,
  type StateChangeRequest,
  stateChangeRequest,
} from '../wire.ts';
import { scriptsDisabledMessage } from './scripts.ts';

type FlowState = (typeof flowStates)[number];

/** How often a state change is decided again when the mirror changed under it. */
const stateChangeAttempts = 5;

/** The phases from which each requested state is accepted (see docs/api.md). */
const pausableFrom: readonly MirrorPhase[] = ['setup', 'snapshot', 'running', 'pausing', 'paused', 'failed'];

function unknownMirror(name: string): ApiError {
  return new ApiError('mirrorNotFound', `unable to get workflow id for mirror ${name}: mirror not found`);
}

function invalidMirror(message: string): ApiError {
  return new ApiError('invalidArgument', `invalid mirror: ${message}`);
}

export function mirrorRoutes(app: FastifyInstance, context: FacadeContext): void {
  const { store, catalog } = context;

  const phaseOf = async (name: string) => (await catalog.getRuntime(name))?.phase;

  app.post('/api/v1/flows/cdc/create', async (request) => {
    const {
      body: { connection_configs: config },
      field,
    } = parseRequest(createMirrorRequest, request);
    noteAuditSubject(request, { object: config.flow_job_name });
    const spec = mirrorSpecFromWire(config, field);
    if (await store.getMirror(spec.name)) {
      throw new ApiError('mirrorExists', `invalid mirror: a mirror named ${spec.name} already exists`);
    }
    const [source, destination] = await Promise.all([
      store.getPeer(spec.sourcePeer),
      store.getPeer(spec.destinationPeer),
    ]);
    if (!source) throw invalidMirror(`source peer ${spec.sourcePeer} does not exist`);
    if (source.peer.kind !== 'relational')
      throw invalidMirror(`source peer ${spec.sourcePeer} is not a relational peer`);
    if (!destination) throw invalidMirror(`destination peer ${spec.destinationPeer} does not exist`);
    if (!isSupportedDestination(destination.peer.kind)) {
      throw invalidMirror(`${destination.peer.kind} peers cannot be mirror destinations in this version`);
    }
    if (spec.script) {
      if (!context.scriptsEnabled) throw new ApiError('forbidden', scriptsDisabledMessage);
      if (!(await store.getScriptByName(spec.script)))
        throw invalidMirror(`script ${spec.script} does not exist`);
    }
    const installationId = await catalog.installationId();
    await checkSourceNamesFree(context, spec, installationId);
    await checkSource(context, source.peer.config, {
      name: spec.name,
      tables: spec.tableMappings.map((mapping) => mapping.source),
      publicationName: spec.publicationName,
      slotName: spec.replicationSlotName ?? defaultSlotName(spec.name, installationId),
      defaultPublicationName: defaultPublicationName(spec.name, installationId),
      adoptExistingSlot: spec.adoptExistingSlot,
      failoverSlot: spec.failoverSlot,
      destinationKind: destination.peer.kind,
      rowFilters: new Map(
        spec.tableMappings.flatMap((mapping) =>
          mapping.rowFilter === undefined
            ? []
            : [[formatTableName(mapping.source), mapping.rowFilter] as const],
        ),
      ),
    });
    try {
      const mirror = await store.createMirror(spec);
      return { workflowId: workflowId(mirror) };
    } catch (error) {
      if (error instanceof ResourceExistsError) {
        // A subclass says why (cluster mode: the object name is another mirror's).
        const reason =
          error.constructor === ResourceExistsError
            ? `a mirror named ${spec.name} already exists`
            : error.message;
        throw new ApiError('mirrorExists', `invalid mirror: ${reason}`);
      }
      throw error;
    }
  });

  app.post('/api/v1/mirrors/state_change', async (request) => {
    const { body, field } = parseRequest(stateChangeRequest, request);
    const change = stateChangeOf(body);
    noteAuditSubject(request, { action: `mirror.${change}`, object: body.flowJobName });
    requireRole(request, stateChangeAccess[change].role, stateChangeAccess[change].doing);
    // Read, decide, write at the generation read: when another request or the
    // operator changed the mirror in between, decide again on a fresh read.
    for (let attempt = 1; ; attempt++) {
      try {
        return await changeState(body, field);
      } catch (error) {
        if (!(error instanceof ResourceConflictError)) throw error;
        if (attempt >= stateChangeAttempts) {
          throw new ApiError('conflict', `mirror ${body.flowJobName} kept changing; try again`);
        }
      }
    }
  });

  app.post('/api/v1/mirrors/tables/resync', async (request) => {
    const { body, field } = parseRequest(resyncTableRequest, request);
    noteAuditSubject(request, { object: body.flowJobName, detail: body.sourceTableIdentifier });
    for (let attempt = 1; ; attempt++) {
      try {
        return await requestResync(body, field);
      } catch (error) {
        if (!(error instanceof ResourceConflictError)) throw error;
        if (attempt >= stateChangeAttempts) {
          throw new ApiError('conflict', `mirror ${body.flowJobName} kept changing; try again`);
        }
      }
    }
  });

  /** Sets the table's resync request in the spec (`resyncTables`), which the engine acts on. */
  async function requestResync(body: ResyncTableRequest, field: FieldNamer): Promise<object> {
    const mirror = await store.getMirror(body.flowJobName);
    if (!mirror || mirror.deleting) throw unknownMirror(body.flowJobName);
    let table: string;
    try {
      table = formatTableName(parseTableIdentifier(body.sourceTableIdentifier));
    } catch {
      throw new ApiError('invalidArgument', `${field(['sourceTableIdentifier'])}: expected schema.table`);
    }
    if (!mirror.spec.tableMappings.some((mapping) => formatTableName(mapping.source) === table)) {
      throw new ApiError(
        'invalidArgument',
        `${field(['sourceTableIdentifier'])}: ${table} is not a source table of mirror ${mirror.name}`,
      );
    }
    const status = (await catalog.listTables(mirror.name)).find((entry) => entry.sourceTable === table);
    const state = status ? tableStatusView(status).state : 'not tracked yet';
    // An errored table is loaded back anywhere; a streaming one is loaded beside
    // the live table and swapped in (PostgreSQL, ClickHouse, Snowflake), or sent again as
    // snapshot messages among its changes (Kafka).
    const destinationKind = (await store.getPeer(mirror.spec.destinationPeer))?.peer.kind;
    // A held table's resync accepts its schema change.
    const resyncable =
      status?.state === 'errored' ||
      status?.state === 'held' ||
      (status?.state === 'streaming' && destinationKind !== undefined && resyncsOnline(destinationKind));
    if (!resyncable) {
      throw new ApiError(
        'failedPrecondition',
        status?.state === 'streaming'
          ? `table ${table} of mirror ${mirror.name} is ${state}: an online resync of a streaming table needs a PostgreSQL, ClickHouse, Snowflake or Kafka destination for now`
          : `table ${table} of mirror ${mirror.name} is ${state}: only a streaming table (TABLE_STATE_STREAMING), one stopped on a fault of its own (TABLE_STATE_ERRORED) or one holding a schema change (TABLE_STATE_HELD) can be resynced`,
      );
    }
    await store.updateMirrorSpec(
      mirror.name,
      validMirrorSpec({
        ...mirror.spec,
        resyncTables: { ...mirror.spec.resyncTables, [table]: new Date().toISOString() },
      }),
      mirror.generation,
    );
    return {};
  }

  async function changeState(body: StateChangeRequest, field: FieldNamer): Promise<object> {
    const mirror = await store.getMirror(body.flowJobName);
    if (!mirror || mirror.deleting) throw unknownMirror(body.flowJobName);
    const phase = await phaseOf(mirror.name);
    const edit = body.flowConfigUpdate?.cdcFlowConfigUpdate;
    const write = (spec: MirrorResourceSpec) => store.updateMirrorSpec(mirror.name, spec, mirror.generation);

    if (body.requestedFlowState === 'STATUS_TERMINATING') {
      if (edit)
        throw new ApiError(
          'invalidArgument',
          `${field(['flowConfigUpdate'])}: only allowed with STATUS_RUNNING`,
        );
      await store.markMirrorDeleting(mirror.name);
      return { ok: true, errorMessage: '' };
    }
    if (body.requestedFlowState === 'STATUS_PAUSED') {
      if (edit)
        throw new ApiError(
          'invalidArgument',
          `${field(['flowConfigUpdate'])}: only allowed with STATUS_RUNNING`,
        );
      if (phase && !pausableFrom.includes(phase)) {
        throw new ApiError(
          'failedPrecondition',
          `mirror ${mirror.name} is ${flowStateByPhase[phase]} and cannot be paused`,
        );
      }
      if (mirror.spec.state !== 'Paused') await write({ ...mirror.spec, state: 'Paused' });
      return { ok: true, errorMessage: '' };
    }
    if (edit) {
      if (mirror.spec.state !== 'Paused' || phase !== 'paused') {
        throw new ApiError('failedPrecondition', `mirror ${mirror.name} must be paused before it is edited`);
      }
      await write(validMirrorSpec({ ...(await editedSpec(context, mirror, edit, field)), state: 'Running' }));
      return {};
    }
    if (phase === 'completed') {
      throw new ApiError(
        'failedPrecondition',
        `mirror ${mirror.name} completed its initial load and cannot be resumed`,
      );
    }
    if (mirror.spec.state === 'Paused') await write({ ...mirror.spec, state: 'Running' });
    else if (phase === 'failed') await store.requestMirrorRetry(mirror.name);
    return { ok: true, errorMessage: '' };
  }

  // Not in the interface (its clients have no call for it): the path and the
  // shape of PeerDB's ListMirrors, for `tributary mirrors list` and scripts.
  app.get('/api/v1/mirrors/list', async () => ({
    mirrors: (await store.listMirrors())
      .filter((mirror) => !mirror.deleting)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .map((mirror) => ({
        name: mirror.name,
        workflowId: workflowId(mirror),
        sourceName: mirror.spec.sourcePeer,
        destinationName: mirror.spec.destinationPeer,
        createdAt: mirror.createdAt.toISOString(),
        isCdc: true,
      })),
  }));

  app.post('/api/v1/mirrors/status', { config: { errorShape: 'status' } }, async (request, reply) => {
    const { body } = parseRequest(mirrorStatusRequest, request);
    const mirror = await store.getMirror(body.flowJobName);
    const stored = await catalog.getRuntime(body.flowJobName);
    // Created again under a dropped mirror's name: a runtime terminated before the
    // resource was created is the old mirror's.
    const runtime =
      mirror && !mirror.deleting && stored?.phase === 'terminated' && stored.updatedAt < mirror.createdAt
        ? undefined
        : stored;
    if (!mirror && runtime?.phase !== 'terminated') {
      reply.code(404);
      return {
        flowJobName: body.flowJobName,
        errorMessage: `mirror ${body.flowJobName} not found`,
        currentFlowState: 'STATUS_UNKNOWN',
        ok: false,
      };
    }
    const state: FlowState =
      mirror?.deleting && runtime?.phase !== 'terminated'
        ? 'STATUS_TERMINATING'
        : runtime
          ? flowStateByPhase[runtime.phase]
          : 'STATUS_SETUP';
    const slotHealth = await catalog.getSlotHealth(body.flowJobName);
    const lagSeconds = lagSecondsOf(runtime);
    // Beyond the interface (docs/api.md): each table's state and what CDC applied to it.
    const tables = runtime ? await catalog.listTables(body.flowJobName) : [];
    const status = {
      flowJobName: body.flowJobName,
      // Failed for good: the engine's error. Otherwise what keeps it from
      // moving: a fault being retried (the state stays as it is and `ok` true),
      // or what the operator saw keep its engine pod from running (crash loop,
      // OOM kill, image pull).
      errorMessage:
        runtime?.phase === 'failed'
          ? (runtime.errorMessage ?? '')
          : (runtime?.retryingError ?? (await catalog.getEngineProblem(body.flowJobName)) ?? ''),
      currentFlowState: state,
      ok: true,
      // Beyond the interface (docs/api.md): a step that makes no progress.
      ...(runtime?.stall && runtime.phase !== 'failed'
        ? { stall: { step: runtime.stall.step, since: runtime.stall.since.toISOString() } }
        : {}),
      // Beyond the interface (docs/api.md): lag in seconds from commit times.
      ...(lagSeconds === undefined ? {} : { lagSeconds }),
      // Beyond the interface (docs/api.md): the slot at the source, in every state.
      ...(slotHealth && mirror ? { slotHealth: slotHealthToWire(slotHealth) } : {}),
      // Left out while empty, as protojson leaves out an empty repeated field.
      ...(tables.length > 0 ? { tables: tables.map(tableStatusView) } : {}),
    };
    if (!body.includeFlowInfo || !mirror) return status;
    const [source, destination, clones] = await Promise.all([
      store.getPeer(mirror.spec.sourcePeer),
      store.getPeer(mirror.spec.destinationPeer),
      catalog.listSnapshotProgress(mirror.name),
    ]);
    return {
      ...status,
      cdcStatus: {
        config: mirrorConfigToWire(mirror),
        snapshotStatus: {
          clones: clones.map((clone) => ({
            tableName: clone.destinationTable,
            startTime: clone.startTime.toISOString(),
            numPartitionsCompleted: clone.partitionsCompleted,
            numPartitionsTotal: clone.partitionsTotal,
            numRowsSynced: clone.rowsSynced.toString(),
            avgTimePerPartitionMs:
              clone.partitionsCompleted > 0
                ? (clone.totalPartitionMs / BigInt(clone.partitionsCompleted)).toString()
                : '0',
            flowJobName: `${mirror.name}-clone-${clone.sourceTable}`,
            sourceTable: clone.sourceTable,
            fetchCompleted: clone.fetchCompleted,
            consolidateCompleted: clone.consolidateCompleted,
            mirrorName: mirror.name,
          })),
        },
        cdcSyncs: [],
        sourceType: source?.peer.kind.toUpperCase() ?? 'UNKNOWN',
        destinationType: destination?.peer.kind.toUpperCase() ?? 'UNKNOWN',
      },
    };
  });

  app.post('/api/v1/mirrors/cdc/batches', async (request) => {
    const { body } = parseRequest(batchesRequest, request);
    if (!(await store.getMirror(body.flowJobName)) && !(await catalog.getRuntime(body.flowJobName))) {
      throw new ApiError('notFound', `mirror ${body.flowJobName} not found`);
    }
    const limit = body.limit ?? 0;
    const page = Math.max(1, body.page ?? 1);
    const { batches, total } = await catalog.listBatches(body.flowJobName, {
      // Capped: beyond 2^53 the product is inexact, and the catalog writes it into SQL as text.
      limit: limit > 0 ? Math.min(limit * page, Number.MAX_SAFE_INTEGER) : 0,
      ascending: body.ascending ?? false,
      // -1 and 0 (proto3's unset) ignore the filter.
      ...(body.beforeId !== undefined && body.beforeId > 0n ? { beforeId: body.beforeId } : {}),
      ...(body.afterId !== undefined && body.afterId > 0n ? { afterId: body.afterId } : {}),
    });
    const pageRows = limit > 0 ? batches.slice((page - 1) * limit) : batches;
    return {
      cdcBatches: pageRows.map((batch) => ({
        batchId: batch.batchId.toString(),
        batch_id: batch.batchId.toString(),
        startTime: batch.startTime.toISOString(),
        endTime: batch.endTime?.toISOString() ?? null,
        numRows: batch.rowCount.toString(),
        startLsn: batch.startLsn.toString(),
        endLsn: batch.endLsn.toString(),
      })),
      total,
      page,
    };
  });

  app.post('/api/v1/mirrors/logs', async (request) => {
    const { body } = parseRequest(logsRequest, request);
    const mirror = body.flow_job_name ?? '';
    const level = body.level ?? 'ALL';
    const perPage = body.num_per_page ?? 0;
    const page = Math.max(1, body.page ?? 1);
    const beforeId = body.before_id;
    const afterId = body.after_id;
    const { entries, total } = await catalog.listLogs({
      ...(mirror ? { mirror } : {}),
      ...(level === 'ALL' ? {} : { levels: [level as LogLevel] }),
      // 0 is proto3's unset; negative ids ignore the filter.
      ...(beforeId !== undefined && beforeId > 0n ? { beforeId } : {}),
      ...(afterId !== undefined && afterId > 0n ? { afterId } : {}),
      offset: (page - 1) * perPage,
      limit: perPage,
    });
    return {
      errors: entries.map((entry) => ({
        flowName: entry.mirror,
        errorMessage: entry.message,
        errorType: entry.level.toLowerCase(),
        errorTimestamp: entry.timestampMs,
        id: Number(entry.id),
        repeatCount: entry.repeatCount,
        lastErrorTimestamp: entry.lastTimestampMs,
      })),
      total,
      page,
    };
  });
}

/** Refuses at create what the source says would fail later, naming each table and its fix. */
async function checkSource(
  context: FacadeContext,
  source: Parameters<FacadeContext['checkMirrorSource']>[0],
  mirror: Parameters<FacadeContext['checkMirrorSource']>[1],
): Promise<void> {
  let problems: string[];
  try {
    problems = await context.checkMirrorSource(source, mirror);
  } catch {
    throw new ApiError(
      'peerUnreachable',
      'invalid mirror: cannot connect to the source peer to check its tables',
    );
  }
  if (problems.length > 0) throw invalidMirror(problems.join('; '));
}

/**
 * Two mirrors on one source must not share a slot or a default publication: a
 * second mirror would read the first one's slot. Default names hash the exact
 * mirror name, so only a given replication_slot_name (or a hash clash) meets
 * another mirror's. Refused, naming the field that resolves it.
 */
async function checkSourceNamesFree(
  context: FacadeContext,
  spec: MirrorResourceSpec,
  installationId: string,
): Promise<void> {
  const slotOf = (mirror: MirrorResourceSpec) =>
    mirror.replicationSlotName ?? defaultSlotName(mirror.name, installationId);
  for (const other of await context.store.listMirrors()) {
    // Created by a concurrent request since this one's name check: the name is taken.
    if (other.name === spec.name) {
      throw new ApiError('mirrorExists', `invalid mirror: a mirror named ${spec.name} already exists`);
    }
    if (other.spec.sourcePeer !== spec.sourcePeer) continue;
    if (slotOf(other.spec) === slotOf(spec)) {
      throw invalidMirror(
        `replication slot ${slotOf(spec)} is mirror ${other.name}'s; set replication_slot_name to another name`,
      );
    }
    if (
      spec.publicationName === undefined &&
      other.spec.publicationName === undefined &&
      defaultPublicationName(other.spec.name, installationId) ===
        defaultPublicationName(spec.name, installationId)
    ) {
      throw invalidMirror(
        `publication ${defaultPublicationName(spec.name, installationId)} is mirror ${other.name}'s; create a publication of this mirror's tables and set publication_name to it`,
      );
    }
  }
}

async function checkTablesExist(
  context: FacadeContext,
  source: Parameters<FacadeContext['findMissingTables']>[0],
  mappings: readonly TableMapping[],
): Promise<void> {
  let missing: Awaited<ReturnType<FacadeContext['findMissingTables']>>;
  try {
    missing = await context.findMissingTables(
      source,
      mappings.map((mapping) => mapping.source),
    );
  } catch {
    throw new ApiError(
      'peerUnreachable',
      'invalid mirror: cannot connect to the source peer to check its tables',
    );
  }
  if (missing.length > 0) {
    throw invalidMirror(`source table(s) ${missing.map(formatTableName).join(', ')} do not exist`);
  }
}

type ConfigEdit = NonNullable<NonNullable<StateChangeRequest['flowConfigUpdate']>['cdcFlowConfigUpdate']>;

async function editedSpec(
  context: FacadeContext,
  mirror: MirrorResource,
  edit: ConfigEdit,
  field: FieldNamer,
): Promise<MirrorResourceSpec> {
  const at = (list: string, index: number) => ['flowConfigUpdate', 'cdcFlowConfigUpdate', list, index];
  const added = (edit.additional_tables ?? []).map((table, index) =>
    mappingFromWire(table, at('additional_tables', index), field),
  );
  const removed = (edit.removed_tables ?? []).map((table, index) =>
    mappingFromWire(table, at('removed_tables', index), field),
  );
  const key = (mapping: TableMapping) => formatTableName(mapping.source);
  const removedKeys = new Set(removed.map(key));
  const both = added.filter((mapping) => removedKeys.has(key(mapping)));
  if (both.length > 0) {
    throw new ApiError('invalidArgument', `table ${key(both[0] as TableMapping)} is both added and removed`);
  }
  const current = new Map(mirror.spec.tableMappings.map((mapping) => [key(mapping), mapping]));
  for (const mapping of removed) {
    if (!current.has(key(mapping)))
      throw new ApiError('invalidArgument', `table ${key(mapping)} is not in the mirror`);
  }
  for (const mapping of added) {
    if (current.has(key(mapping)))
      throw new ApiError('invalidArgument', `table ${key(mapping)} is already in the mirror`);
  }
  const kept = mirror.spec.tableMappings.filter((mapping) => !removedKeys.has(key(mapping)));
  const tableMappings = [...kept, ...added];
  checkDistinctTables(tableMappings, (index, side) =>
    index < kept.length
      ? field(['flowConfigUpdate', 'cdcFlowConfigUpdate'])
      : field([...at('additional_tables', index - kept.length), `${side}_table_identifier`]),
  );
  if (tableMappings.length === 0) throw new ApiError('invalidArgument', 'a mirror needs at least one table');
  if (added.length > 0) {
    const source = await context.store.getPeer(mirror.spec.sourcePeer);
    if (source?.peer.kind !== 'relational')
      throw invalidMirror(`source peer ${mirror.spec.sourcePeer} is gone`);
    await checkTablesExist(context, source.peer.config, added);
  }
  const optional = <T>(key: keyof MirrorResourceSpec, value: T | undefined) =>
    value === undefined ? {} : { [key]: value };
  return {
    ...mirror.spec,
    tableMappings,
    ...optional('maxBatchSize', edit.batch_size),
    ...optional('idleTimeoutSeconds', edit.idle_timeout),
    ...optional('snapshotNumRowsPerPartition', edit.snapshot_num_rows_per_partition),
    ...optional('snapshotMaxParallelWorkers', edit.snapshot_max_parallel_workers),
    ...optional('snapshotNumTablesInParallel', edit.snapshot_num_tables_in_parallel),
  };
}

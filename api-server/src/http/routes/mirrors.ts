import type { FastifyInstance } from 'fastify';
import type { LogLevel, MirrorPhase } from '../../../../engine/src/catalog/catalog.ts';
import { isSupportedDestination } from '../../../../engine/src/connectors/registry.ts';
import { flowStateByPhase } from '../../../../engine/src/control/flow-state.ts';
import {
  type MirrorResource,
  type MirrorResourceSpec,
  workflowId,
} from '../../../../engine/src/control/resources.ts';
import { ResourceExistsError } from '../../../../engine/src/control/store.ts';
import { formatTableName, type TableMapping } from '../../../../engine/src/resources/mirror.ts';
import type { FacadeContext } from '../context.ts';
import {
  checkDistinctTables,
  mappingFromWire,
  mirrorConfigToWire,
  mirrorSpecFromWire,
  parseWith,
  validMirrorSpec,
} from '../convert.ts';
import { ApiError } from '../errors.ts';
import {
  batchesRequest,
  createMirrorRequest,
  type flowStates,
  logsRequest,
  mirrorStatusRequest,
  type StateChangeRequest,
  stateChangeRequest,
} from '../wire.ts';
import { scriptsDisabledMessage } from './scripts.ts';

type FlowState = (typeof flowStates)[number];

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
    const { connection_configs: config } = parseWith(createMirrorRequest, request.body);
    const spec = mirrorSpecFromWire(config);
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
    await checkTablesExist(context, source.peer.config, spec.tableMappings);
    try {
      const mirror = await store.createMirror(spec);
      return { workflowId: workflowId(mirror) };
    } catch (error) {
      if (error instanceof ResourceExistsError) {
        throw new ApiError('mirrorExists', `invalid mirror: a mirror named ${spec.name} already exists`);
      }
      throw error;
    }
  });

  app.post('/api/v1/mirrors/state_change', async (request) => {
    const body = parseWith(stateChangeRequest, request.body);
    const mirror = await store.getMirror(body.flowJobName);
    if (!mirror || mirror.deleting) throw unknownMirror(body.flowJobName);
    const phase = await phaseOf(mirror.name);
    const edit = body.flowConfigUpdate?.cdcFlowConfigUpdate;

    if (body.requestedFlowState === 'STATUS_TERMINATING') {
      if (edit) throw new ApiError('invalidArgument', 'flowConfigUpdate: only allowed with STATUS_RUNNING');
      await store.markMirrorDeleting(mirror.name);
      return { ok: true, errorMessage: '' };
    }
    if (body.requestedFlowState === 'STATUS_PAUSED') {
      if (edit) throw new ApiError('invalidArgument', 'flowConfigUpdate: only allowed with STATUS_RUNNING');
      if (phase && !pausableFrom.includes(phase)) {
        throw new ApiError(
          'failedPrecondition',
          `mirror ${mirror.name} is ${flowStateByPhase[phase]} and cannot be paused`,
        );
      }
      if (mirror.spec.state !== 'Paused')
        await store.updateMirrorSpec(mirror.name, { ...mirror.spec, state: 'Paused' });
      return { ok: true, errorMessage: '' };
    }
    if (edit) {
      if (mirror.spec.state !== 'Paused' || phase !== 'paused') {
        throw new ApiError('failedPrecondition', `mirror ${mirror.name} must be paused before it is edited`);
      }
      const spec = validMirrorSpec({ ...(await editedSpec(context, mirror, edit)), state: 'Running' });
      await store.updateMirrorSpec(mirror.name, spec);
      return {};
    }
    if (phase === 'completed') {
      throw new ApiError(
        'failedPrecondition',
        `mirror ${mirror.name} completed its initial load and cannot be resumed`,
      );
    }
    if (mirror.spec.state === 'Paused')
      await store.updateMirrorSpec(mirror.name, { ...mirror.spec, state: 'Running' });
    else if (phase === 'failed') await store.requestMirrorRetry(mirror.name);
    return { ok: true, errorMessage: '' };
  });

  app.post('/api/v1/mirrors/status', { config: { errorShape: 'status' } }, async (request, reply) => {
    const body = parseWith(mirrorStatusRequest, request.body);
    const mirror = await store.getMirror(body.flowJobName);
    const runtime = await catalog.getRuntime(body.flowJobName);
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
    const status = {
      flowJobName: body.flowJobName,
      // Failed for good: the engine's error; otherwise what the operator saw
      // keep its engine pod from running (crash loop, OOM kill, image pull).
      errorMessage:
        runtime?.phase === 'failed'
          ? (runtime.errorMessage ?? '')
          : ((await catalog.getEngineProblem(body.flowJobName)) ?? ''),
      currentFlowState: state,
      ok: true,
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
    const body = parseWith(batchesRequest, request.body);
    if (!(await store.getMirror(body.flowJobName)) && !(await catalog.getRuntime(body.flowJobName))) {
      throw new ApiError('notFound', `mirror ${body.flowJobName} not found`);
    }
    const limit = body.limit ?? 0;
    const page = Math.max(1, body.page ?? 1);
    const { batches, total } = await catalog.listBatches(body.flowJobName, {
      // Capped: beyond 2^53 the product is inexact, and the catalog writes it into SQL as text.
      limit: limit > 0 ? Math.min(limit * page, Number.MAX_SAFE_INTEGER) : 0,
      ascending: body.ascending ?? false,
      ...(body.beforeId !== undefined && body.beforeId !== -1n ? { beforeId: body.beforeId } : {}),
      ...(body.afterId !== undefined && body.afterId !== -1n ? { afterId: body.afterId } : {}),
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
    const body = parseWith(logsRequest, request.body);
    const mirror = body.flow_job_name ?? body.flowJobName ?? '';
    const level = body.level ?? 'ALL';
    const perPage = body.num_per_page ?? body.numPerPage ?? 0;
    const page = Math.max(1, body.page ?? 1);
    const beforeId = body.before_id ?? body.beforeId;
    const afterId = body.after_id ?? body.afterId;
    const { entries, total } = await catalog.listLogs({
      ...(mirror ? { mirror } : {}),
      ...(level === 'ALL' ? {} : { levels: [level as LogLevel] }),
      ...(beforeId !== undefined && beforeId >= 0n ? { beforeId } : {}),
      ...(afterId !== undefined && afterId >= 0n ? { afterId } : {}),
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
      })),
      total,
      page,
    };
  });
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
): Promise<MirrorResourceSpec> {
  const added = [...(edit.additional_tables ?? []), ...(edit.additionalTables ?? [])].map((table, index) =>
    mappingFromWire(table, `flowConfigUpdate.cdcFlowConfigUpdate.additional_tables[${index}]`),
  );
  const removed = [...(edit.removed_tables ?? []), ...(edit.removedTables ?? [])].map((table, index) =>
    mappingFromWire(table, `flowConfigUpdate.cdcFlowConfigUpdate.removed_tables[${index}]`),
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
  checkDistinctTables(tableMappings, (index) =>
    index < kept.length
      ? 'flowConfigUpdate.cdcFlowConfigUpdate'
      : `flowConfigUpdate.cdcFlowConfigUpdate.additional_tables[${index - kept.length}]`,
  );
  if (tableMappings.length === 0) throw new ApiError('invalidArgument', 'a mirror needs at least one table');
  if (added.length > 0) {
    const source = await context.store.getPeer(mirror.spec.sourcePeer);
    if (source?.peer.kind !== 'relational')
      throw invalidMirror(`source peer ${mirror.spec.sourcePeer} is gone`);
    await checkTablesExist(context, source.peer.config, added);
  }
  const batchSize = edit.batch_size ?? edit.batchSize;
  const idleTimeout = edit.idle_timeout ?? edit.idleTimeout;
  return {
    ...mirror.spec,
    tableMappings,
    ...(batchSize !== undefined ? { maxBatchSize: batchSize } : {}),
    ...(idleTimeout !== undefined ? { idleTimeoutSeconds: idleTimeout } : {}),
  };
}

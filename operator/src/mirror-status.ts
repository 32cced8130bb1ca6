// Copies a mirror's progress from the catalog (where its engine reports) into
// the Mirror's status, and records an Event for every phase change and failure.
// Engines need no access to the Kubernetes API this way.
import type { Catalog } from '../../engine/src/catalog/catalog.ts';
import { resolveDependencies } from '../../engine/src/control/dependencies.ts';
import { flowStateByPhase } from '../../engine/src/control/flow-state.ts';
import { type MirrorResource, workflowId } from '../../engine/src/control/resources.ts';
import { type Condition, setCondition } from './conditions.ts';
import type { EnginePodProblem, EnginePods } from './engine-pods.ts';
import type { EventRecorder } from './events.ts';
import type { KubeStore } from './kube/kube-store.ts';

interface StoredStatus {
  phase?: string;
  conditions?: Condition[];
  errorMessage?: string;
}

export async function syncMirrorStatus(
  mirror: MirrorResource,
  previous: StoredStatus | undefined,
  deps: {
    store: KubeStore;
    catalog: Catalog;
    events: EventRecorder;
    uid?: string | undefined;
    /** The engine pods (StatefulSet runtime); absent when engines are not pods. */
    pods?: EnginePods | undefined;
    /** Told what keeps the engine pod from running, for tributary_operator_engine_pod_problem. */
    onPodProblem?: ((mirror: string, reason: string | undefined) => void) | undefined;
  },
): Promise<void> {
  const { catalog, store, events } = deps;
  // Read on every resync: the engine in a pod that cannot start or keeps
  // crashing cannot report it to the catalog, so the kubelet's word is the news.
  const podProblem: EnginePodProblem | undefined =
    deps.pods && !mirror.deleting && mirror.spec.state === 'Running'
      ? await deps.pods.problem(mirror.name)
      : undefined;
  const runtime = await catalog.getRuntime(mirror.name);
  const phase =
    mirror.deleting && runtime?.phase !== 'terminated'
      ? 'STATUS_TERMINATING'
      : runtime
        ? flowStateByPhase[runtime.phase]
        : 'STATUS_SETUP';
  const [{ batches }, snapshot, cdcRows] = await Promise.all([
    catalog.listBatches(mirror.name, { limit: 1, ascending: false }),
    catalog.listSnapshotProgress(mirror.name),
    catalog.cdcRowCount(mirror.name),
  ]);
  const lastBatch = batches.find((batch) => batch.endTime !== null);
  const snapshotRows = snapshot.reduce((rows, table) => rows + table.rowsSynced, 0n);
  const failed = runtime?.phase === 'failed';
  const generation = mirror.generation;
  // Only where a mirror can be held up by a missing object: before its engine
  // first starts, or resuming. A running engine already had everything, and
  // the look costs API reads (peers and their Secrets) on every resync.
  const mayWait =
    !mirror.deleting &&
    mirror.spec.state === 'Running' &&
    (phase === 'STATUS_SETUP' || phase === 'STATUS_PAUSED');
  const dependencies = mayWait ? await resolveDependencies(store, mirror) : undefined;
  const waiting = dependencies && !dependencies.ready ? dependencies : undefined;
  let conditions = previous?.conditions ?? [];
  const wasWaiting = conditions.find(
    (condition) => condition.type === 'Ready' && condition.reason.startsWith('WaitingFor'),
  );
  const previousReady = conditions.find((condition) => condition.type === 'Ready');
  conditions = setCondition(
    conditions,
    podProblem
      ? {
          type: 'Ready',
          status: 'False',
          reason: podProblem.reason,
          message: podProblem.message,
          observedGeneration: generation,
        }
      : waiting
        ? {
            type: 'Ready',
            status: 'False',
            reason: waiting.reason,
            message: waiting.message,
            observedGeneration: generation,
          }
        : {
            type: 'Ready',
            status: phase === 'STATUS_RUNNING' ? 'True' : 'False',
            reason: phase
              .replace('STATUS_', '')
              .toLowerCase()
              .replace(/^\w/, (letter) => letter.toUpperCase()),
            message: phase === 'STATUS_RUNNING' ? 'streaming changes' : `mirror is ${phase}`,
            observedGeneration: generation,
          },
  );
  conditions = setCondition(conditions, {
    type: 'Failed',
    status: failed ? 'True' : 'False',
    reason: failed ? 'EngineFailed' : 'NoFailure',
    message: failed ? (runtime?.errorMessage ?? 'failed') : '',
    observedGeneration: generation,
  });
  conditions = setCondition(conditions, {
    type: 'Progressing',
    status: phase === 'STATUS_SETUP' || phase === 'STATUS_SNAPSHOT' ? 'True' : 'False',
    reason: phase === 'STATUS_SNAPSHOT' ? 'InitialLoad' : 'Steady',
    message: phase === 'STATUS_SNAPSHOT' ? 'initial load in progress' : '',
    observedGeneration: generation,
  });
  await store.patchMirrorStatus(mirror.name, {
    observedGeneration: generation,
    phase,
    workflowId: workflowId(mirror),
    errorMessage: failed ? (runtime?.errorMessage ?? '') : (podProblem?.message ?? ''),
    conditions,
    snapshot: {
      tables: snapshot.map((table) => ({
        table: table.sourceTable,
        partitionsCompleted: table.partitionsCompleted,
        partitionsTotal: table.partitionsTotal,
        rowsSynced: table.rowsSynced.toString(),
      })),
    },
    ...(lastBatch
      ? {
          lastBatchId: lastBatch.batchId.toString(),
          lastSyncedLsn: lastBatch.endLsn.toString(),
          lastSyncTime: lastBatch.endTime?.toISOString(),
          lagSeconds: Math.max(
            0,
            Math.round((Date.now() - (lastBatch.endTime?.getTime() ?? Date.now())) / 1000),
          ),
        }
      : {}),
    rowsSynced: (snapshotRows + cdcRows).toString(),
  });
  const target = { kind: 'Mirror' as const, name: mirror.name, uid: deps.uid };
  if (deps.pods) {
    deps.onPodProblem?.(mirror.name, podProblem?.reason);
    // The facade's /api/v1/mirrors/status reads it from the catalog.
    await catalog.setEngineProblem(mirror.name, podProblem?.message ?? null);
    // Once per cause, not on every crash of a loop (the message counts restarts).
    if (podProblem && previousReady?.reason !== podProblem.reason) {
      await events.record(target, 'Warning', podProblem.reason, podProblem.message);
      await catalog.appendLog(mirror.name, 'ERROR', `engine pod: ${podProblem.message}`);
    }
  }
  if (previous?.phase !== phase) {
    await events.record(
      target,
      failed ? 'Warning' : 'Normal',
      'PhaseChanged',
      `${previous?.phase ?? 'new'} -> ${phase}`,
    );
  }
  if (waiting && wasWaiting?.message !== waiting.message) {
    await events.record(target, 'Warning', waiting.reason, waiting.message);
  }
  if (failed && previous?.errorMessage !== runtime?.errorMessage) {
    await events.record(target, 'Warning', 'MirrorFailed', runtime?.errorMessage ?? 'failed');
  }
}

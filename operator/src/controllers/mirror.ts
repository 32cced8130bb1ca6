// The Mirror controller: runs, pauses, edits and tears down each mirror's
// engine (the steps shared with standalone mode are engine/src/control/
// mirror-reconciler.ts), then copies the mirror's progress from the catalog
// (where its engine reports) into the Mirror's status and records an Event
// for every phase change and failure. Engines need no access to the
// Kubernetes API this way.
import type { Logger } from 'pino';
import {
  type Catalog,
  type EngineRuntime,
  flowStateByPhase,
  lagSecondsOf,
  type MirrorOutcome,
  MirrorReconciler,
  type MissingDependency,
  type ResourceStore,
  type TableStatusView,
  tableStatusView,
  workflowId,
} from '../../../engine/src/index.ts';
import { type Condition, setCondition } from '../conditions.ts';
import type { EnginePodProblem, EnginePods } from '../engine-pods.ts';
import type { EventRecorder } from '../events.ts';
import type { MirrorSnapshot, ReconcileStore } from '../kube/reconcile-store.ts';
import type { Controller, Requeue } from './controller.ts';

export interface MirrorControllerOptions {
  /** The resource store the steps shared with standalone mode work on (kube/kube-store.ts). */
  readonly store: ResourceStore;
  /** The Mirror as one read sees it, and the writes guarded by that read. */
  readonly objects: ReconcileStore;
  readonly catalog: Catalog;
  readonly runtime: EngineRuntime;
  readonly events: EventRecorder;
  readonly logger: Logger;
  /** The engine pods (StatefulSet runtime); absent when engines are not pods. */
  readonly pods?: EnginePods | undefined;
  /** Told what keeps the engine pod from running, for tributary_operator_engine_pod_problem. */
  readonly onPodProblem?: ((mirror: string, reason: string | undefined) => void) | undefined;
  /** Called when a mirror needs another look (its engine ended). */
  readonly requeue: (mirror: string) => void;
}

/** How often a mirror's status is refreshed from the catalog. */
export const mirrorResyncMs = 10_000;

interface MirrorStatus {
  phase?: string;
  conditions?: Condition[];
  errorMessage?: string;
  tables?: TableStatusView[];
}

export class MirrorController implements Controller<MirrorSnapshot, MirrorOutcome> {
  readonly #options: MirrorControllerOptions;
  readonly #reconciler: MirrorReconciler;

  constructor(options: MirrorControllerOptions) {
    this.#options = options;
    const { store, catalog, runtime, logger, requeue } = options;
    this.#reconciler = new MirrorReconciler({ store, catalog, runtime, logger, requeue });
  }

  fetch(name: string): Promise<MirrorSnapshot | undefined> {
    return this.#options.objects.readMirror(name);
  }

  async notFound(name: string): Promise<void> {
    await this.#reconciler.gone(name);
    this.#options.onPodProblem?.(name, undefined);
  }

  async finalizer(object: MirrorSnapshot): Promise<MirrorSnapshot | 'finalized' | undefined> {
    if (object.deleting) {
      // The teardown, then the finalizer goes and the object with it.
      await this.#reconciler.drop(object.mirror);
      return 'finalized';
    }
    return this.#options.objects.addMirrorFinalizer(object);
  }

  // No short-circuit on the generation: every resync compares the engine's
  // config with the resolved one and copies progress from the catalog.

  act(object: MirrorSnapshot): Promise<MirrorOutcome> {
    return this.#reconciler.apply(object.mirror);
  }

  // Every mirror at the resync period; one waiting for a peer or script sooner,
  // at the reconciler's recheck (docs/architecture.md).
  requeue(_object: MirrorSnapshot, outcome: MirrorOutcome): Requeue {
    return { requeueAfterMs: Math.min(mirrorResyncMs, outcome.requeueAfterMs ?? mirrorResyncMs) };
  }

  async conditions(object: MirrorSnapshot, outcome: MirrorOutcome): Promise<void> {
    const { catalog, objects, events, pods } = this.#options;
    const { mirror } = object;
    const previous = object.status as MirrorStatus | undefined;
    // Read on every resync: the engine in a pod that cannot start or keeps
    // crashing cannot report it to the catalog, so the kubelet's word is the news.
    const podProblem: EnginePodProblem | undefined =
      pods && mirror.spec.state === 'Running' ? await pods.problem(mirror.name) : undefined;
    const runtime = await catalog.getRuntime(mirror.name);
    const phase = runtime ? flowStateByPhase[runtime.phase] : 'STATUS_SETUP';
    const [{ batches }, snapshot, cdcRows, tableRows, slotHealth] = await Promise.all([
      catalog.listBatches(mirror.name, { limit: 1, ascending: false, finishedOnly: true }),
      catalog.listSnapshotProgress(mirror.name),
      catalog.cdcRowCount(mirror.name),
      catalog.listTables(mirror.name),
      // The slot as the slot health monitor last read it (engine/src/control/slot-health.ts).
      catalog.getSlotHealth(mirror.name),
    ]);
    const tables = tableRows.map(tableStatusView);
    const lastBatch = batches.find((batch) => batch.endTime !== null);
    const snapshotRows = snapshot.reduce((rows, table) => rows + table.rowsSynced, 0n);
    const failed = runtime?.phase === 'failed';
    const generation = mirror.generation;
    // Only where a mirror can be held up by a missing object: before its engine
    // first starts, or resuming. A running engine already had everything.
    const mayWait =
      mirror.spec.state === 'Running' && (phase === 'STATUS_SETUP' || phase === 'STATUS_PAUSED');
    const waiting: MissingDependency | undefined = mayWait ? outcome.waitingFor : undefined;
    const retrying = failed ? null : (runtime?.retryingError ?? null);
    // A step that makes no progress without failing (a peer that never answers).
    const stalled =
      failed || !runtime?.stall
        ? null
        : `no progress since ${runtime.stall.since.toISOString()} while waiting on ${runtime.stall.step}`;
    const conditionsFrom = (held: readonly Condition[]): Condition[] => {
      let conditions = setCondition(
        held,
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
      // Whatever the mirror's state: a paused or failed mirror's slot keeps WAL too.
      if (slotHealth) {
        conditions = setCondition(conditions, {
          type: 'SlotHealthy',
          status: slotHealth.healthy === null ? 'Unknown' : slotHealth.healthy ? 'True' : 'False',
          reason: slotHealth.reason,
          // The figures move with every read; the condition changes with the verdict only.
          message: slotHealth.healthy ? `replication slot ${slotHealth.slotName}` : slotHealth.message,
          observedGeneration: generation,
        });
      }
      // Tables stopped on a fault of their own, or holding a schema change: the mirror runs, they do not.
      const stoppedTables = tables.filter(
        (table) => table.state === 'TABLE_STATE_ERRORED' || table.state === 'TABLE_STATE_HELD',
      );
      const erroredTable = stoppedTables.some((table) => table.state === 'TABLE_STATE_ERRORED');
      conditions = setCondition(conditions, {
        type: 'TablesHealthy',
        status: stoppedTables.length > 0 ? 'False' : 'True',
        reason:
          stoppedTables.length === 0 ? 'AllTablesMoving' : erroredTable ? 'TableErrored' : 'SchemaChangeHeld',
        message: stoppedTables
          .map((table) => `${table.sourceTableIdentifier}: ${table.error?.message ?? 'errored'}`)
          .join('; '),
        observedGeneration: generation,
      });
      // A fault the engine retries by itself, or a step that stands still: the
      // mirror is not failed, but not moving either.
      return setCondition(conditions, {
        type: 'Degraded',
        status: retrying || stalled ? 'True' : 'False',
        reason: retrying ? 'Retrying' : stalled ? 'Stalled' : 'NoFault',
        message: retrying ?? stalled ?? '',
        observedGeneration: generation,
      });
    };
    // The facade's /api/v1/mirrors/status reads the pod problem from the
    // catalog. Written before the status, so that once the resource shows a
    // cause (or its end), the API already says the same.
    if (pods) await catalog.setEngineProblem(mirror.name, podProblem?.message ?? null);
    await objects.writeMirrorStatus(object, (status) => ({
      observedGeneration: generation,
      phase,
      workflowId: workflowId(mirror),
      errorMessage: failed ? (runtime?.errorMessage ?? '') : (podProblem?.message ?? ''),
      conditions: conditionsFrom((status as MirrorStatus | undefined)?.conditions ?? []),
      snapshot: {
        tables: snapshot.map((table) => ({
          table: table.sourceTable,
          partitionsCompleted: table.partitionsCompleted,
          partitionsTotal: table.partitionsTotal,
          rowsSynced: table.rowsSynced.toString(),
        })),
      },
      // Each table's state, rows applied and problem (docs/mirror-lifecycle.md, Table states).
      ...(tables.length > 0 ? { tables } : {}),
      ...(lastBatch
        ? {
            lastBatchId: lastBatch.batchId.toString(),
            lastSyncedLsn: lastBatch.endLsn.toString(),
            lastSyncTime: lastBatch.endTime?.toISOString(),
          }
        : {}),
      // From commit times (pipeline/replication-delay.ts): an idle, caught-up mirror reads 0.
      lagSeconds: lagSecondsOf(runtime),
      rowsSynced: (snapshotRows + cdcRows).toString(),
    }));
    const held = previous?.conditions ?? [];
    const wasWaiting = held.find(
      (condition) => condition.type === 'Ready' && condition.reason.startsWith('WaitingFor'),
    );
    const previousReady = held.find((condition) => condition.type === 'Ready');
    const previousDegraded = held.find((condition) => condition.type === 'Degraded');
    const previousSlot = held.find((condition) => condition.type === 'SlotHealthy');
    const target = { kind: 'Mirror' as const, name: mirror.name, uid: object.uid };
    if (pods) {
      this.#options.onPodProblem?.(mirror.name, podProblem?.reason);
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
    if (retrying && previousDegraded?.message !== retrying) {
      await events.record(target, 'Warning', 'Retrying', retrying);
    }
    if (!retrying && stalled && previousDegraded?.message !== stalled) {
      await events.record(target, 'Warning', 'Stalled', stalled);
    }
    // Once per cause: a slot that became unhealthy, and one healthy again.
    if (slotHealth?.healthy === false && previousSlot?.reason !== slotHealth.reason) {
      await events.record(target, 'Warning', 'SlotUnhealthy', slotHealth.message);
    } else if (slotHealth?.healthy && previousSlot?.status === 'False') {
      await events.record(target, 'Normal', 'SlotHealthy', slotHealth.message);
    }
    // A table's move is an Event, as a phase change is (a Warning when it stopped).
    const previousStates = new Map(
      (previous?.tables ?? []).map((table) => [table.sourceTableIdentifier, table.state]),
    );
    for (const table of tables) {
      const before = previousStates.get(table.sourceTableIdentifier);
      if (before === table.state) continue;
      const stopped = table.state === 'TABLE_STATE_ERRORED' || table.state === 'TABLE_STATE_HELD';
      // A table seen for the first time is news only when it stopped: a mirror of
      // many tables would otherwise record one Event per table at its first status.
      if (before === undefined && !stopped) continue;
      await events.record(
        target,
        stopped ? 'Warning' : 'Normal',
        'TableStateChanged',
        `${table.sourceTableIdentifier}: ${before ?? 'new'} -> ${table.state}${table.error ? `: ${table.error.message}` : ''}`,
      );
    }
  }
}

// What the plugin shows of a Mirror, computed once from the object as the API
// server returns it: one row of `list`, the whole of `status`. The table and
// the JSON or YAML output print the same view, so they never disagree. The
// object's fields are the CRD's (operator/src/crds/schemas.ts); a status the
// operator has not written yet reads as empty.
import type { MirrorCrSpec, MirrorCrStatus } from '../crds/schemas.ts';
import { apiNameOf } from '../kube/object-names.ts';

export interface MirrorObject {
  readonly metadata: {
    readonly name?: string;
    readonly namespace?: string;
    readonly generation?: number;
    readonly resourceVersion?: string;
    readonly deletionTimestamp?: string;
    readonly annotations?: Readonly<Record<string, string>>;
  };
  readonly spec: Pick<MirrorCrSpec, 'sourcePeer' | 'destinationPeer' | 'state'> & {
    readonly script?: string | undefined;
  };
  readonly status?: MirrorCrStatus;
}

type Condition = NonNullable<MirrorCrStatus['conditions']>[number];
type TableStatus = NonNullable<MirrorCrStatus['tables']>[number];

export interface ConditionView {
  readonly type: string;
  readonly status: 'True' | 'False' | 'Unknown';
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime: string;
}

export interface MirrorSummary {
  readonly namespace: string;
  readonly name: string;
  readonly source: string;
  readonly destination: string;
  /** spec.state: what was asked (Running or Paused). */
  readonly state: string;
  /** status.phase: where the mirror is (STATUS_RUNNING, …); null before the operator's first status. */
  readonly phase: string | null;
  /** The Ready condition's status. */
  readonly ready: ConditionView['status'] | null;
  readonly lagSeconds: number | null;
  readonly tables: number;
  /** Tables stopped on a fault of their own (TABLE_STATE_ERRORED). */
  readonly erroredTables: number;
  /** Tables holding a schema change (TABLE_STATE_HELD). */
  readonly heldTables: number;
}

export interface TableView {
  readonly source: string;
  readonly destination: string;
  readonly state: TableStatus['state'];
  readonly stateSince: string;
  /** Rows the initial load copied, and its ranges (partitions) copied of all; null without an initial load. */
  readonly initialLoad: {
    readonly rows: string;
    readonly partitionsCompleted: number;
    readonly partitionsTotal: number;
  } | null;
  readonly rowsApplied: TableStatus['rowsApplied'];
  /** Commit time of the last transaction applied to the table. */
  readonly lastCommitTime: string | null;
  /** Why the table is errored or held, and the LSN after which its changes wait. */
  readonly problem: {
    readonly kind: string;
    readonly message: string;
    readonly remedy: string;
    readonly behindLsn: string | null;
  } | null;
}

export interface SlotView {
  /** From the SlotHealthy condition: healthy, unhealthy, or unknown (the source could not be read). */
  readonly health: 'healthy' | 'unhealthy' | 'unknown';
  readonly reason: string;
  readonly message: string;
  readonly since: string;
}

export interface MirrorStatusView {
  readonly namespace: string;
  readonly name: string;
  /** The /api/v1 name, when it is not the object name (kube/object-names.ts). */
  readonly apiName: string | null;
  readonly source: string;
  readonly destination: string;
  readonly script: string | null;
  readonly state: string;
  readonly phase: string | null;
  readonly deleting: boolean;
  /** The status was computed from an older spec than the object's (the operator has not caught up). */
  readonly statusBehindSpec: boolean;
  readonly ready: ConditionView | null;
  readonly errorMessage: string | null;
  readonly lagSeconds: number | null;
  readonly rowsSynced: string | null;
  readonly lastSyncTime: string | null;
  readonly lastSyncedLsn: string | null;
  readonly slot: SlotView | null;
  readonly tables: readonly TableView[];
  readonly conditions: readonly ConditionView[];
}

export const slotConditionType = 'SlotHealthy';

function conditionView(condition: Condition): ConditionView {
  return {
    type: condition.type,
    status: condition.status,
    reason: condition.reason,
    message: condition.message,
    lastTransitionTime: condition.lastTransitionTime,
  };
}

function conditionOf(mirror: MirrorObject, type: string): Condition | undefined {
  return mirror.status?.conditions?.find((condition) => condition.type === type);
}

const errored: TableStatus['state'] = 'TABLE_STATE_ERRORED';
const held: TableStatus['state'] = 'TABLE_STATE_HELD';

export function mirrorSummary(mirror: MirrorObject): MirrorSummary {
  const tables = mirror.status?.tables ?? [];
  return {
    namespace: mirror.metadata.namespace ?? '',
    name: mirror.metadata.name ?? '',
    source: mirror.spec.sourcePeer,
    destination: mirror.spec.destinationPeer,
    state: mirror.spec.state,
    phase: mirror.status?.phase ?? null,
    ready: conditionOf(mirror, 'Ready')?.status ?? null,
    lagSeconds: mirror.status?.lagSeconds ?? null,
    tables: tables.length,
    erroredTables: tables.filter((table) => table.state === errored).length,
    heldTables: tables.filter((table) => table.state === held).length,
  };
}

export function mirrorStatusView(mirror: MirrorObject): MirrorStatusView {
  const status = mirror.status;
  const name = mirror.metadata.name ?? '';
  const apiName = apiNameOf(mirror.metadata);
  const loads = new Map((status?.snapshot?.tables ?? []).map((load) => [load.table, load]));
  const slot = conditionOf(mirror, slotConditionType);
  const ready = conditionOf(mirror, 'Ready');
  return {
    namespace: mirror.metadata.namespace ?? '',
    name,
    apiName: apiName === name ? null : apiName,
    source: mirror.spec.sourcePeer,
    destination: mirror.spec.destinationPeer,
    script: mirror.spec.script ?? null,
    state: mirror.spec.state,
    phase: status?.phase ?? null,
    deleting: mirror.metadata.deletionTimestamp !== undefined,
    statusBehindSpec:
      status?.observedGeneration !== undefined &&
      mirror.metadata.generation !== undefined &&
      status.observedGeneration < mirror.metadata.generation,
    ready: ready ? conditionView(ready) : null,
    errorMessage: status?.errorMessage || null,
    lagSeconds: status?.lagSeconds ?? null,
    rowsSynced: status?.rowsSynced ?? null,
    lastSyncTime: status?.lastSyncTime ?? null,
    lastSyncedLsn: status?.lastSyncedLsn ?? null,
    slot: slot
      ? {
          health: slot.status === 'True' ? 'healthy' : slot.status === 'False' ? 'unhealthy' : 'unknown',
          reason: slot.reason,
          message: slot.message,
          since: slot.lastTransitionTime,
        }
      : null,
    tables: (status?.tables ?? []).map((table) => {
      const load = loads.get(table.sourceTableIdentifier);
      return {
        source: table.sourceTableIdentifier,
        destination: table.destinationTableIdentifier,
        state: table.state,
        stateSince: table.stateSince,
        initialLoad: load
          ? {
              rows: load.rowsSynced,
              partitionsCompleted: load.partitionsCompleted,
              partitionsTotal: load.partitionsTotal,
            }
          : null,
        rowsApplied: table.rowsApplied,
        lastCommitTime: table.lastCommitTime ?? null,
        problem: table.error ? { ...table.error, behindLsn: table.behindLsn ?? null } : null,
      };
    }),
    conditions: (status?.conditions ?? []).map(conditionView),
  };
}

// The engine's front door: everything the operator, the api-server, bin/ and
// scripts/ may use of the engine, and nothing else. A module not re-exported
// here is the engine's own, free to move or change without a caller outside
// noticing (the PostgreSQL connector's folders, the Kafka destination's parts,
// the change applier's pieces); `scripts/front-doors.test.ts` fails on an
// import that goes around this file. Names are listed one by one, not
// `export *`, so widening the door is a visible change of this file.
//
// Grouped by what the callers do with them: the resource model they validate,
// the catalog they read and migrate, the peer checks and source inspections
// the API and the operator run, the control plane they share, and the process
// plumbing of every role.

// --- catalog: what engines report (phases, batches, logs), in PostgreSQL or PGlite
export {
  type AuditRetention,
  auditRetentionDefaults,
  auditRetentionInput,
  auditRetentionSchema,
  auditRetentionVariables,
} from './catalog/audit-retention.ts';
export {
  type AuditEntry,
  type AuditQuery,
  type Catalog,
  type LogEntry,
  type LogLevel,
  type LogLevelFilter,
  logLevelFilters,
  type MirrorPhase,
  type MirrorRuntime,
  mirrorPhases,
  type NewAuditEntry,
  type SlotHealth,
  type SlotHealthReason,
  type TableState,
  type TableStateName,
  type TableStatus,
  tableStateNames,
  tableStates,
} from './catalog/catalog.ts';
export {
  type LogRetention,
  logRetentionDefaults,
  logRetentionFromEnvironment,
  logRetentionInput,
  logRetentionSchema,
  logRetentionVariables,
} from './catalog/log-retention.ts';
export { migrate } from './catalog/migrations.ts';
export { PostgresCatalog, type SqlExecutor } from './catalog/postgres-catalog.ts';
export { checkPeer, describeCheckFailure, type PeerCheckResult } from './connectors/peer-check.ts';
export {
  type BrowsedColumn,
  type BrowsedTable,
  browseColumns,
  browseSchemas,
  browseTables,
} from './connectors/postgres/source/browse.ts';
export {
  checkMirrorSource,
  findMissingTables,
  type NewMirrorSource,
} from './connectors/postgres/source/inspect.ts';
export { defaultPublicationName, defaultSlotName } from './connectors/postgres/source/slot.ts';
// --- peers and sources, as the API and the operator check them
export { isSupportedDestination, resyncsOnline } from './connectors/registry.ts';
// --- the control plane both modes share (docs/architecture.md, "Control plane")
export { configHash } from './control/config-hash.ts';
export type { MissingDependency } from './control/dependencies.ts';
export type {
  EngineRunConfig,
  EngineRuntime,
  EngineTarget,
  RunningEngine,
} from './control/engine-runtime.ts';
export { type FlowState, flowStateByPhase } from './control/flow-state.ts';
export { InProcessEngineRuntime, teardownWithConfig } from './control/in-process-runtime.ts';
export {
  defaultNoticeIntervalMs,
  MirrorNoticeWatch,
  noticeIntervalMsFromEnvironment,
} from './control/mirror-notices.ts';
export { type MirrorOutcome, MirrorReconciler } from './control/mirror-reconciler.ts';
export {
  type MirrorResource,
  type MirrorResourceSpec,
  mirrorDesiredStates,
  mirrorResourceSpecSchema,
  type PeerResource,
  type ScriptResource,
  scriptLanguages,
  workflowId,
} from './control/resources.ts';
export {
  defaultSlotHealthIntervalMs,
  SlotHealthMonitor,
  slotHealthIntervalMsFromEnvironment,
} from './control/slot-health.ts';
export {
  type PeerListEntry,
  PeerSecretsUnavailableError,
  ResourceConflictError,
  type ResourceEvent,
  ResourceExistsError,
  ResourceInvalidError,
  ResourceNotFoundError,
  type ResourceStore,
} from './control/store.ts';
export { type TableStatusView, tableStatusView } from './control/table-status.ts';
export { WorkQueue } from './control/work-queue.ts';
// --- resources: the shapes users declare (the API's wire and the CRDs derive from them)
export { type EngineConfig, engineConfigSchema } from './engine-config.ts';
// --- errors: the one engine error and its retry policy per kind
export { EngineError, type ErrorKind, errorKinds, errorPolicy, type RetryPolicy } from './errors.ts';
export { warnUnverifiedHostKey } from './net/ssh-tunnel.ts';
// --- every role's process plumbing: logs, metrics, warnings
export { EngineMetrics } from './observability/engine-metrics.ts';
export { createProcessLogger, isLogFormatSetting, logFormats } from './observability/logger.ts';
export { type MetricsServer, serveMetrics } from './observability/metrics-server.ts';
export {
  type Notifier,
  notificationFormats,
  type WebhookConfig,
  WebhookNotifier,
  webhookConfigFromEnvironment,
} from './observability/notifier.ts';
export { logProcessWarnings } from './observability/process-warnings.ts';
export { SlotHealthMetrics, type SlotHealthSink } from './observability/slot-health-metrics.ts';
export {
  type MirrorTablesSample,
  registerTableMetrics,
  tableMetricNames,
} from './observability/table-metrics.ts';
export { defaultStallAfterMs, stallAfterMsFromEnvironment } from './pipeline/progress-watchdog.ts';
export { lagSecondsOf } from './pipeline/replication-delay.ts';
export type { SupervisedOutcome } from './pipeline/supervisor.ts';
export {
  defaultTemporaryStorageLimit,
  type EnginePodSettings,
  engineHeapMegabytes,
  enginePodDefaultsSchema,
  mergePodSettings,
} from './resources/engine-pod.ts';
export {
  formatTableName,
  initialSnapshotOnlyMessage,
  type MirrorSpec,
  mirrorSpecFields,
  mirrorSpecSchema,
  parseTableIdentifier,
  retainedWalLimitMessages,
  retainedWalLimitProblem,
  rowFilterSchema,
  type SchemaChangePolicy,
  type TableMapping,
  type TableName,
  tableMappingSchema,
  tableNameSchema,
} from './resources/mirror.ts';
export { resourceNameRule, resourceNameSchema } from './resources/names.ts';
export {
  type AnalyticsConfig,
  allPeerSecretPaths,
  analyticsConfigSchema,
  type DatawarehouseConfig,
  datawarehouseConfigSchema,
  isPeerSecretPath,
  joinPeerSecrets,
  maskPeerSecrets,
  type Peer,
  type PeerKind,
  partitioners,
  peerKinds,
  peerSchema,
  peerSecretPaths,
  type RelationalConfig,
  relationalConfigSchema,
  type SshConfig,
  type StreamConfig,
  saslMechanisms,
  splitPeerSecrets,
  sshConfigFields,
  sshConfigSchema,
  streamCompressions,
  streamConfigFields,
  streamConfigSchema,
} from './resources/peer.ts';
export type { LuaInput } from './scripting/lua-vm.ts';
export { luaSyntaxError } from './scripting/syntax-check.ts';
export { type ScriptTrial, tryScript } from './scripting/try-script.ts';

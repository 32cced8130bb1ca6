// Between the interface's wire shapes and the control plane's resources.
import type { FastifyRequest } from 'fastify';
import type { z } from 'zod';
import {
  formatTableName,
  type MirrorResource,
  type MirrorResourceSpec,
  maskPeerSecrets,
  mirrorResourceSpecSchema,
  type Peer,
  type PeerKind,
  parseTableIdentifier,
  peerSchema,
  type SchemaChangePolicy,
  type SlotHealth,
  type TableMapping,
  type TableName,
  tableNameSchema,
} from '../../../engine/src/index.ts';
import { ApiError, describeValidation, formatPath } from './errors.ts';
import { normalizeBody, snakeCase } from './protojson.ts';
import type { CreateMirrorRequest, CreatePeerRequest, SlotHealthWire, TableMappingWire } from './wire.ts';

/** Names a field of the request as the client spelled it: `connection_configs.table_mappings[0]`. */
export type FieldNamer = (path: readonly PropertyKey[]) => string;

const configKeys = {
  relational: 'relational_config',
  analytics: 'analytics_config',
  datawarehouse: 'datawarehouse_config',
  stream: 'stream_config',
} as const satisfies Record<PeerKind, string>;

const readConfigKeys = {
  relational: 'relationalConfig',
  analytics: 'analyticsConfig',
  datawarehouse: 'datawarehouseConfig',
  stream: 'streamConfig',
} as const satisfies Record<PeerKind, string>;

function camel(key: string): string {
  return key.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());
}

function camelKeys(value: unknown): unknown {
  if (Array.isArray(value) || value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([key, child]) => [camel(key), camelKeys(child)]));
}

/** The peer the request describes; the config must be the one its type names. */
export function peerFromWire(request: CreatePeerRequest['peer'], field: FieldNamer): Peer {
  const kind = request.type.toLowerCase() as PeerKind;
  const given = Object.values(configKeys).filter((key) => request[key] !== undefined);
  const expected = configKeys[kind];
  if (given.length !== 1 || given[0] !== expected) {
    throw new ApiError(
      'invalidArgument',
      `${field(['peer', expected])}: required for type ${request.type}, and no other config`,
    );
  }
  const config = camelKeys(request[expected]) as Record<string, unknown>;
  if (kind === 'stream' && typeof config.servers === 'string') {
    config.servers = config.servers.split(',').map((server) => server.trim());
  }
  const parsed = peerSchema.safeParse({ name: request.name, kind, config });
  if (!parsed.success) {
    // Report the request's field paths as the client spelled them, not the resource's.
    const wirePath = (path: readonly PropertyKey[]) =>
      path[0] === 'config'
        ? [
            field([
              'peer',
              expected,
              ...path.slice(1).map((part) => (typeof part === 'string' ? snakeCase(part) : part)),
            ]),
          ]
        : [field(['peer', ...path])];
    throw new ApiError('invalidArgument', describeValidation(parsed.error, wirePath));
  }
  return parsed.data;
}

/** A peer as read: type as upper-case kind, camelCase config, secrets masked. */
export function peerToWire(peer: Peer): Record<string, unknown> {
  const masked = maskPeerSecrets(peer);
  return { name: peer.name, type: peer.kind.toUpperCase(), [readConfigKeys[peer.kind]]: masked.config };
}

function excludedColumns(exclude: string | readonly string[] | undefined): string[] {
  if (exclude === undefined) return [];
  const list = typeof exclude === 'string' ? exclude.split(',') : exclude;
  return list.map((column) => column.trim()).filter((column) => column.length > 0);
}

function tableName(identifier: string, field: string): TableName {
  let parsed: TableName;
  try {
    parsed = parseTableIdentifier(identifier);
  } catch {
    throw new ApiError('invalidArgument', `${field}: expected schema.table`);
  }
  if (!tableNameSchema.safeParse(parsed).success) {
    throw new ApiError('invalidArgument', `${field}: schema and table names are 1 to 63 characters`);
  }
  return parsed;
}

/**
 * The spec as the store will hold it, validated against the resource schema:
 * the store re-validates on every read, so a spec that slipped past the wire
 * schema would be stored and then break every read of the mirror list.
 */
export function validMirrorSpec(spec: MirrorResourceSpec): MirrorResourceSpec {
  const parsed = mirrorResourceSpecSchema.safeParse(spec);
  if (!parsed.success)
    throw new ApiError('invalidArgument', `invalid mirror: ${describeValidation(parsed.error)}`);
  return parsed.data;
}

/** One table mapping; `path` is where it is in the request, `field` names it for the client. */
export function mappingFromWire(
  mapping: TableMappingWire,
  path: readonly PropertyKey[],
  field: FieldNamer,
): TableMapping {
  return {
    source: tableName(mapping.source_table_identifier, field([...path, 'source_table_identifier'])),
    destination: tableName(
      mapping.destination_table_identifier,
      field([...path, 'destination_table_identifier']),
    ),
    exclude: excludedColumns(mapping.exclude),
    ...(mapping.row_filter !== undefined ? { rowFilter: mapping.row_filter } : {}),
    columns: (mapping.columns ?? []).map((column) => ({
      sourceName: column.source_name,
      ...(column.ordering !== undefined ? { ordering: column.ordering } : {}),
    })),
  };
}

/**
 * Each source and each destination table at most once in a mirror: the engine
 * routes changes by source table, so a second mapping of one would be loaded by
 * the snapshot and then silently left behind by CDC.
 */
export function checkDistinctTables(
  mappings: readonly TableMapping[],
  fieldOf: (index: number, side: 'source' | 'destination') => string,
): void {
  const seen = { source: new Set<string>(), destination: new Set<string>() };
  mappings.forEach((mapping, index) => {
    for (const side of ['source', 'destination'] as const) {
      const key = JSON.stringify([mapping[side].schema, mapping[side].table]);
      if (seen[side].has(key)) {
        throw new ApiError(
          'invalidArgument',
          `${fieldOf(index, side)}: ${formatTableName(mapping[side])} is in more than one mapping`,
        );
      }
      seen[side].add(key);
    }
  });
}

export function mirrorSpecFromWire(
  request: CreateMirrorRequest['connection_configs'],
  field: FieldNamer,
): MirrorResourceSpec {
  const optional = <T>(key: string, value: T | undefined) => (value === undefined ? {} : { [key]: value });
  const path = (index: number) => ['connection_configs', 'table_mappings', index];
  const tableMappings = request.table_mappings.map((mapping, index) =>
    mappingFromWire(mapping, path(index), field),
  );
  checkDistinctTables(tableMappings, (index, side) => field([...path(index), `${side}_table_identifier`]));
  // An initial load needs a slot created with an exported snapshot, so it would
  // drop and re-create the adopted slot, which an adopted slot never is.
  if (request.adopt_existing_slot && request.do_initial_snapshot) {
    throw new ApiError(
      'invalidArgument',
      `${field(['connection_configs', 'adopt_existing_slot'])}: an adopted slot is used as it is and never dropped, but ${field(['connection_configs', 'do_initial_snapshot'])} needs a new slot for its snapshot; set ${field(['connection_configs', 'do_initial_snapshot'])} to false (the adopted slot streams from where it is), or leave the slot to the mirror`,
    );
  }
  return validMirrorSpec({
    name: request.flow_job_name,
    sourcePeer: request.source_name,
    destinationPeer: request.destination_name,
    tableMappings,
    maxBatchSize: request.max_batch_size ?? 1_000_000,
    idleTimeoutSeconds: request.idle_timeout_seconds ?? 60,
    doInitialSnapshot: request.do_initial_snapshot,
    snapshotNumRowsPerPartition: request.snapshot_num_rows_per_partition ?? 1_000_000,
    snapshotMaxParallelWorkers: request.snapshot_max_parallel_workers ?? 4,
    snapshotNumTablesInParallel: request.snapshot_num_tables_in_parallel ?? 1,
    resync: request.resync ?? false,
    adoptExistingSlot: request.adopt_existing_slot ?? false,
    failoverSlot: request.failover_slot ?? false,
    retainedWalLimitAction: request.retained_wal_limit_action ?? 'Alert',
    ...optional('maxRetainedWalBytes', request.max_retained_wal_bytes),
    heartbeatIntervalSeconds: request.heartbeat_interval_seconds ?? 30,
    streaming: request.streaming ?? false,
    initialSnapshotOnly: request.initial_snapshot_only ?? false,
    system: request.system ?? 'Q',
    schemaChanges: schemaChangePolicyOf(request.schema_changes),
    state: 'Running',
    ...optional('publicationName', request.publication_name),
    ...optional('replicationSlotName', request.replication_slot_name),
    ...optional('softDeleteColName', request.soft_delete_col_name),
    ...optional('syncedAtColName', request.synced_at_col_name),
    ...optional('script', request.script),
  } as MirrorResourceSpec);
}

/** The spec's schema change policy of the request's enum (an addition to the interface). */
function schemaChangePolicyOf(
  wire: CreateMirrorRequest['connection_configs']['schema_changes'],
): SchemaChangePolicy {
  switch (wire) {
    case 'SCHEMA_CHANGES_HOLD':
      return 'hold';
    case 'SCHEMA_CHANGES_IGNORE':
      return 'ignore';
    default:
      return 'apply';
  }
}

/** The configuration as the status endpoint shows it (camelCase, 64-bit values as text). */
export function mirrorConfigToWire(mirror: MirrorResource): Record<string, unknown> {
  const { spec } = mirror;
  return {
    flowJobName: spec.name,
    sourceName: spec.sourcePeer,
    destinationName: spec.destinationPeer,
    tableMappings: spec.tableMappings.map((mapping) => ({
      sourceTableIdentifier: formatTableName(mapping.source),
      destinationTableIdentifier: formatTableName(mapping.destination),
      exclude: mapping.exclude,
      rowFilter: mapping.rowFilter ?? '',
      columns: mapping.columns,
      partitionKey: '',
    })),
    maxBatchSize: spec.maxBatchSize,
    idleTimeoutSeconds: String(spec.idleTimeoutSeconds),
    heartbeatIntervalSeconds: spec.heartbeatIntervalSeconds,
    publicationName: spec.publicationName ?? '',
    replicationSlotName: spec.replicationSlotName ?? '',
    doInitialSnapshot: spec.doInitialSnapshot,
    snapshotNumRowsPerPartition: spec.snapshotNumRowsPerPartition,
    snapshotMaxParallelWorkers: spec.snapshotMaxParallelWorkers,
    snapshotNumTablesInParallel: spec.snapshotNumTablesInParallel,
    resync: spec.resync,
    initialSnapshotOnly: spec.initialSnapshotOnly,
    softDelete: spec.softDeleteColName !== undefined,
    softDeleteColName: spec.softDeleteColName ?? '',
    syncedAtColName: spec.syncedAtColName ?? '',
    script: spec.script ?? '',
    system: spec.system,
    schemaChanges: `SCHEMA_CHANGES_${spec.schemaChanges.toUpperCase()}`,
    cdcStagingPath: '',
    snapshotStagingPath: '',
  };
}

const maxIgnoredFieldsLogged = 50;

/**
 * The request's body read as the original service reads it (protojson.ts),
 * then validated; errors name fields as the client spelled them. Each field the
 * schema does not know is logged once, by path and endpoint, never its value.
 */
export function parseRequest<Schema extends z.ZodType>(
  schema: Schema,
  request: Pick<FastifyRequest, 'body' | 'log' | 'routeOptions'>,
): { body: z.infer<Schema>; field: FieldNamer } {
  const normalized = normalizeBody(schema, request.body ?? {});
  // Field names come from the client: a bounded number of lines, each name cut short.
  const ignored = [...new Set(normalized.ignoredFields)];
  for (const path of ignored.slice(0, maxIgnoredFieldsLogged)) {
    request.log.warn(
      { field: path.slice(0, 200), endpoint: request.routeOptions.url },
      'ignored unknown request field',
    );
  }
  if (ignored.length > maxIgnoredFieldsLogged) {
    request.log.warn(
      { more: ignored.length - maxIgnoredFieldsLogged, endpoint: request.routeOptions.url },
      'ignored more unknown request fields',
    );
  }
  const field: FieldNamer = (path) => formatPath(normalized.clientPath(path));
  const parsed = schema.safeParse(normalized.value);
  if (!parsed.success) {
    throw new ApiError('invalidArgument', describeValidation(parsed.error, normalized.clientPath));
  }
  return { body: parsed.data, field };
}

/**
 * A mirror's slot health as /api/v1/mirrors/status answers it: protojson's
 * shape (camelCase, 64-bit values as decimal strings, unset fields left out).
 */
export function slotHealthToWire(health: SlotHealth): SlotHealthWire {
  const { reading } = health;
  const bytes = (value: bigint | null | undefined) =>
    value === null || value === undefined ? undefined : value.toString();
  const wire: SlotHealthWire = {
    slotName: health.slotName,
    checkedAt: health.checkedAt.toISOString(),
    status: health.healthy === null ? 'Unknown' : health.healthy ? 'True' : 'False',
    reason: health.reason,
    message: health.message,
  };
  if (!reading) return wire;
  const retainedWalBytes = bytes(reading.retainedWalBytes);
  const unconfirmedBytes = bytes(reading.unconfirmedBytes);
  const safeWalSizeBytes = bytes(reading.safeWalSizeBytes);
  return {
    ...wire,
    active: reading.active,
    ...(reading.walStatus === null ? {} : { walStatus: reading.walStatus }),
    ...(retainedWalBytes === undefined ? {} : { retainedWalBytes }),
    ...(unconfirmedBytes === undefined ? {} : { unconfirmedBytes }),
    ...(safeWalSizeBytes === undefined ? {} : { safeWalSizeBytes }),
    ...(reading.invalidationReason === null ? {} : { invalidationReason: reading.invalidationReason }),
  };
}

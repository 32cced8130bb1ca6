// Request and response shapes of the /api/v1 interface, as zod schemas: the
// single source of the routes' validation and of the OpenAPI document. Request
// fields are declared once, under their proto name (snake_case) or, where the
// interface only ever shows it so, their lowerCamel JSON name; protojson.ts
// takes either spelling of every field, integers as strings, enums by number,
// and drops nulls, zero values of optional fields and unknown fields before
// these schemas validate.
import { z } from 'zod';
import {
  analyticsConfigSchema,
  datawarehouseConfigSchema,
  logLevelFilters,
  mirrorSpecFields,
  type PeerKind,
  relationalConfigSchema,
  resourceNameSchema,
  rowFilterSchema,
  sshConfigFields,
  streamConfigFields,
} from '../../../engine/src/index.ts';
import { protoEnum } from './protojson.ts';

// --- peers -----------------------------------------------------------------

/** Peer kinds by the interface's type codes (its DBType numbers). */
export const peerTypes = {
  DATAWAREHOUSE: 1,
  RELATIONAL: 3,
  ANALYTICS: 8,
  STREAM: 9,
} as const satisfies Record<Uppercase<PeerKind>, number>;

type SnakeCase<Name extends string> = Name extends `${infer Head}${infer Tail}`
  ? `${Head extends Lowercase<Head> ? Head : `_${Lowercase<Head>}`}${SnakeCase<Tail>}`
  : Name;

/** A field as the wire takes it: its engine rule, with an engine default left to the engine. */
type WireField<Field> = Field extends z.ZodDefault<infer Inner> ? z.ZodOptional<Inner> : Field;

type ProtoShape<Shape extends z.ZodRawShape> = {
  [Key in keyof Shape as Key extends string ? SnakeCase<Key> : never]: WireField<Shape[Key]>;
};

function snakeCaseName(name: string): string {
  return name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/**
 * A peer config's wire shape, derived from the engine's schema so that one
 * rule holds in both: each field under its proto name (snake_case, as the
 * interface declares it), with the engine's rule for it. Two things differ,
 * on purpose:
 * - a field the engine defaults is optional here and gets its default from
 *   the engine's schema, which `peerFromWire` (convert.ts) applies after the
 *   conversion: protojson drops zero values, and a default applied in two
 *   places could drift apart;
 * - rules across fields (an SSH tunnel needs a password or a key, a Kafka
 *   username needs a SASL mechanism) are the engine's object refinements,
 *   checked by that same `peerSchema` and reported under the wire's names.
 */
function protoFields<Shape extends z.ZodRawShape>(schema: z.ZodObject<Shape>): ProtoShape<Shape> {
  return Object.fromEntries(
    Object.entries(schema.shape).map(([name, field]) => [
      snakeCaseName(name),
      field instanceof z.ZodDefault ? (field.unwrap() as z.ZodType).optional() : field,
    ]),
  ) as ProtoShape<Shape>;
}

export const relationalConfigWire = z
  .object({
    ...protoFields(relationalConfigSchema),
    // Nested: its fields under their proto names too.
    ssh_config: z.object(protoFields(sshConfigFields)).strict().optional(),
  })
  .strict();

export const analyticsConfigWire = z.object(protoFields(analyticsConfigSchema)).strict();

export const datawarehouseConfigWire = z.object(protoFields(datawarehouseConfigSchema)).strict();

const streamFields = protoFields(streamConfigFields);

export const streamConfigWire = z
  .object({
    ...streamFields,
    // The interface's clients also send the brokers as one comma-separated
    // string; peerFromWire splits it, and the engine's rule checks each one.
    servers: z.union([streamFields.servers, z.string().min(1)]),
  })
  .strict();

export const createPeerRequest = z
  .object({
    peer: z
      .object({
        name: resourceNameSchema,
        type: protoEnum(
          peerTypes,
          'unknown peer kind; expected RELATIONAL (3), ANALYTICS (8), DATAWAREHOUSE (1) or STREAM (9)',
        ),
        relational_config: relationalConfigWire.optional(),
        analytics_config: analyticsConfigWire.optional(),
        datawarehouse_config: datawarehouseConfigWire.optional(),
        stream_config: streamConfigWire.optional(),
      })
      .strict(),
    allow_update: z.boolean().optional(),
    /** Accepted and ignored: a peer is always checked before it is stored. */
    disable_validation: z.boolean().optional(),
  })
  .strict();
export type CreatePeerRequest = z.infer<typeof createPeerRequest>;

export const createPeerResponse = z.object({ status: z.enum(['CREATED', 'FAILED']), message: z.string() });

/** An addition: peers/validate's answer, as PeerDB's ValidatePeerResponse. */
export const validatePeerResponse = z.object({ status: z.enum(['VALID', 'INVALID']), message: z.string() });

export const mirrorListResponse = z.object({
  mirrors: z.array(
    z.object({
      name: z.string(),
      workflowId: z.string(),
      sourceName: z.string(),
      destinationName: z.string(),
      createdAt: z.string(),
      isCdc: z.boolean(),
    }),
  ),
});

export const peerListResponse = z.object({
  items: z.array(z.object({ name: z.string(), type: z.string() })),
});

export const peerInfoResponse = z.object({
  peer: z.object({ name: z.string(), type: z.string() }).catchall(z.unknown()),
  version: z.string().optional(),
});

// --- source browsing (additions, at PeerDB's paths) ---------------------------

/** A PostgreSQL identifier as a query names it: 1 to 63 bytes' worth of characters. */
const identifierParameter = z.string().min(1).max(63);

export const peerSchemasQuery = z.object({ peer_name: z.string().min(1).max(253) }).strict();
export const schemaTablesQuery = peerSchemasQuery.extend({ schema_name: identifierParameter }).strict();
export const tableColumnsQuery = schemaTablesQuery.extend({ table_name: identifierParameter }).strict();

export const peerSchemasResponse = z.object({ schemas: z.array(z.string()) });

export const schemaTablesResponse = z.object({
  tables: z.array(
    z.object({
      tableName: z.string(),
      canMirror: z.boolean(),
      tableSize: z
        .string()
        .describe('On-disk size, every partition of a partitioned table included, as bytes'),
      hasPrimaryKey: z.boolean(),
      replicaIdentity: z.enum([
        'REPLICA_IDENTITY_DEFAULT',
        'REPLICA_IDENTITY_NOTHING',
        'REPLICA_IDENTITY_FULL',
        'REPLICA_IDENTITY_INDEX',
      ]),
      partitioned: z.boolean(),
      partition: z.boolean(),
    }),
  ),
});

export const tableColumnsResponse = z.object({
  columns: z.array(
    z.object({ name: z.string(), type: z.string(), isKey: z.boolean(), generated: z.boolean() }),
  ),
});

// --- mirrors -----------------------------------------------------------------

const tableMappingWire = z
  .object({
    source_table_identifier: z.string().min(1),
    destination_table_identifier: z.string().min(1),
    exclude: z.union([z.string(), z.array(z.string())]).optional(),
    /** An addition to the interface (docs/api.md): the table's row filter, a SQL predicate. */
    row_filter: rowFilterSchema.optional(),
    columns: z
      .array(z.object({ source_name: z.string().min(1), ordering: z.number().int().optional() }).strict())
      .optional(),
    /** Accepted and ignored (a status read shows it empty). */
    partition_key: z.string().optional(),
  })
  .strict();
export type TableMappingWire = z.infer<typeof tableMappingWire>;

const typeSystem = protoEnum({ Q: 0, PG: 1 }, 'expected Q (0) or PG (1)');

/** An addition to the interface: the mirror's schema change policy (MirrorSpec.schemaChanges). */
export const schemaChangesWire = protoEnum(
  { SCHEMA_CHANGES_APPLY: 0, SCHEMA_CHANGES_HOLD: 1, SCHEMA_CHANGES_IGNORE: 2 },
  'expected SCHEMA_CHANGES_APPLY (0), SCHEMA_CHANGES_HOLD (1) or SCHEMA_CHANGES_IGNORE (2)',
);

/**
 * The mirror options that are spec fields of the same meaning, under their
 * proto names, with the spec's rules (derived as the peer configs are).
 */
const mirrorOptionFields = protoFields(
  mirrorSpecFields.pick({
    doInitialSnapshot: true,
    maxBatchSize: true,
    idleTimeoutSeconds: true,
    publicationName: true,
    replicationSlotName: true,
    adoptExistingSlot: true,
    failoverSlot: true,
    maxRetainedWalBytes: true,
    retainedWalLimitAction: true,
    heartbeatIntervalSeconds: true,
    streaming: true,
    snapshotNumRowsPerPartition: true,
    snapshotMaxParallelWorkers: true,
    snapshotNumTablesInParallel: true,
    resync: true,
    initialSnapshotOnly: true,
    softDeleteColName: true,
    syncedAtColName: true,
    script: true,
  }),
);

export const createMirrorRequest = z
  .object({
    connection_configs: z
      .object({
        // The resource's own rule: a name it would refuse must not get past the API.
        flow_job_name: mirrorSpecFields.shape.name,
        source_name: z.string().min(1),
        destination_name: z.string().min(1),
        table_mappings: z.array(tableMappingWire).min(1).max(1000),
        ...mirrorOptionFields,
        system: typeSystem.optional(),
        schema_changes: schemaChangesWire.optional(),
      })
      .strict()
      .refine((config) => !config.initial_snapshot_only || config.do_initial_snapshot, {
        message: 'initial_snapshot_only needs do_initial_snapshot',
        path: ['initial_snapshot_only'],
      }),
  })
  .strict();
export type CreateMirrorRequest = z.infer<typeof createMirrorRequest>;

const requestedState = protoEnum(
  { STATUS_RUNNING: 1, STATUS_PAUSED: 2, STATUS_TERMINATING: 6 },
  'expected STATUS_RUNNING (1), STATUS_PAUSED (2) or STATUS_TERMINATING (6)',
);
export type RequestedState = z.infer<typeof requestedState>;

const cdcFlowConfigUpdate = z
  .object({
    additional_tables: z.array(tableMappingWire).optional(),
    removed_tables: z.array(tableMappingWire).optional(),
    // The spec's rules for the fields an edit sets, under the edit's names.
    batch_size: mirrorOptionFields.max_batch_size,
    idle_timeout: mirrorOptionFields.idle_timeout_seconds,
    snapshot_num_rows_per_partition: mirrorOptionFields.snapshot_num_rows_per_partition,
    snapshot_max_parallel_workers: mirrorOptionFields.snapshot_max_parallel_workers,
    snapshot_num_tables_in_parallel: mirrorOptionFields.snapshot_num_tables_in_parallel,
    /** Accepted and ignored: a mirror syncs until it is paused. */
    number_of_syncs: z.number().int().optional(),
  })
  .strict();

export const stateChangeRequest = z
  .object({
    flowJobName: z.string().min(1),
    requestedFlowState: requestedState,
    flowConfigUpdate: z.object({ cdcFlowConfigUpdate: cdcFlowConfigUpdate.optional() }).strict().optional(),
    /** Accepted and ignored: a drop keeps the mirror's batches and logs in the catalog. */
    dropMirrorStats: z.boolean().optional(),
    /** Accepted and ignored: a drop never drops destination tables. */
    skipDestinationDrop: z.boolean().optional(),
  })
  .strict();
export type StateChangeRequest = z.infer<typeof stateChangeRequest>;

export const stateChangeResponse = z.object({ ok: z.boolean(), errorMessage: z.string() });

/** An addition to the interface: load one table of a mirror again (docs/api.md). */
export const resyncTableRequest = z
  .object({
    flowJobName: z.string().min(1),
    /** A mapped source table, `schema.table` (a bare name means `public`). */
    sourceTableIdentifier: z.string().min(1).max(300),
  })
  .strict();
export type ResyncTableRequest = z.infer<typeof resyncTableRequest>;

export const resyncTableResponse = z.object({});

export const mirrorStatusRequest = z
  .object({
    flowJobName: z.string().min(1),
    includeFlowInfo: z.boolean().optional(),
    /** Accepted and ignored: the status never lists batches (see mirrors/cdc/batches). */
    excludeBatches: z.boolean().optional(),
  })
  .strict();

export const flowStates = [
  'STATUS_SETUP',
  'STATUS_SNAPSHOT',
  'STATUS_RUNNING',
  'STATUS_PAUSING',
  'STATUS_PAUSED',
  'STATUS_COMPLETED',
  'STATUS_FAILED',
  'STATUS_TERMINATING',
  'STATUS_TERMINATED',
  'STATUS_UNKNOWN',
] as const;

export const mirrorStatusResponse = z.object({
  flowJobName: z.string(),
  errorMessage: z.string(),
  currentFlowState: z.enum(flowStates),
  ok: z.boolean(),
  /** Beyond the interface: a step making no progress past the stall bound (docs/api.md). */
  stall: z.object({ step: z.string(), since: z.string() }).optional(),
  /** Beyond the interface: seconds the oldest change not yet written has waited since its commit; 0 caught up. */
  lagSeconds: z.number().int().optional(),
  /** Beyond the interface: the mirror's slot at the source, in every state (docs/api.md). */
  slotHealth: z
    .object({
      slotName: z.string(),
      checkedAt: z.string(),
      status: z.enum(['True', 'False', 'Unknown']),
      reason: z.string(),
      message: z.string(),
      active: z.boolean().optional(),
      walStatus: z.string().optional(),
      /** int64 as a decimal string, as protojson writes it. */
      retainedWalBytes: z.string().optional(),
      unconfirmedBytes: z.string().optional(),
      safeWalSizeBytes: z.string().optional(),
      invalidationReason: z.string().optional(),
    })
    .optional(),
  cdcStatus: z.record(z.string(), z.unknown()).optional(),
});

export type SlotHealthWire = NonNullable<z.infer<typeof mirrorStatusResponse>['slotHealth']>;

const int64Min = -(2n ** 63n);
const int64Max = 2n ** 63n - 1n;

/**
 * A 64-bit id as a JSON number, or as the decimal string the service itself
 * sends ids as: a number past 2^53 has already lost digits when it arrives.
 */
const optionalId = z
  .union([
    z.number().int().refine(Number.isSafeInteger, 'send ids beyond 2^53 as decimal strings'),
    z.string().regex(/^-?\d{1,19}$/, 'expected an integer'),
  ])
  .transform((value) => BigInt(value))
  .refine((value) => value >= int64Min && value <= int64Max, 'outside the 64-bit range')
  .optional();

export const batchesRequest = z
  .object({
    flowJobName: z.string().min(1),
    limit: z.number().int().optional(),
    ascending: z.boolean().optional(),
    beforeId: optionalId,
    afterId: optionalId,
    page: z.number().int().min(0).optional(),
  })
  .strict();

export const batchesResponse = z.object({
  cdcBatches: z.array(
    z.object({
      batchId: z.string(),
      batch_id: z.string(),
      startTime: z.string(),
      endTime: z.string().nullable(),
      numRows: z.string(),
      startLsn: z.string(),
      endLsn: z.string(),
    }),
  ),
  total: z.number(),
  page: z.number(),
});

export const logsRequest = z
  .object({
    flow_job_name: z.string().optional(),
    level: z
      .string()
      .transform((value) => value.toUpperCase())
      .pipe(z.enum(logLevelFilters))
      .optional(),
    page: z.number().int().min(0).optional(),
    num_per_page: z.number().int().min(0).max(1000).optional(),
    before_id: optionalId,
    after_id: optionalId,
  })
  .strict();

export const logsResponse = z.object({
  errors: z.array(
    z.object({
      flowName: z.string(),
      errorMessage: z.string(),
      errorType: z.enum(['info', 'warn', 'error']),
      errorTimestamp: z.number(),
      id: z.number(),
      /** Beyond the interface: identical consecutive entries are one, written this many times. */
      repeatCount: z.number(),
      /** Beyond the interface: when it was last written (errorTimestamp unless repeated). */
      lastErrorTimestamp: z.number(),
    }),
  ),
  total: z.number(),
  page: z.number(),
});

// --- scripts -----------------------------------------------------------------

export const upsertScriptRequest = z
  .object({
    script: z
      .object({
        id: z.number().int().min(-1),
        name: resourceNameSchema,
        lang: z.string().min(1),
        source: z.string().max(1_000_000),
      })
      .strict(),
  })
  .strict();

export const upsertScriptResponse = z.object({ id: z.number() });

/** An addition: a script run once on a sample record, saving nothing (scripts/test). */
export const testScriptRequest = z
  .object({
    name: resourceNameSchema.optional(),
    source: z.string().max(1_000_000),
    /** What the script's return values are read as: rows (a table destination) or messages (Kafka). */
    form: z.enum(['rows', 'messages']).optional(),
    /** The record onRecord gets, as docs/scripts.md describes it (`json.null` for a JSON null). */
    record: z.record(z.string(), z.unknown()),
  })
  .strict();

export const testScriptResponse = z.object({
  ok: z.boolean(),
  form: z.enum(['rows', 'messages']).optional(),
  /** rows: the row dropped, or the columns the script changed (text, null for NULL). */
  row: z
    .object({ drop: z.boolean(), values: z.record(z.string(), z.string().nullable()).optional() })
    .optional(),
  messages: z.array(z.record(z.string(), z.unknown())).optional(),
  error: z.string().optional(),
  printed: z.array(z.string()),
});

export const scriptsResponse = z.object({
  scripts: z.array(z.object({ id: z.number(), name: z.string(), lang: z.string(), source: z.string() })),
});

/** The `{code, message, details}` error body. */
export const grpcErrorBody = z.object({
  code: z.number(),
  message: z.string(),
  details: z.array(z.unknown()),
});

// --- audit trail (an addition: docs/api.md) -------------------------------------

/** The query string of GET /api/v1/audit; other parameters are ignored. */
export const auditQuery = z.object({
  page: z.coerce.number().int().min(1).max(1_000_000).optional(),
  num_per_page: z.coerce.number().int().min(0).max(1000).optional(),
  user: z.string().min(1).max(63).optional(),
});

export const auditResponse = z.object({
  entries: z.array(
    z.object({
      id: z.string(),
      time: z.string(),
      user: z.string(),
      role: z.string(),
      action: z.string(),
      route: z.string(),
      object: z.string(),
      detail: z.string(),
      clientAddress: z.string(),
      status: z.number(),
    }),
  ),
  total: z.number(),
  page: z.number(),
});

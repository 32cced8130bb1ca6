// CustomResourceDefinitions for Peer, Mirror and Script, built from the zod
// schemas. `make crds` writes them to crds/; a test fails when the committed
// YAML differs from what this produces.
import { z } from 'zod';
import { peerKinds, retainedWalLimitMessages } from '../../../engine/src/index.ts';
import { group, version } from './api-group.ts';
import {
  mirrorCrSpecSchema,
  mirrorCrStatusSchema,
  peerCrSpecSchema,
  peerCrStatusSchema,
  scriptCrSpecSchema,
  scriptCrStatusSchema,
} from './schemas.ts';
import { toStructural } from './structural.ts';

/**
 * The API name the facade keeps in an annotation when it differs from the
 * object name (kube/object-names.ts); empty on objects created with kubectl,
 * whose API name is their object name.
 */
const apiNameColumn = {
  name: 'API Name',
  type: 'string',
  jsonPath: '.metadata.annotations.tributary\\.dev/name',
  description: 'the name the /api/v1 interface knows this object by',
};

/** The Ready condition's status, as `kubectl get` shows it for Deployments and Pods. */
const readyColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: ".status.conditions[?(@.type=='Ready')].status",
  description: 'whether the Ready condition holds',
};

type Schema = Record<string, unknown>;

function schemaOf(description: string, spec: z.ZodType, status: z.ZodType, specRules: Schema[] = []): Schema {
  const specSchema = toStructural(z.toJSONSchema(spec, { io: 'input' }) as Schema);
  if (specRules.length > 0) specSchema['x-kubernetes-validations'] = specRules;
  return {
    description,
    type: 'object',
    required: ['spec'],
    properties: {
      apiVersion: { type: 'string' },
      kind: { type: 'string' },
      metadata: { type: 'object' },
      spec: specSchema,
      status: toStructural(z.toJSONSchema(status, { io: 'input' }) as Schema),
    },
  };
}

interface DefinitionInput {
  readonly kind: string;
  readonly plural: string;
  readonly shortNames: readonly string[];
  readonly schema: Schema;
  readonly columns: readonly Schema[];
}

function definition(input: DefinitionInput): Schema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${input.plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: {
        kind: input.kind,
        listKind: `${input.kind}List`,
        plural: input.plural,
        singular: input.kind.toLowerCase(),
        shortNames: input.shortNames,
        categories: ['tributary'],
      },
      versions: [
        {
          name: version,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            ...input.columns,
            { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
          ],
          schema: { openAPIV3Schema: input.schema },
        },
      ],
    },
  };
}

const peerRules = [
  ...peerKinds.map((kind) => ({
    rule: `(self.kind == '${kind}') == has(self.${kind})`,
    message: `spec.${kind} must be set exactly when kind is ${kind}`,
  })),
  { rule: 'self.kind == oldSelf.kind', message: 'kind is immutable' },
];

const mirrorRules = [
  {
    rule: '!self.initialSnapshotOnly || self.doInitialSnapshot',
    message: 'initialSnapshotOnly needs doInitialSnapshot',
  },
  // The spec schema's retainedWalLimitProblem, for kubectl: a slot is dropped only when the tables can load again.
  {
    rule: "self.retainedWalLimitAction != 'DropSlot' || has(self.maxRetainedWalBytes)",
    message: retainedWalLimitMessages.needsLimit,
  },
  {
    rule: "self.retainedWalLimitAction != 'DropSlot' || self.doInitialSnapshot",
    message: retainedWalLimitMessages.needsInitialLoad,
  },
  {
    rule: "self.retainedWalLimitAction != 'DropSlot' || !self.adoptExistingSlot",
    message: retainedWalLimitMessages.notAdopted,
  },
  { rule: 'self.sourcePeer == oldSelf.sourcePeer', message: 'sourcePeer is immutable' },
  { rule: 'self.destinationPeer == oldSelf.destinationPeer', message: 'destinationPeer is immutable' },
  // The slot and publication are created under these names at setup; a later
  // change would be silently ignored, so it is refused instead.
  ...(['replicationSlotName', 'publicationName'] as const).map((field) => ({
    rule: `has(self.${field}) == has(oldSelf.${field}) && (!has(self.${field}) || self.${field} == oldSelf.${field})`,
    message: `${field} is immutable`,
  })),
];

export function customResourceDefinitions(): Schema[] {
  return [
    definition({
      kind: 'Peer',
      plural: 'peers',
      shortNames: ['tpeer'],
      schema: schemaOf(
        'A server mirrors read from or write to (PostgreSQL, ClickHouse, Snowflake, Kafka); its secrets stay in a Secret.',
        peerCrSpecSchema,
        peerCrStatusSchema,
        peerRules,
      ),
      columns: [
        apiNameColumn,
        { name: 'Kind', type: 'string', jsonPath: '.spec.kind' },
        readyColumn,
        { name: 'Version', type: 'string', jsonPath: '.status.version' },
      ],
    }),
    definition({
      kind: 'Mirror',
      plural: 'mirrors',
      shortNames: ['tmirror'],
      schema: schemaOf(
        'PostgreSQL tables replicated into a destination Peer: an initial load, then their changes through a replication slot.',
        mirrorCrSpecSchema,
        mirrorCrStatusSchema,
        mirrorRules,
      ),
      columns: [
        apiNameColumn,
        { name: 'State', type: 'string', jsonPath: '.spec.state' },
        { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
        readyColumn,
        {
          name: 'Lag',
          type: 'integer',
          jsonPath: '.status.lagSeconds',
          description:
            'seconds the oldest change not yet written has waited since its commit at the source (0: caught up)',
        },
        { name: 'Rows', type: 'string', jsonPath: '.status.rowsSynced' },
      ],
    }),
    definition({
      kind: 'Script',
      plural: 'scripts',
      shortNames: ['tscript'],
      schema: schemaOf(
        'A Lua script that transforms the records of the Mirrors naming it.',
        scriptCrSpecSchema,
        scriptCrStatusSchema,
      ),
      columns: [
        apiNameColumn,
        { name: 'Lang', type: 'string', jsonPath: '.spec.lang' },
        readyColumn,
        { name: 'Id', type: 'integer', jsonPath: '.status.id' },
      ],
    }),
  ];
}

import { describe, expect, it } from 'vitest';
import { customResourceDefinitions } from './definitions.ts';
import { scriptSourceMaxLength } from './schemas.ts';

type Schema = {
  description?: string;
  type?: string;
  format?: string;
  maxLength?: number;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema;
  'x-kubernetes-list-type'?: string;
  'x-kubernetes-list-map-keys'?: string[];
};

interface Version {
  additionalPrinterColumns: { name: string; jsonPath: string }[];
  schema: { openAPIV3Schema: Schema };
}

const versionOf = (kind: string): Version => {
  const definition = customResourceDefinitions().find(
    (candidate) => (candidate.spec as { names: { kind: string } }).names.kind === kind,
  );
  const [version] = (definition?.spec as { versions: Version[] } | undefined)?.versions ?? [];
  if (!version) throw new Error(`no CRD for ${kind}`);
  return version;
};
const rootOf = (kind: string) => versionOf(kind).schema.openAPIV3Schema;

/** Every field under `schema` by dotted path, as `kubectl explain` walks it. */
function fields(schema: Schema, path: string): [string, Schema][] {
  const own: [string, Schema][] = Object.entries(schema.properties ?? {}).flatMap(([name, child]) => [
    [`${path}.${name}`, child] as [string, Schema],
    ...fields(child, `${path}.${name}`),
  ]);
  const nested = [schema.items, schema.additionalProperties].flatMap((child) =>
    child ? fields(child, path) : [],
  );
  return [...own, ...nested];
}

describe('custom resource definitions', () => {
  it.each(['Peer', 'Mirror', 'Script'])('describe every field of a %s, for kubectl explain', (kind) => {
    const root = rootOf(kind);
    expect(root.description).toBeTruthy();
    for (const part of ['spec', 'status'] as const) {
      const schema = root.properties?.[part];
      if (!schema) throw new Error(`${kind} has no ${part}`);
      expect(schema.description, `${kind}.${part}`).toBeTruthy();
      const all = fields(schema, part);
      expect(all.length).toBeGreaterThan(0);
      const undescribed = all.filter(([, field]) => !field.description?.trim()).map(([path]) => path);
      expect(undescribed, `${kind} fields without a description`).toEqual([]);
    }
  });

  it('describe the fields the engine pod settings and the peer kinds nest', () => {
    const mirrorFields = new Map(fields(rootOf('Mirror'), 'mirror'));
    for (const path of [
      'mirror.spec.engine.temporaryStorage.sizeLimit',
      'mirror.spec.engine.tolerations.effect',
      'mirror.spec.tableMappings.source.schema',
      'mirror.spec.tableMappings.columns.ordering',
    ]) {
      expect(mirrorFields.get(path)?.description, path).toBeTruthy();
    }
    const peerFields = new Map(fields(rootOf('Peer'), 'peer'));
    for (const path of [
      'peer.spec.relational.sshConfig.hostKey',
      'peer.spec.stream.partitioner',
      'peer.spec.datawarehouse.role',
      'peer.spec.secretRef.keys.password',
    ]) {
      expect(peerFields.get(path)?.description, path).toBeTruthy();
    }
  });

  it.each(['Peer', 'Mirror'])('declare the conditions of a %s as a map keyed by type', (kind) => {
    const conditions = rootOf(kind).properties?.status?.properties?.conditions;
    expect(conditions).toMatchObject({
      type: 'array',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
    });
    // A list map's keys must be required (or defaulted) in each entry.
    expect(conditions?.items).toMatchObject({ required: expect.arrayContaining(['type']) });
    expect(conditions?.items?.properties?.lastTransitionTime).toMatchObject({
      type: 'string',
      format: 'date-time',
    });
    // What the operator writes (conditions.ts) is a time of that format.
    expect(new Date().toISOString()).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  });

  it('show a Ready column on Peers and Mirrors, from the Ready condition', () => {
    for (const kind of ['Peer', 'Mirror']) {
      expect(versionOf(kind).additionalPrinterColumns).toContainEqual(
        expect.objectContaining({ name: 'Ready', jsonPath: ".status.conditions[?(@.type=='Ready')].status" }),
      );
    }
  });

  it("bound a Script's source as the API does", () => {
    expect(rootOf('Script').properties?.spec?.properties?.source?.maxLength).toBe(scriptSourceMaxLength);
  });
});

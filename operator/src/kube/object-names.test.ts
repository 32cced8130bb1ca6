import { describe, expect, it } from 'vitest';
import { engineObjectName, mirrorLabel } from '../runtime/engine-objects.ts';
import { engineStatefulSet } from '../runtime/statefulset-runtime.ts';
import { apiNameAnnotation, apiNameOf, isDnsLabel, kubeObjectName } from './object-names.ts';

describe('kubeObjectName', () => {
  it('keeps a name that is already a DNS label', () => {
    for (const name of ['orders', 'pg-to-ch', '9lives']) expect(kubeObjectName(name)).toBe(name);
  });

  it('derives a DNS label with a hash for every other name, deterministically', () => {
    for (const name of ['pg_to_ch_orders', '_lead', 'trail_', 'a-', '_', '__', `${'x_'.repeat(31)}y`]) {
      const objectName = kubeObjectName(name);
      expect(isDnsLabel(objectName), `${name} -> ${objectName}`).toBe(true);
      expect(objectName).toMatch(/-[0-9a-f]{8}$/);
      expect(kubeObjectName(name)).toBe(objectName);
    }
    expect(kubeObjectName('pg_to_ch_orders')).toMatch(/^pg-to-ch-orders-[0-9a-f]{8}$/);
  });

  it('keeps names that a plain _ to - mapping would merge apart', () => {
    const names = ['pg_to_ch', 'pg-to-ch', 'pg_to-ch', 'pg-to_ch', '_pg_to_ch', 'pg_to_ch_'];
    expect(new Set(names.map(kubeObjectName)).size).toBe(names.length);
  });
});

describe('apiNameOf', () => {
  it('is the annotation when present, the object name otherwise', () => {
    expect(apiNameOf({ name: 'pg-to-ch-0a1b2c3d', annotations: { [apiNameAnnotation]: 'pg_to_ch' } })).toBe(
      'pg_to_ch',
    );
    expect(apiNameOf({ name: 'made-with-kubectl' })).toBe('made-with-kubectl');
  });
});

describe('objects named after a mirror', () => {
  it('use the object name, so a mirror named with _ gets a valid StatefulSet and label', () => {
    const name = 'pg_to_ch';
    expect(engineObjectName(name)).toBe(`tributary-engine-${kubeObjectName(name)}`);
    const set = engineStatefulSet(
      { image: 'tributary:test', namespace: 'ns' },
      { name, uid: 'u', generation: 3 },
      { documentHash: 'h' },
    );
    expect(set.metadata?.labels?.[mirrorLabel]).toBe(kubeObjectName(name));
    expect(set.metadata?.ownerReferences?.[0]?.name).toBe(kubeObjectName(name));
    expect(set.spec?.selector.matchLabels?.[mirrorLabel]).toBe(kubeObjectName(name));
  });
});

describe('engine pod environment', () => {
  const environment = (options: Partial<Parameters<typeof engineStatefulSet>[0]>) =>
    engineStatefulSet(
      { image: 'tributary:test', namespace: 'ns', ...options },
      { name: 'm', uid: 'u', generation: 1 },
      { documentHash: 'h' },
    ).spec?.template.spec?.containers[0]?.env?.map((variable) => variable.name);

  it('passes on the stall bound and log retention only where they are not the defaults', () => {
    expect(environment({})).toEqual(['NODE_OPTIONS', 'TMPDIR']);
    expect(environment({ stallAfterMs: 300_000 })).toEqual(['NODE_OPTIONS', 'TMPDIR']);
    expect(environment({ stallAfterMs: 60_000 })).toEqual([
      'NODE_OPTIONS',
      'TMPDIR',
      'TRIBUTARY_STALL_SECONDS',
    ]);
  });
});

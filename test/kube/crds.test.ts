import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { customResourceDefinitions } from '../../operator/src/crds/definitions.ts';
import { group, version } from '../../operator/src/crds/schemas.ts';
import { crdFileName, renderDefinition } from '../../scripts/generate-crds.ts';
import { adminConfig, createNamespace, installCrds, kubectl, statusOf } from '../support/kube.ts';
import { repoRoot } from '../support/testenv.ts';

const mirrorSpec = {
  sourcePeer: 'source',
  destinationPeer: 'destination',
  tableMappings: [
    { source: { schema: 'public', table: 'orders' }, destination: { schema: 'public', table: 'orders' } },
  ],
  doInitialSnapshot: true,
};

describe('custom resource definitions', () => {
  it('are committed exactly as generated from the schemas (run `make crds`)', () => {
    for (const definition of customResourceDefinitions()) {
      const committed = readFileSync(join(repoRoot, 'crds', crdFileName(definition)), 'utf8');
      expect(committed).toBe(renderDefinition(definition));
    }
  });

  describe('on the API server', () => {
    const objects = adminConfig().makeApiClient(CustomObjectsApi);
    let namespace = '';
    const at = (plural: string) => ({ group, version, namespace, plural });

    beforeAll(async () => {
      await installCrds();
      namespace = await createNamespace('crds');
    });

    it('upgrade with the documented server-side apply over CRDs another manager installed', async () => {
      // charts/tributary/README.md: Helm never upgrades crds/, so an upgrade
      // starts with this command (the chart ships the same files as crds/).
      const output = await kubectl([
        'apply',
        '--server-side',
        '--force-conflicts',
        '--field-manager=tributary-crds',
        '-f',
        join(repoRoot, 'charts', 'tributary', 'crds'),
      ]);
      expect(output).toContain('mirrors.tributary.dev serverside-applied');
      // The newest field is served: a Mirror with engine pod settings keeps them.
      const created = (await objects.createNamespacedCustomObject({
        ...at('mirrors'),
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'Mirror',
          metadata: { name: 'upgraded' },
          spec: {
            ...mirrorSpec,
            engine: { priorityClassName: 'replication', affinity: { nodeAffinity: {} } },
          },
        },
      })) as { spec: { engine?: { priorityClassName?: string; affinity?: unknown } } };
      expect(created.spec.engine).toEqual({
        priorityClassName: 'replication',
        affinity: { nodeAffinity: {} },
      });
    });

    it('default a mirror spec and enforce its rules', async () => {
      const created = (await objects.createNamespacedCustomObject({
        ...at('mirrors'),
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'Mirror',
          metadata: { name: 'orders' },
          spec: mirrorSpec,
        },
      })) as { spec: Record<string, unknown> };
      expect(created.spec).toMatchObject({
        maxBatchSize: 1_000_000,
        idleTimeoutSeconds: 60,
        state: 'Running',
        system: 'Q',
      });

      const snapshotOnly = await statusOf(
        objects.createNamespacedCustomObject({
          ...at('mirrors'),
          body: {
            apiVersion: `${group}/${version}`,
            kind: 'Mirror',
            metadata: { name: 'bad' },
            spec: { ...mirrorSpec, doInitialSnapshot: false, initialSnapshotOnly: true },
          },
        }),
      );
      expect(snapshotOnly).toMatchObject({ code: 422 });
      expect(snapshotOnly.message).toContain('initialSnapshotOnly needs doInitialSnapshot');

      const moved = await statusOf(
        objects.patchNamespacedCustomObject({
          ...at('mirrors'),
          name: 'orders',
          body: [{ op: 'replace', path: '/spec/sourcePeer', value: 'other' }],
        }),
      );
      expect(moved).toMatchObject({ code: 422 });
      expect(moved.message).toContain('sourcePeer is immutable');
      for (const field of ['replicationSlotName', 'publicationName']) {
        const named = await statusOf(
          objects.patchNamespacedCustomObject({
            ...at('mirrors'),
            name: 'orders',
            body: [{ op: 'add', path: `/spec/${field}`, value: 'renamed' }],
          }),
        );
        expect(named).toMatchObject({ code: 422 });
        expect(named.message).toContain(`${field} is immutable`);
      }

      const paused = await statusOf(
        objects.patchNamespacedCustomObject({
          ...at('mirrors'),
          name: 'orders',
          body: [{ op: 'replace', path: '/spec/state', value: 'Paused' }],
        }),
      );
      expect(paused.code).toBe(200);
      const badState = await statusOf(
        objects.patchNamespacedCustomObject({
          ...at('mirrors'),
          name: 'orders',
          body: [{ op: 'replace', path: '/spec/state', value: 'Sleeping' }],
        }),
      );
      expect(badState.code).toBe(422);
    });

    it('take a status through the status subresource only', async () => {
      await objects.patchNamespacedCustomObjectStatus({
        ...at('mirrors'),
        name: 'orders',
        body: [{ op: 'add', path: '/status', value: { phase: 'STATUS_RUNNING', rowsSynced: '42' } }],
      });
      const read = (await objects.getNamespacedCustomObject({ ...at('mirrors'), name: 'orders' })) as {
        status: Record<string, unknown>;
        metadata: { generation: number };
      };
      expect(read.status).toMatchObject({ phase: 'STATUS_RUNNING', rowsSynced: '42' });
    });

    it('require the peer config that matches its kind, and no secret in the spec', async () => {
      const peer = (spec: Record<string, unknown>, name: string) =>
        objects.createNamespacedCustomObject({
          ...at('peers'),
          body: { apiVersion: `${group}/${version}`, kind: 'Peer', metadata: { name }, spec },
        });
      const relational = { host: 'db', port: 5432, user: 'u', database: 'd' };
      expect(
        (await statusOf(peer({ kind: 'relational', relational, secretRef: { name: 's' } }, 'good'))).code,
      ).toBe(200);
      const mismatched = await statusOf(
        peer({ kind: 'analytics', relational, secretRef: { name: 's' } }, 'mismatched'),
      );
      expect(mismatched.code).toBe(422);
      expect(mismatched.message).toContain('spec.analytics must be set exactly when kind is analytics');
      // A password in the spec is not part of the schema: the API server prunes it.
      const created = (await objects.createNamespacedCustomObject({
        ...at('peers'),
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'Peer',
          metadata: { name: 'pruned' },
          spec: {
            kind: 'relational',
            relational: { ...relational, password: 'leak' },
            secretRef: { name: 's' },
          },
        },
      })) as { spec: { relational: Record<string, unknown> } };
      expect(created.spec.relational.password).toBeUndefined();
    });
  });
});

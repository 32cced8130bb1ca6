// What a Peer may take from the Secret it names, against the real kube-apiserver
// and PostgreSQL: only the secret fields of its kind (a `host` key never
// redirects it), only from a Secret labelled for peers, and under the keys an
// existing Secret (CloudNativePG's `<cluster>-app`) already has.
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcile } from '../../operator/src/controllers/controller.ts';
import { PeerController } from '../../operator/src/controllers/peer.ts';
import { group, version } from '../../operator/src/crds/schemas.ts';
import { EventRecorder } from '../../operator/src/events.ts';
import { KubeStore } from '../../operator/src/kube/kube-store.ts';
import { PeerSecretError, peerSecretLabel } from '../../operator/src/kube/peer-secret.ts';
import { ReconcileStore } from '../../operator/src/kube/reconcile-store.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { adminConfig, createNamespace, installCrds } from '../support/kube.ts';

interface PeerStatus {
  conditions?: { type: string; status: string; reason: string; message: string }[];
}

describe('peer secrets', () => {
  const config = adminConfig();
  const objects = config.makeApiClient(CustomObjectsApi);
  const core = config.makeApiClient(CoreV1Api);
  let namespace = '';
  let database: TestDatabase;
  let store: KubeStore;
  let reconcileStore: ReconcileStore;
  let events: EventRecorder;

  const createSecret = (name: string, data: Record<string, string>, labelled: boolean) =>
    core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name, ...(labelled ? { labels: { [peerSecretLabel]: 'true' } } : {}) },
        stringData: data,
      },
    });

  const createPeer = async (name: string, secretRef: Record<string, unknown>) => {
    const { password: _password, ...relational } = database.config;
    await objects.createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'peers',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Peer',
        metadata: { name },
        spec: { kind: 'relational', relational, secretRef },
      },
    });
  };

  const readyCondition = async (name: string) => {
    await reconcile(new PeerController({ objects: reconcileStore, events }), name);
    const peer = (await objects.getNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'peers',
      name,
    })) as { status?: PeerStatus };
    return peer.status?.conditions?.find((condition) => condition.type === 'Ready');
  };

  beforeAll(async () => {
    await installCrds(config);
    namespace = await createNamespace('peer-secrets');
    database = await createTestDatabase('peer_secrets');
    store = new KubeStore(config, namespace);
    reconcileStore = new ReconcileStore(config, namespace);
    events = new EventRecorder(config, namespace, pino({ level: 'silent' }));
  });

  afterAll(async () => {
    await database?.drop();
  });

  it('takes the password from the Secret but never a spec field such as host', async () => {
    await createSecret(
      'with-host',
      { password: database.config.password, host: 'attacker.invalid', port: '1', user: 'mallory' },
      true,
    );
    await createPeer('with-host', { name: 'with-host' });
    const found = await store.getPeer('with-host');
    expect(found?.peer.config).toMatchObject({
      host: database.config.host,
      port: database.config.port,
      user: database.config.user,
      password: database.config.password,
    });
    const ready = await readyCondition('with-host');
    expect(ready).toMatchObject({ status: 'True', reason: 'Connected' });
  });

  it('refuses a Secret without the peer-secret label: not Ready, SecretNotAllowed, naming both', async () => {
    await createSecret('other-app', { password: database.config.password }, false);
    await createPeer('unlabelled', { name: 'other-app' });
    await expect(store.getPeer('unlabelled')).rejects.toBeInstanceOf(PeerSecretError);
    const ready = await readyCondition('unlabelled');
    expect(ready).toMatchObject({ status: 'False', reason: 'SecretNotAllowed' });
    expect(ready?.message).toContain('other-app');
    expect(ready?.message).toContain(peerSecretLabel);
    expect(ready?.message).not.toContain(database.config.password);
  });

  it('reads a CloudNativePG-shaped Secret through a key mapping', async () => {
    // The keys CloudNativePG writes into `<cluster>-app`; only `password` is used,
    // the connection details stay those of the spec.
    const { host, port, user, password } = database.config;
    await createSecret(
      'cluster-app',
      {
        username: user,
        password,
        host: 'cluster-rw.other.svc',
        port: String(port),
        dbname: 'app',
        uri: `postgresql://${user}:${password}@cluster-rw.other.svc:${port}/app`,
        pgpass: `cluster-rw.other.svc:${port}:app:${user}:${password}`,
      },
      true,
    );
    // The mapping names the Secret's key; `password` is also the default, so a
    // second mapping to a key that holds something else proves the mapping is followed.
    await createPeer('cnpg', { name: 'cluster-app', keys: { password: 'password' } });
    const stored = (await objects.getNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'peers',
      name: 'cnpg',
    })) as { spec: { secretRef: { keys?: Record<string, string> } } };
    expect(stored.spec.secretRef.keys, 'the installed CRD keeps secretRef.keys').toEqual({
      password: 'password',
    });
    expect((await store.getPeer('cnpg'))?.peer.config).toMatchObject({ host, port, user, password });
    expect(await readyCondition('cnpg')).toMatchObject({ status: 'True', reason: 'Connected' });

    await createPeer('cnpg-wrong-key', { name: 'cluster-app', keys: { password: 'dbname' } });
    expect((await store.getPeer('cnpg-wrong-key'))?.peer.config).toMatchObject({ password: 'app' });
    expect(await readyCondition('cnpg-wrong-key')).toMatchObject({ status: 'False', reason: 'Unreachable' });

    await createPeer('cnpg-missing-key', { name: 'cluster-app', keys: { password: 'app-password' } });
    const missing = await readyCondition('cnpg-missing-key');
    expect(missing).toMatchObject({ status: 'False', reason: 'SecretInvalid' });
    expect(missing?.message).toContain('app-password');
  });
});

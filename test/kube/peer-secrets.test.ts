// What a Peer may take from the Secret it names, against the real kube-apiserver
// and PostgreSQL: only the secret fields of its kind (a `host` key never
// redirects it), only from a Secret labelled for peers and bound to that Peer
// (a user with only Peer rights cannot borrow another peer's password), and
// under the keys an existing Secret (CloudNativePG's `<cluster>-app`) already has.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { CoreV1Api, CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcile } from '../../operator/src/controllers/controller.ts';
import { PeerController } from '../../operator/src/controllers/peer.ts';
import { group, version } from '../../operator/src/crds/schemas.ts';
import { EventRecorder } from '../../operator/src/events.ts';
import { KubeStore } from '../../operator/src/kube/kube-store.ts';
import {
  PeerSecretError,
  peerSecretLabel,
  peerSecretPeersAnnotation,
} from '../../operator/src/kube/peer-secret.ts';
import { ReconcileStore } from '../../operator/src/kube/reconcile-store.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { adminConfig, createNamespace, installCrds, statusOf } from '../support/kube.ts';

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

  /** A Secret, labelled for peers or not, bound to the Peers `peers` names. */
  const createSecret = (
    name: string,
    data: Record<string, string>,
    labelled: boolean,
    peers: readonly string[] = [name],
  ) =>
    core.createNamespacedSecret({
      namespace,
      body: {
        metadata: {
          name,
          ...(labelled ? { labels: { [peerSecretLabel]: 'true' } } : {}),
          annotations: { [peerSecretPeersAnnotation]: peers.join(',') },
        },
        stringData: data,
      },
    });

  const createPeer = async (
    name: string,
    secretRef: Record<string, unknown>,
    as: CustomObjectsApi = objects,
    connection: Record<string, unknown> = {},
  ) => {
    const { password: _password, ...relational } = { ...database.config, ...connection };
    await as.createNamespacedCustomObject({
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
    await createSecret('other-app', { password: database.config.password }, false, ['unlabelled']);
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
      ['cnpg', 'cnpg-wrong-key', 'cnpg-missing-key'],
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

  it('refuses a Peer author the password of a Secret not bound to their Peer, and sends it nowhere', async () => {
    // The attacker's host: it records every connection the operator would make to it.
    let connections = 0;
    const attacker: Server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    const attackerPort = (attacker.address() as { port: number }).port;
    try {
      // The victims: a peer made through the facade (its own Secret), and one a
      // user set up with kubectl (a Secret bound to it).
      await store.putPeer({ name: 'victim', kind: 'relational', config: { ...database.config } }, null);
      await createSecret('shop-db', { password: database.config.password }, true, ['shop']);
      await createPeer('shop', { name: 'shop-db' });
      expect(await readyCondition('shop')).toMatchObject({ status: 'True', reason: 'Connected' });

      // Mallory may write Peers and nothing else: no Secret is hers to read.
      const mallory = `mallory-${randomBytes(4).toString('hex')}`;
      const rbac = config.makeApiClient(RbacAuthorizationV1Api);
      await rbac.createNamespacedRole({
        namespace,
        body: {
          metadata: { name: 'peer-author' },
          rules: [
            { apiGroups: [group], resources: ['peers'], verbs: ['get', 'list', 'watch', 'create', 'update'] },
          ],
        },
      });
      await rbac.createNamespacedRoleBinding({
        namespace,
        body: {
          metadata: { name: 'peer-author' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'peer-author' },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: mallory }],
        },
      });
      const asMallory = new KubeConfig();
      asMallory.loadFromOptions({
        clusters: config.clusters,
        contexts: config.contexts,
        currentContext: config.currentContext,
        users: config.users.map((user) => ({ ...user, impersonateUser: mallory })),
      });
      expect(
        (
          await statusOf(
            asMallory.makeApiClient(CoreV1Api).readNamespacedSecret({ name: 'shop-db', namespace }),
          )
        ).code,
      ).toBe(403);

      const malloryObjects = asMallory.makeApiClient(CustomObjectsApi);
      const toAttacker = { host: '127.0.0.1', port: attackerPort };
      for (const [peer, secret] of [
        ['borrow-facade', 'tributary-peer-victim'],
        ['borrow-kubectl', 'shop-db'],
      ] as const) {
        await createPeer(peer, { name: secret }, malloryObjects, toAttacker);
        await expect(store.getPeer(peer)).rejects.toMatchObject({ reason: 'SecretNotBound' });
        const ready = await readyCondition(peer);
        expect(ready).toMatchObject({ status: 'False', reason: 'SecretNotBound' });
        expect(ready?.message).toContain(`Secret ${secret} is not bound to Peer ${peer}`);
        expect(ready?.message).toContain(`kubectl annotate secret ${secret}`);
        expect(ready?.message).not.toContain(database.config.password);
      }
      expect(connections, 'the operator connected to the attacker').toBe(0);

      // Whoever manages Secrets binds one to a further Peer, and then it reads it.
      await core.patchNamespacedSecret({
        name: 'shop-db',
        namespace,
        body: [
          {
            op: 'replace',
            path: `/metadata/annotations/${peerSecretPeersAnnotation.replace('/', '~1')}`,
            value: 'shop,shop-copy',
          },
        ],
      });
      await createPeer('shop-copy', { name: 'shop-db' });
      expect(await readyCondition('shop-copy')).toMatchObject({ status: 'True', reason: 'Connected' });
      // The facade's peer still reads its own Secret.
      expect((await store.getPeer('victim'))?.peer.config).toMatchObject({
        password: database.config.password,
      });
    } finally {
      attacker.close();
    }
  });
});

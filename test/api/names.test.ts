// Names of mirrors, peers and scripts: the same ones work, and the same ones are
// refused, in both modes. In cluster mode an API name that is not a Kubernetes
// object name lives on an object with a derived name (operator/src/kube/object-names.ts);
// concurrent updates of one peer all succeed there too.

import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mirrorResourceSpecSchema } from '../../engine/src/index.ts';
import {
  apiNameAnnotation,
  customResourceDefinitions,
  group,
  kubeObjectName,
  version,
} from '../../operator/src/index.ts';
import { createTestDatabase, randomSuffix, type TestDatabase } from '../support/databases.ts';
import { clusterMode, createFacade, type Facade } from '../support/facade.ts';
import { adminConfig, kubectl } from '../support/kube.ts';

describe('names', () => {
  let facade: Facade;
  let source: TestDatabase;
  const suffix = randomSuffix();
  const sourcePeer = `pg_source_${suffix}`;
  const destinationPeer = `pg-destination-${suffix}`;

  const relationalPeer = (name: string, database = source.config.database) => ({
    peer: { name, type: 'RELATIONAL', relational_config: { ...source.config, database } },
  });
  const createMirror = (name: string, destinationTable: string, extra: Record<string, unknown> = {}) =>
    facade.post('/api/v1/flows/cdc/create', {
      connectionConfigs: {
        flowJobName: name,
        sourceName: sourcePeer,
        destinationName: destinationPeer,
        tableMappings: [
          { sourceTableIdentifier: 'public.orders', destinationTableIdentifier: destinationTable },
        ],
        doInitialSnapshot: false,
        ...extra,
      },
    });

  beforeAll(async () => {
    source = await createTestDatabase('api_names');
    await source.client.query('CREATE TABLE orders (id bigint PRIMARY KEY)');
    facade = await createFacade();
    for (const name of [sourcePeer, destinationPeer]) {
      const response = await facade.post('/api/v1/peers/create', relationalPeer(name));
      expect(response.json(), response.body).toMatchObject({ status: 'CREATED' });
    }
  });

  afterAll(async () => {
    await facade?.close();
    await source?.drop();
  });

  it('keeps two mirrors whose names differ only in _ and -', async () => {
    const underscored = `pg_to_ch_${suffix}`;
    const dashed = `pg-to-ch-${suffix}`;
    expect((await createMirror(underscored, 'public.a')).statusCode).toBe(200);
    // Default slot and publication names hash the exact mirror name: no clash.
    const created = await createMirror(dashed, 'public.b');
    expect(created.statusCode, created.body).toBe(200);
    // A slot name given by two mirrors on one source is refused for the second.
    const own = await createMirror(`own_${suffix}`, 'public.d', { replicationSlotName: `own_${suffix}` });
    expect(own.statusCode, own.body).toBe(200);
    const clash = await createMirror(`clash_${suffix}`, 'public.e', { replicationSlotName: `own_${suffix}` });
    expect(clash.statusCode).toBe(400);
    expect(clash.json().message).toContain('set replication_slot_name to another name');
    const { store } = facade.controlPlane;
    expect((await store.getMirror(underscored))?.spec.tableMappings[0]?.destination.table).toBe('a');
    expect((await store.getMirror(dashed))?.spec.tableMappings[0]?.destination.table).toBe('b');
    const names = (await store.listMirrors()).map((mirror) => mirror.name);
    expect(names).toEqual(expect.arrayContaining([underscored, dashed]));

    const pause = await facade.post('/api/v1/mirrors/state_change', {
      flow_job_name: underscored,
      requested_flow_state: 'STATUS_PAUSED',
    });
    expect(pause.json()).toEqual({ ok: true, errorMessage: '' });
    expect((await store.getMirror(underscored))?.spec.state).toBe('Paused');
    expect((await store.getMirror(dashed))?.spec.state).toBe('Running');
    const status = await facade.post('/api/v1/mirrors/status', { flowJobName: underscored });
    expect(status.json()).toMatchObject({ flowJobName: underscored, ok: true });
  });

  it('takes names of the original rule for peers and scripts, and reads them back', async () => {
    for (const name of [`_lead_${suffix}`, `trail_${suffix}_`, `${suffix}_digits_first`]) {
      const response = await facade.post('/api/v1/peers/create', relationalPeer(name));
      expect(response.json(), name).toMatchObject({ status: 'CREATED' });
      const info = await facade.request({ method: 'GET', url: `/api/v1/peers/info/${name}` });
      expect(info.json().peer.name).toBe(name);
      const script = await facade.post('/api/v1/scripts', {
        script: { id: -1, name, lang: 'lua', source: 'function onRecord(r) return r end' },
      });
      expect(script.statusCode, script.body).toBe(200);
    }
  });

  it('refuses the same names beyond the rule in both modes with a 400 naming the field', async () => {
    for (const name of [
      `Upper_${suffix}`,
      `dot.${suffix}`,
      `-lead-${suffix}`,
      `space ${suffix}`,
      'x'.repeat(64),
    ]) {
      const mirror = await createMirror(name, 'public.c');
      expect(mirror.statusCode, name).toBe(400);
      expect(mirror.json().message).toContain('connectionConfigs.flowJobName: ');
      const peer = await facade.post('/api/v1/peers/create', relationalPeer(name));
      expect(peer.statusCode, name).toBe(400);
      expect(peer.json()).toEqual({ status: 'FAILED', message: expect.stringContaining('peer.name: ') });
    }
  });

  it('answers every one of concurrent peers/create updates with allow_update', async () => {
    const name = `pg_updated_${suffix}`;
    expect((await facade.post('/api/v1/peers/create', relationalPeer(name))).statusCode).toBe(200);
    const databases = [source.config.database, 'postgres'];
    const responses = await Promise.all(
      Array.from({ length: 16 }, (_, index) =>
        facade.post('/api/v1/peers/create', {
          ...relationalPeer(name, databases[index % 2]),
          allow_update: true,
        }),
      ),
    );
    for (const response of responses) {
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toEqual({ status: 'CREATED', message: `peer ${name} updated` });
    }
    const stored = await facade.controlPlane.store.getPeer(name);
    expect(databases).toContain((stored?.peer.config as { database?: string } | undefined)?.database);
  });

  describe.runIf(clusterMode)('cluster mode objects', () => {
    const objects = () => adminConfig().makeApiClient(CustomObjectsApi);
    const namespace = () => facade.controlPlane.kube?.namespace as string;
    const specOf = (name: string) => {
      const { name: _name, ...spec } = mirrorResourceSpecSchema.parse({
        name,
        sourcePeer,
        destinationPeer,
        tableMappings: [
          { source: { schema: 'public', table: 'orders' }, destination: { schema: 'public', table: 'k' } },
        ],
        doInitialSnapshot: false,
      });
      return spec;
    };

    it('keeps the API name in an annotation and shows it in kubectl get', async () => {
      const name = `shown_${suffix}`;
      expect((await createMirror(name, 'public.d')).statusCode).toBe(200);
      const object = (await objects().getNamespacedCustomObject({
        group,
        version,
        namespace: namespace(),
        plural: 'mirrors',
        name: kubeObjectName(name),
      })) as { metadata: { annotations?: Record<string, string> } };
      expect(object.metadata.annotations?.[apiNameAnnotation]).toBe(name);
      // The column as the generated CRD declares it, evaluated by kubectl (the CRDs
      // installed in the shared test API server may be another checkout's).
      const mirrorDefinition = customResourceDefinitions().find(
        (definition) => (definition as { spec: { names: { kind: string } } }).spec.names.kind === 'Mirror',
      ) as { spec: { versions: { additionalPrinterColumns: { name: string; jsonPath: string }[] }[] } };
      const column = mirrorDefinition.spec.versions[0]?.additionalPrinterColumns.find(
        (candidate) => candidate.name === 'API Name',
      );
      expect(column).toBeDefined();
      const columns = `custom-columns=NAME:.metadata.name,API NAME:${column?.jsonPath}`;
      const table = await kubectl(['get', 'mirrors', '-n', namespace(), kubeObjectName(name), '-o', columns]);
      expect(table).toMatch(/API NAME/);
      expect(table).toContain(`${kubeObjectName(name)}`);
      expect(table).toContain(` ${name}`);
      const peers = await kubectl([
        'get',
        'peers',
        '-n',
        namespace(),
        kubeObjectName(sourcePeer),
        '-o',
        columns,
      ]);
      expect(peers).toContain(` ${sourcePeer}`);
    });

    it('gives a Mirror created with kubectl its object name as API name', async () => {
      const name = `made-with-kubectl-${suffix}`;
      await objects().createNamespacedCustomObject({
        group,
        version,
        namespace: namespace(),
        plural: 'mirrors',
        body: { apiVersion: `${group}/${version}`, kind: 'Mirror', metadata: { name }, spec: specOf(name) },
      });
      const status = await facade.post('/api/v1/mirrors/status', { flowJobName: name });
      expect(status.json()).toMatchObject({ flowJobName: name, ok: true });
      expect((await facade.controlPlane.store.listMirrors()).map((mirror) => mirror.name)).toContain(name);
    });

    it('never lets an API name overwrite the object of another name that maps to the same object name', async () => {
      const name = `clash_${suffix}`;
      const objectName = kubeObjectName(name);
      // An object created with kubectl under exactly that name: its API name is the object name.
      await objects().createNamespacedCustomObject({
        group,
        version,
        namespace: namespace(),
        plural: 'mirrors',
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'Mirror',
          metadata: { name: objectName },
          spec: specOf(objectName),
        },
      });
      const response = await createMirror(name, 'public.e');
      expect(response.statusCode).toBe(409);
      expect(response.json().message).toContain(`its object name ${objectName} holds mirror ${objectName}`);
      const { store } = facade.controlPlane;
      expect(await store.getMirror(name)).toBeUndefined();
      expect((await store.getMirror(objectName))?.spec.tableMappings[0]?.destination.table).toBe('k');
      // The same for a peer.
      const peer = await facade.post('/api/v1/peers/create', {
        ...relationalPeer(kubeObjectName(destinationPeer.replace(/-/g, '_'))),
      });
      expect(peer.statusCode).toBe(200);
      const clash = await facade.post('/api/v1/peers/create', {
        ...relationalPeer(destinationPeer.replace(/-/g, '_')),
      });
      expect(clash.statusCode).toBe(409);
      expect(clash.json()).toMatchObject({ status: 'FAILED' });
    });
  });
});

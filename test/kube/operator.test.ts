// The operator against the real kube-apiserver: resources applied as a user
// would, engines as local processes standing in for pods, real PostgreSQL.
import type { ChildProcess } from 'node:child_process';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorPolicy, PostgresCatalog } from '../../engine/src/index.ts';
import { group, version } from '../../operator/src/crds/schemas.ts';
import {
  createTestDatabase,
  droppablePool,
  type TestDatabase,
  waitFor,
  waitForSameRows,
} from '../support/databases.ts';
import { freePort } from '../support/engine-process.ts';
import { adminConfig, createNamespace, installCrds } from '../support/kube.ts';
import { exitOf, startOperator } from '../support/operator-process.ts';

interface MirrorObject {
  metadata: { name: string; finalizers?: string[] };
  spec: Record<string, unknown>;
  status?: {
    phase?: string;
    rowsSynced?: string;
    conditions?: { type: string; status: string; reason?: string }[];
    tables?: { sourceTableIdentifier: string; state: string }[];
  };
}

describe('operator', () => {
  const config = adminConfig();
  const objects = config.makeApiClient(CustomObjectsApi);
  const core = config.makeApiClient(CoreV1Api);
  let namespace = '';
  let source: TestDatabase;
  let destination: TestDatabase;
  let catalogDatabase: TestDatabase;
  const operators: ChildProcess[] = [];
  const at = (plural: string) => ({ group, version, namespace, plural });
  const metricsPorts = { a: 0, b: 0 };
  /** One sample of an operator's /metrics, by its name and labels as printed. */
  const metric = async (port: number, sample: string): Promise<number | undefined> => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const line = text.split('\n').find((candidate) => candidate.startsWith(`${sample} `));
    return line === undefined ? undefined : Number(line.slice(sample.length + 1));
  };

  const mirror = async (name: string) =>
    (await objects.getNamespacedCustomObject({ ...at('mirrors'), name }).catch(() => undefined)) as
      | MirrorObject
      | undefined;

  const sameRows = (table: string) => waitForSameRows(source.client, destination.client, table);

  async function applyPeer(name: string, database: TestDatabase) {
    const { password, ...rest } = database.config;
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: {
          name: `${name}-secret`,
          labels: { 'tributary.dev/peer-secret': 'true' },
          annotations: { 'tributary.dev/peers': name },
        },
        stringData: { password },
      },
    });
    await objects.createNamespacedCustomObject({
      ...at('peers'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Peer',
        metadata: { name },
        spec: { kind: 'relational', relational: rest, secretRef: { name: `${name}-secret` } },
      },
    });
  }

  beforeAll(async () => {
    await installCrds(config);
    namespace = await createNamespace('op');
    [source, destination, catalogDatabase] = await Promise.all([
      createTestDatabase('op_src'),
      createTestDatabase('op_dst'),
      createTestDatabase('op_cat'),
    ]);
    // The catalog is left unmigrated: the operator migrates it on start.
    await source.client.query(`CREATE TABLE items (id int PRIMARY KEY, v text)`);
    await source.client.query(`CREATE TABLE extra (id int PRIMARY KEY)`);
    await source.client.query(`INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 1000) g`);
    await source.client.query(`INSERT INTO extra SELECT generate_series(1, 50)`);
    await source.client.query(`CREATE TABLE more (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO more SELECT g, 'm' || g FROM generate_series(1, 3000) g`);
    await applyPeer('source', source);
    await applyPeer('destination', destination);
    metricsPorts.a = await freePort();
    operators.push(startOperator(namespace, catalogDatabase.config, 'operator-a', 4, metricsPorts.a));
  });

  afterAll(async () => {
    for (const operator of operators) operator.kill('SIGTERM');
    await Promise.all(operators.map(exitOf));
    await Promise.all([source?.drop(), destination?.drop(), catalogDatabase?.drop()]);
  });

  it('checks peers and records their version and readiness', async () => {
    await waitFor(
      async () => {
        const peer = (await objects.getNamespacedCustomObject({ ...at('peers'), name: 'source' })) as {
          status?: { version?: string; conditions?: { type: string; status: string }[] };
        };
        return peer.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
      },
      30_000,
      'peer ready',
    );
    // Writing the status is itself a change the operator watches: it must not
    // take it for a reason to check again (the next check is minutes away).
    const checkedAt = async () =>
      (
        (await objects.getNamespacedCustomObject({ ...at('peers'), name: 'source' })) as {
          status?: { lastCheckTime?: string };
        }
      ).status?.lastCheckTime;
    const first = await checkedAt();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await checkedAt()).toBe(first);
  });

  it('says which Secret a peer lacks, and records an Event once rather than on every check', async () => {
    const { password: _password, ...relational } = destination.config;
    await objects.createNamespacedCustomObject({
      ...at('peers'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Peer',
        metadata: { name: 'orphan' },
        spec: { kind: 'relational', relational, secretRef: { name: 'not-created' } },
      },
    });
    type PeerStatus = {
      observedGeneration?: number;
      conditions?: { type: string; status: string; reason: string; message: string }[];
    };
    const orphanStatus = async () =>
      (
        (await objects.getNamespacedCustomObject({ ...at('peers'), name: 'orphan' })) as {
          status?: PeerStatus;
        }
      ).status;
    let status: PeerStatus | undefined;
    await waitFor(
      async () => {
        status = await orphanStatus();
        return status?.conditions !== undefined;
      },
      30_000,
      'orphan peer status',
    );
    expect(status?.observedGeneration).toBe(1);
    const ready = status?.conditions?.find((condition) => condition.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'SecretNotFound' });
    expect(ready?.message).toContain('Secret not-created not found');
    const warnings = async () =>
      (await core.listNamespacedEvent({ namespace })).items.filter(
        (event) => event.involvedObject.name === 'orphan' && event.reason === 'SecretNotFound',
      ).length;
    await waitFor(async () => (await warnings()) === 1, 10_000, 'SecretNotFound event');
    // An edit makes the operator check again: same failure, no second Event.
    await objects.patchNamespacedCustomObject({
      ...at('peers'),
      name: 'orphan',
      body: [{ op: 'replace', path: '/spec/relational/port', value: relational.port + 1 }],
    });
    await waitFor(async () => (await orphanStatus())?.observedGeneration === 2, 30_000, 'second check');
    expect(await warnings()).toBe(1);
  });

  it('runs an applied mirror, reports its status, pauses, resumes and takes an edit', async () => {
    await objects.createNamespacedCustomObject({
      ...at('mirrors'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Mirror',
        metadata: { name: 'items' },
        spec: {
          sourcePeer: 'source',
          destinationPeer: 'destination',
          tableMappings: [
            {
              source: { schema: 'public', table: 'items' },
              destination: { schema: 'public', table: 'items' },
            },
          ],
          doInitialSnapshot: true,
          idleTimeoutSeconds: 1,
        },
      },
    });
    await sameRows('items');
    await waitFor(
      async () => (await mirror('items'))?.status?.phase === 'STATUS_RUNNING',
      60_000,
      'running status',
    );
    const running = await mirror('items');
    expect(running?.metadata.finalizers).toContain('tributary.dev/teardown');
    expect(running?.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    await waitFor(
      async () => Number((await mirror('items'))?.status?.rowsSynced ?? 0) >= 1000,
      30_000,
      'rows',
    );

    const events = await core.listNamespacedEvent({ namespace });
    expect(
      events.items.some((event) => event.involvedObject.name === 'items' && event.reason === 'PhaseChanged'),
    ).toBe(true);

    await objects.patchNamespacedCustomObject({
      ...at('mirrors'),
      name: 'items',
      body: [{ op: 'replace', path: '/spec/state', value: 'Paused' }],
    });
    await waitFor(async () => (await mirror('items'))?.status?.phase === 'STATUS_PAUSED', 60_000, 'paused');
    await source.client.query(`INSERT INTO items VALUES (5000, 'while paused')`);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect((await destination.client.query(`SELECT 1 FROM items WHERE id = 5000`)).rowCount).toBe(0);

    await objects.patchNamespacedCustomObject({
      ...at('mirrors'),
      name: 'items',
      body: [
        { op: 'replace', path: '/spec/state', value: 'Running' },
        {
          op: 'add',
          path: '/spec/tableMappings/-',
          value: {
            source: { schema: 'public', table: 'extra' },
            destination: { schema: 'public', table: 'extra' },
          },
        },
      ],
    });
    await sameRows('items');
    await sameRows('extra');

    // On the running mirror, no pause: `more` added and `extra` removed by a
    // change of spec.tableMappings alone, while `items` takes writes.
    await waitFor(async () => (await mirror('items'))?.status?.phase === 'STATUS_RUNNING', 60_000, 'running');
    const phases = new Set<string>();
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const phase = (await mirror('items'))?.status?.phase;
        if (phase) phases.add(phase);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
    try {
      await objects.patchNamespacedCustomObject({
        ...at('mirrors'),
        name: 'items',
        body: [
          { op: 'test', path: '/spec/tableMappings/1/source/table', value: 'extra' },
          {
            op: 'replace',
            path: '/spec/tableMappings/1',
            value: {
              source: { schema: 'public', table: 'more' },
              destination: { schema: 'public', table: 'more' },
            },
          },
        ],
      });
      await source.client.query(`INSERT INTO items SELECT g, 'during' FROM generate_series(20000, 20100) g`);
      await source.client.query(`INSERT INTO more VALUES (9000, 'during')`);
      await sameRows('more');
      await sameRows('items');
      await waitFor(
        async () => {
          const tables = (await mirror('items'))?.status?.tables ?? [];
          const state = (name: string) => tables.find((t) => t.sourceTableIdentifier === name)?.state;
          return (
            state('public.extra') === 'TABLE_STATE_REMOVED' &&
            state('public.more') === 'TABLE_STATE_STREAMING'
          );
        },
        60_000,
        'extra removed and more streaming in status.tables',
      );
      // The removed table's changes stop; its destination table stays as it was.
      await source.client.query(`INSERT INTO extra VALUES (5000)`);
      await source.client.query(`INSERT INTO items VALUES (20500, 'marker')`);
      await sameRows('items');
      expect((await destination.client.query(`SELECT count(*)::int AS n FROM extra`)).rows[0]?.n).toBe(50);
    } finally {
      watching = false;
      await watch;
    }
    expect([...phases].filter((phase) => phase !== 'STATUS_RUNNING')).toEqual([]);
  });

  it('shows a fault the engine retries as a Degraded condition and a Retrying event, then clears it', async () => {
    const pool = droppablePool({ ...catalogDatabase.config, max: 1 });
    const catalog = new PostgresCatalog(pool);
    const fault =
      'destination: sync batch 7 failed (ECONNREFUSED); retrying. check that the peer host and port are reachable from the engine';
    const degraded = async () =>
      (await mirror('items'))?.status?.conditions?.find((condition) => condition.type === 'Degraded');
    try {
      // What the engine's supervisor records while it retries (test/e2e/self-healing.test.ts).
      await catalog.setRetryingError('items', fault);
      await waitFor(async () => (await degraded())?.status === 'True', 60_000, 'Degraded');
      expect(await degraded()).toMatchObject({ reason: 'Retrying', message: fault });
      expect((await mirror('items'))?.status?.phase).toBe('STATUS_RUNNING');
      await waitFor(
        async () =>
          (await core.listNamespacedEvent({ namespace })).items.some(
            (event) => event.involvedObject.name === 'items' && event.reason === 'Retrying',
          ),
        30_000,
        'a Retrying event',
      );
      await catalog.setRetryingError('items', null);
      await waitFor(async () => (await degraded())?.status === 'False', 60_000, 'Degraded cleared');
      // What the supervisor's watchdog records while a step makes no progress
      // (test/e2e/load-errors.test.ts), whatever the engine pod's cause.
      const since = new Date('2026-01-02T03:04:05.000Z');
      const step = 'initial load: destination: write public.items partition 1 of 1';
      await catalog.setStall('items', { step, since });
      await waitFor(async () => (await degraded())?.reason === 'Stalled', 60_000, 'Degraded: Stalled');
      expect(await degraded()).toMatchObject({
        status: 'True',
        message: `no progress since 2026-01-02T03:04:05.000Z while waiting on ${step}`,
      });
      await waitFor(
        async () =>
          (await core.listNamespacedEvent({ namespace })).items.some(
            (event) => event.involvedObject.name === 'items' && event.reason === 'Stalled',
          ),
        30_000,
        'a Stalled event',
      );
      await catalog.setStall('items', null);
      await waitFor(async () => (await degraded())?.status === 'False', 60_000, 'Degraded cleared again');
    } finally {
      await catalog.setStall('items', null).catch(() => {});
      await catalog.setRetryingError('items', null).catch(() => {});
      await pool.end();
    }
  });

  it.each([
    {
      // Validation finds the table logging no old rows: source_setup, a `manual`
      // fault. (A table dropped is that table's own fault, not the mirror's:
      // test/e2e/source-table-gone.test.ts.)
      name: 'identityless',
      fault: 'manual' as const,
      remedy: errorPolicy.source_setup.remedy,
      breakWhilePaused: async (name: string) => {
        await source.client.query(`ALTER TABLE ${name} REPLICA IDENTITY NOTHING`);
      },
    },
    {
      // The slot is gone: slot_invalidated, a `never` fault (the remedy names the resync).
      name: 'slotless',
      fault: 'never' as const,
      remedy: errorPolicy.slot_invalidated.remedy,
      breakWhilePaused: async (name: string) => {
        const pool = droppablePool({ ...catalogDatabase.config, max: 1 });
        try {
          const slot = (await new PostgresCatalog(pool).getRuntime(name))?.setup?.slotName;
          await source.client.query(`SELECT pg_drop_replication_slot($1)`, [slot]);
        } finally {
          await pool.end();
        }
      },
    },
  ])(
    'fails a resumed Mirror whose engine meets a $fault fault ($name), with the remedy in its status',
    async ({ name: broken, remedy, breakWhilePaused }) => {
      await source.client.query(`CREATE TABLE ${broken} (id int PRIMARY KEY)`);
      await source.client.query(`INSERT INTO ${broken} SELECT generate_series(1, 10)`);
      await objects.createNamespacedCustomObject({
        ...at('mirrors'),
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'Mirror',
          metadata: { name: broken },
          spec: {
            sourcePeer: 'source',
            destinationPeer: 'destination',
            tableMappings: [
              {
                source: { schema: 'public', table: broken },
                destination: { schema: 'public', table: broken },
              },
            ],
            doInitialSnapshot: true,
            idleTimeoutSeconds: 1,
          },
        },
      });
      await waitFor(
        async () => (await mirror(broken))?.status?.phase === 'STATUS_RUNNING',
        60_000,
        'running',
      );
      await objects.patchNamespacedCustomObject({
        ...at('mirrors'),
        name: broken,
        body: [{ op: 'replace', path: '/spec/state', value: 'Paused' }],
      });
      await waitFor(async () => (await mirror(broken))?.status?.phase === 'STATUS_PAUSED', 60_000, 'paused');
      await breakWhilePaused(broken);
      await objects.patchNamespacedCustomObject({
        ...at('mirrors'),
        name: broken,
        body: [{ op: 'replace', path: '/spec/state', value: 'Running' }],
      });
      await waitFor(async () => (await mirror(broken))?.status?.phase === 'STATUS_FAILED', 60_000, 'failed');
      const failed = (await mirror(broken)) as MirrorObject & { status: { errorMessage?: string } };
      expect(failed.status.errorMessage).toContain(remedy);
      expect(failed.status.conditions?.find((condition) => condition.type === 'Failed')?.status).toBe('True');
      await waitFor(
        async () =>
          (await core.listNamespacedEvent({ namespace })).items.some(
            (event) => event.involvedObject.name === broken && event.reason === 'MirrorFailed',
          ),
        30_000,
        'a MirrorFailed event',
      );
      const pool = droppablePool({ ...catalogDatabase.config, max: 1 });
      try {
        const catalog = new PostgresCatalog(pool);
        const writes = async () =>
          (await catalog.listLogs({ mirror: broken, offset: 0, limit: 1_000 })).entries.reduce(
            (sum, entry) => sum + entry.repeatCount,
            0,
          );
        // Failed for good: the operator starts no engine again, the log holds still.
        const before = await writes();
        const until = Date.now() + 5_000;
        await waitFor(
          async () => {
            if ((await writes()) - before > 1) throw new Error('the mirror log keeps growing');
            return Date.now() >= until;
          },
          15_000,
          'a quiet log',
        );
        expect((await catalog.getRuntime(broken))?.phase).toBe('failed');
      } finally {
        await pool.end();
      }
      await objects.deleteNamespacedCustomObject({ ...at('mirrors'), name: broken });
    },
  );

  it('lets a mirror applied before its peers wait for them, then run', async () => {
    await source.client.query(`CREATE TABLE early (id int PRIMARY KEY)`);
    await source.client.query(`INSERT INTO early SELECT generate_series(1, 20)`);
    await objects.createNamespacedCustomObject({
      ...at('mirrors'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Mirror',
        metadata: { name: 'early' },
        spec: {
          sourcePeer: 'late-source',
          destinationPeer: 'destination',
          tableMappings: [
            {
              source: { schema: 'public', table: 'early' },
              destination: { schema: 'public', table: 'early' },
            },
          ],
          doInitialSnapshot: true,
          idleTimeoutSeconds: 1,
        },
      },
    });
    // Seen by the operator (it adds its finalizer), with the source peer still missing.
    await waitFor(
      async () => (await mirror('early'))?.metadata.finalizers?.includes('tributary.dev/teardown') === true,
      30_000,
      'the operator to take the mirror',
    );
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const waiting = await mirror('early');
    expect(waiting?.status?.phase).not.toBe('STATUS_FAILED');
    expect(waiting?.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'WaitingForPeer',
    });

    await applyPeer('late-source', source);
    await sameRows('early');
    await waitFor(async () => (await mirror('early'))?.status?.phase === 'STATUS_RUNNING', 60_000, 'running');
    await objects.deleteNamespacedCustomObject({ ...at('mirrors'), name: 'early' });
    await waitFor(async () => (await mirror('early')) === undefined, 60_000, 'early mirror gone');
  });

  it('drops the slot and publication of a mirror deleted together with its peers and their Secrets', async () => {
    await source.client.query(`CREATE TABLE pruned (id int PRIMARY KEY)`);
    await source.client.query(`INSERT INTO pruned SELECT generate_series(1, 30)`);
    await applyPeer('pruned-source', source);
    await applyPeer('pruned-destination', destination);
    await objects.createNamespacedCustomObject({
      ...at('mirrors'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Mirror',
        metadata: { name: 'pruned' },
        spec: {
          sourcePeer: 'pruned-source',
          destinationPeer: 'pruned-destination',
          tableMappings: [
            {
              source: { schema: 'public', table: 'pruned' },
              destination: { schema: 'public', table: 'pruned' },
            },
          ],
          doInitialSnapshot: true,
          idleTimeoutSeconds: 1,
        },
      },
    });
    await sameRows('pruned');
    const slot = () =>
      source.client.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name LIKE 'tributary\\_pruned\\_%'`);
    const publication = () =>
      source.client.query(`SELECT 1 FROM pg_publication WHERE pubname LIKE 'tributary\\_pruned\\_%'`);
    expect((await slot()).rowCount).toBe(1);
    expect((await publication()).rowCount).toBe(1);
    // One `kubectl delete -k` (or a GitOps prune): the Mirror, its Peers and
    // their Secrets in one go, the Peers and Secrets gone long before the teardown.
    await Promise.all([
      objects.deleteNamespacedCustomObject({ ...at('mirrors'), name: 'pruned' }),
      objects.deleteNamespacedCustomObject({ ...at('peers'), name: 'pruned-source' }),
      objects.deleteNamespacedCustomObject({ ...at('peers'), name: 'pruned-destination' }),
      core.deleteNamespacedSecret({ namespace, name: 'pruned-source-secret' }),
      core.deleteNamespacedSecret({ namespace, name: 'pruned-destination-secret' }),
    ]);
    await waitFor(async () => (await mirror('pruned')) === undefined, 60_000, 'pruned mirror gone');
    expect((await slot()).rowCount).toBe(0);
    expect((await publication()).rowCount).toBe(0);
  });

  it('hands over to a second replica when the leader dies', async () => {
    metricsPorts.b = await freePort();
    const second = startOperator(namespace, catalogDatabase.config, 'operator-b', 4, metricsPorts.b);
    operators.push(second);
    const leases = config.makeApiClient(CoordinationV1Api);
    const holder = async () =>
      (await leases.readNamespacedLease({ name: 'tributary-operator', namespace })).spec?.holderIdentity;
    expect(await holder()).toBe('operator-a');
    // The standby is up (it serves metrics once started) and does not act:
    // still operator-a after a few of its retries.
    await waitFor(
      async () =>
        (await metric(metricsPorts.b, 'tributary_operator_leader').catch(() => undefined)) !== undefined,
      30_000,
      'the standby to start',
    );
    // The kubelet's probes: both replicas live and ready (a standby only waits for the lease).
    for (const port of [metricsPorts.a, metricsPorts.b]) {
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      await waitFor(
        async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
        10_000,
        `operator on ${port} ready`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await holder()).toBe('operator-a');
    // Prometheus sees the same: one leader, and the leader's reconciles.
    expect(await metric(metricsPorts.a, 'tributary_operator_leader')).toBe(1);
    expect(await metric(metricsPorts.b, 'tributary_operator_leader')).toBe(0);
    expect(
      await metric(metricsPorts.a, 'tributary_operator_reconciles_total{kind="mirror",result="ok"}'),
    ).toBeGreaterThan(0);
    const first = operators[0];
    const leaseBeforeKill = (await leases.readNamespacedLease({ name: 'tributary-operator', namespace }))
      .spec;
    first?.kill('SIGKILL');
    await waitFor(async () => (await holder()) === 'operator-b', 30_000, 'takeover');
    await waitFor(
      async () => (await metric(metricsPorts.b, 'tributary_operator_leader')) === 1,
      10_000,
      'b leads',
    );
    // Taken over only once the dead leader's lease had expired (its last renewal is at
    // or after the one read before the kill); how soon is bounded by the wait above.
    const leaseAfter = (await leases.readNamespacedLease({ name: 'tributary-operator', namespace })).spec;
    const renewedBeforeKill = new Date(leaseBeforeKill?.renewTime ?? 0).getTime();
    const leaseMs = (leaseBeforeKill?.leaseDurationSeconds ?? 0) * 1000;
    expect(leaseMs).toBeGreaterThan(0);
    expect(new Date(leaseAfter?.acquireTime ?? 0).getTime()).toBeGreaterThanOrEqual(
      renewedBeforeKill + leaseMs,
    );
    await source.client.query(`INSERT INTO items VALUES (6000, 'after takeover')`);
    await sameRows('items');
    // The dead leader's engine stopped with it: one engine reads the slot.
    const readers = await source.client.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'tributary:items:cdc'`,
    );
    expect(readers.rows[0]?.n).toBe(1);
  });

  it('tears a deleted mirror down before the object goes', async () => {
    await objects.deleteNamespacedCustomObject({ ...at('mirrors'), name: 'items' });
    await waitFor(async () => (await mirror('items')) === undefined, 60_000, 'mirror gone');
    const slots = await source.client.query(`SELECT 1 FROM pg_replication_slots WHERE database = $1`, [
      source.name,
    ]);
    expect(slots.rowCount).toBe(0);
    const publications = await source.client.query(`SELECT 1 FROM pg_publication`);
    expect(publications.rowCount).toBe(0);
    expect(
      (await destination.client.query(`SELECT count(*)::int AS n FROM items`)).rows[0]?.n,
    ).toBeGreaterThan(1000);
  });
});

// The chart end to end on a real node (scripts/testenv/node.sh): installed
// with `helm install` as a user would, with the catalog on the test
// PostgreSQL and the project's image (scripts/testenv/image.sh); the examples
// applied with `kubectl apply -k`; engines run as pods by the kubelet. Each
// step of docs/testing.md's "real node" section is asserted in order: the
// steps share one installation, so a failing step fails the ones after it.
// Pods reach the test services on the bridge's address, and the test's own
// webhook receiver listens on it; the test reaches pods on their pod IPs
// (there is no kube-proxy).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import type { Consumer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kafkaClient } from '../integration/kafka-support.ts';
import {
  createTestDatabase,
  randomSuffix,
  type TestDatabase,
  tableRows,
  waitFor,
  waitForSameRows,
} from '../support/databases.ts';
import {
  containerPid,
  helm,
  kubectl,
  kubectlJson,
  type NodeFacts,
  nodeFacts,
  type PodView,
  podReady,
  podsOf,
} from '../support/node-cluster.ts';
import { emulatorConfig, emulatorUrl, SnowflakeAdmin, uniqueName } from '../support/snowflake-peer.ts';
import { clickhouse, kafka, postgres, repoRoot } from '../support/testenv.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.ts';

const suffix = randomSuffix();
const namespace = `chart-${suffix}`;
const apiPassword = randomBytes(12).toString('hex');
const chDatabase = `cluster_${suffix}`;
const engine = (mirror: string) => `tributary-engine-${mirror}`;
const enginePodSelector = (mirror: string) => `statefulset.kubernetes.io/pod-name=${engine(mirror)}-0`;
const operatorSelector = 'app.kubernetes.io/name=tributary-operator';
const apiSelector = 'app.kubernetes.io/name=tributary-api-server';
/** The example Script (examples/script.yaml) sends each table to `shop.<table>`. */
const kafkaTopic = 'shop.orders';
/** The warehouse peer logs in as a role of its own, so its password can change mid-test. */
const warehouseRole = `cluster_writer_${suffix}`;
const warehousePasswords = ['first-secret', 'second-secret'] as const;
/** The chart's `notifications.webhook.existingSecret`, created before `helm install`. */
const webhookSecret = 'tributary-webhook';
/** A path segment of the webhook URL that only its Secret holds: a log showing it shows the URL. */
const webhookToken = randomBytes(12).toString('hex');

interface MirrorView {
  metadata: { name: string; generation: number };
  spec: { state: string; tableMappings: unknown[] };
  status?: { phase?: string; observedGeneration?: number; rowsSynced?: string };
}

describe('the chart on a real node', () => {
  let facts: NodeFacts;
  let source: TestDatabase;
  let warehouse: TestDatabase;
  let restDestination: TestDatabase;
  let catalog: TestDatabase;
  let analytics: ClickHouseClient;
  let consumer: Consumer | undefined;
  const kafkaIds = new Set<number>();
  const editedIds = new Set<number>();
  let workDir: string;
  let installed = false;
  let receiver: WebhookReceiver;

  const k = (...args: string[]) => kubectl(facts, ['-n', namespace, ...args]);
  const mirror = (name: string) => kubectlJson<MirrorView>(facts, ['-n', namespace, 'get', 'mirror', name]);
  const phaseIs = async (name: string, phase: string) => (await mirror(name)).status?.phase === phase;
  const enginePod = async (name: string) => (await podsOf(facts, namespace, enginePodSelector(name)))[0];
  const engineRunning = async (name: string) => {
    const pod = await enginePod(name);
    return pod !== undefined && podReady(pod);
  };
  /**
   * Waits as `waitFor` does; on a timeout the error also holds the engine's
   * last log lines and what the test's consumer has read, to tell a stuck
   * engine from a stuck consumer.
   */
  const waitForKafka = async (check: () => Promise<boolean>, what: string) => {
    try {
      await waitFor(check, 180_000, what);
    } catch (error) {
      const pod = await enginePod('shop-to-events').catch(() => undefined);
      const log = pod
        ? await kubectl(facts, ['-n', namespace, 'logs', pod.metadata.name, '--tail=40']).catch(String)
        : 'no engine pod';
      const read = `the consumer has read ${kafkaIds.size} orders, ${editedIds.size} edited`;
      throw new Error(`${(error as Error).message}; ${read}; the Kafka engine's last log lines:\n${log}`);
    }
  };
  const sourceCount = async (table: string) =>
    Number((await source.client.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);

  async function apiServerUrl(): Promise<string> {
    const pods = (await podsOf(facts, namespace, apiSelector)).filter(podReady);
    const ip = pods[0]?.status.podIP;
    if (!ip) throw new Error('no ready api-server pod');
    return `http://${ip}:8112`;
  }

  async function api(
    path: string,
    body?: unknown,
  ): Promise<{ status: number; json: Record<string, unknown> }> {
    const response = await fetch(`${await apiServerUrl()}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`:${apiPassword}`).toString('base64')}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(30_000),
    });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  }

  async function slotsOf(): Promise<string[]> {
    const result = await source.client.query<{ slot_name: string }>(
      'SELECT slot_name FROM pg_replication_slots WHERE database = $1 ORDER BY 1',
      [source.name],
    );
    return result.rows.map((row) => row.slot_name);
  }

  async function publications(): Promise<string[]> {
    const result = await source.client.query<{ pubname: string }>(
      'SELECT pubname FROM pg_publication ORDER BY 1',
    );
    return result.rows.map((row) => row.pubname);
  }

  /** Inserts and updates orders until stopped: CDC under load while pods die. */
  function startWriter(): { stop: () => Promise<number> } {
    let stopped = false;
    let next = 100_000;
    const loop = (async () => {
      while (!stopped) {
        await source.client.query('INSERT INTO orders VALUES ($1, $2, $3)', [
          next,
          next % 97,
          `written ${next}`,
        ]);
        await source.client.query('UPDATE orders SET amount = amount + 1 WHERE id = $1', [next - 50]);
        next += 1;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    return {
      stop: async () => {
        stopped = true;
        await loop;
        return next - 100_000;
      },
    };
  }

  beforeAll(async () => {
    facts = nodeFacts();
    [source, warehouse, restDestination, catalog] = await Promise.all([
      createTestDatabase('cluster_src'),
      createTestDatabase('cluster_dst'),
      createTestDatabase('cluster_rest'),
      createTestDatabase('cluster_cat'),
    ]);
    await source.client.query(
      `CREATE ROLE ${warehouseRole} LOGIN SUPERUSER PASSWORD '${warehousePasswords[0]}'`,
    );
    await source.client.query('CREATE TABLE orders (id int PRIMARY KEY, amount int NOT NULL, note text)');
    await source.client.query('CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text)');
    await source.client.query('CREATE TABLE refunds (id int PRIMARY KEY, order_id int NOT NULL)');
    await source.client.query(
      `INSERT INTO orders SELECT i, i % 97, 'order ' || i FROM generate_series(1, 500) i;
       INSERT INTO customers SELECT i, 'customer ' || i, 'c' || i || '@example.test' FROM generate_series(1, 200) i;
       INSERT INTO refunds SELECT i, i * 2 FROM generate_series(1, 50) i;`,
    );
    analytics = createClient({
      url: clickhouse.server.url,
      username: clickhouse.server.user,
      password: clickhouse.server.password,
      request_timeout: 60_000,
      log: { level: ClickHouseLogLevel.OFF },
    });
    await analytics.command({ query: `CREATE DATABASE ${chDatabase}` });
    // The example Script's topic names are fixed: start from empty topics.
    const admin = kafkaClient('SCRAM-SHA-512').admin();
    await admin.connect();
    try {
      const existing = (await admin.listTopics()).filter((topic) => topic.startsWith('shop.'));
      if (existing.length > 0) await admin.deleteTopics({ topics: existing, timeout: 15_000 });
    } finally {
      await admin.disconnect();
    }
    workDir = mkdtempSync(join(tmpdir(), 'chart-'));
    // On the bridge's address: the operator pods post to it directly (no DNAT).
    receiver = await startWebhookReceiver(facts.gateway);
  });

  afterAll(async () => {
    // Everything this suite started, whatever step failed.
    await receiver?.close().catch(() => {});
    await consumer?.disconnect().catch(() => {});
    const admin = kafkaClient('SCRAM-SHA-512').admin();
    await admin
      .connect()
      .then(() => admin.deleteTopics({ topics: [kafkaTopic], timeout: 15_000 }))
      .catch(() => {});
    await admin.disconnect().catch(() => {});
    if (facts && installed) {
      // While the operator runs: teardown drops the slots and lets the engine Secrets go.
      await kubectl(facts, ['-n', namespace, 'delete', 'mirrors', '--all', '--timeout=120s']).catch(() => {});
      await helm(facts, ['uninstall', 'tributary', '--namespace', namespace, '--wait']).catch(() => {});
    }
    if (facts) {
      await kubectl(facts, ['delete', 'namespace', namespace, '--wait=false']).catch(() => {});
      // Without an operator left, the teardown finalizers would hold the namespace forever.
      for (const kind of ['mirrors', 'peers', 'scripts', 'secrets']) {
        const names = await kubectl(facts, ['-n', namespace, 'get', kind, '-o', 'name']).catch(() => '');
        for (const name of names.split('\n').filter(Boolean)) {
          await kubectl(facts, [
            '-n',
            namespace,
            'patch',
            name,
            '--type',
            'merge',
            '-p',
            '{"metadata":{"finalizers":null}}',
          ]).catch(() => {});
        }
      }
    }
    await analytics?.command({ query: `DROP DATABASE IF EXISTS ${chDatabase}` }).catch(() => {});
    await analytics?.close();
    await Promise.all([warehouse, restDestination, catalog].map((database) => database?.drop()));
    await source?.client.query(`DROP ROLE IF EXISTS ${warehouseRole}`).catch(() => {});
    await source?.drop();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it('installs with helm: two operators, one holding the Lease, and a ready api-server serving /api/v1', async () => {
    await kubectl(facts, ['create', 'namespace', namespace]);
    // On stdin, not in kubectl's arguments: the URL is a secret.
    await kubectl(
      facts,
      ['-n', namespace, 'apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: webhookSecret },
        stringData: { url: `${receiver.url}/${webhookToken}` },
      }),
    );
    const [repository, tag] = [
      facts.image.slice(0, facts.image.lastIndexOf(':')),
      facts.image.split(':').pop(),
    ];
    installed = true;
    await helm(facts, [
      'install',
      'tributary',
      join(repoRoot, 'charts', 'tributary'),
      '--namespace',
      namespace,
      '--set',
      `image.repository=${repository}`,
      '--set',
      `image.tag=${tag}`,
      '--set',
      'image.pullPolicy=Never',
      '--set',
      `catalog.url=postgres://${postgres.superuser.user}:${postgres.superuser.password}@${facts.gateway}:${postgres.port}/${catalog.name}`,
      '--set',
      `api.password=${apiPassword}`,
      '--set',
      `notifications.webhook.existingSecret=${webhookSecret}`,
      '--set',
      'notifications.checkSeconds=1',
    ]);
    await waitFor(
      async () => (await podsOf(facts, namespace, operatorSelector)).filter(podReady).length === 2,
      150_000,
      'two ready operator pods',
    );
    await waitFor(
      async () => (await podsOf(facts, namespace, apiSelector)).filter(podReady).length === 1,
      150_000,
      'a ready api-server pod',
    );
    const operators = (await podsOf(facts, namespace, operatorSelector)).map((pod) => pod.metadata.name);
    let holder = '';
    await waitFor(
      async () => {
        const lease = await kubectlJson<{ spec: { holderIdentity?: string } }>(facts, [
          '-n',
          namespace,
          'get',
          'lease',
          'tributary-operator',
        ]);
        holder = lease.spec.holderIdentity ?? '';
        return operators.includes(holder);
      },
      60_000,
      'an operator pod holding the Lease',
    );
    expect(operators).toContain(holder);
    const openapi = await api('/api/v1/openapi.json');
    expect(openapi.status).toBe(200);
    expect(Object.keys(openapi.json.paths as object)).toContain('/api/v1/flows/cdc/create');
    const unknown = await api('/api/v1/mirrors/status', { flowJobName: 'no-such-mirror' });
    expect(unknown.status).toBe(404);
  }, 400_000);

  it('runs the examples applied with kubectl apply -k: PG to PG, ClickHouse and Kafka engines as pods', async () => {
    const peerPatch = (name: string, path: string, value: unknown) => ({
      target: { kind: 'Peer', name },
      patch: JSON.stringify([{ op: 'add', path, value }]),
    });
    const relational = (database: string) => ({
      host: facts.gateway,
      port: postgres.port,
      user: postgres.superuser.user,
      database,
    });
    const generated = (name: string, peer: string, password: string) => ({
      name,
      literals: [`password=${password}`],
      options: {
        disableNameSuffixHash: true,
        labels: { 'tributary.dev/peer-secret': 'true' },
        annotations: { 'tributary.dev/peers': peer },
      },
    });
    // The examples as they are, plus a PostgreSQL destination and a Kafka mirror, pointed at the test services.
    writeFileSync(
      join(workDir, 'warehouse.yaml'),
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          {
            apiVersion: 'tributary.dev/v1alpha1',
            kind: 'Peer',
            metadata: { name: 'warehouse' },
            spec: {
              kind: 'relational',
              relational: { ...relational(warehouse.name), user: warehouseRole },
              secretRef: { name: 'warehouse-db' },
            },
          },
          {
            apiVersion: 'tributary.dev/v1alpha1',
            kind: 'Mirror',
            metadata: { name: 'shop-to-warehouse' },
            spec: {
              sourcePeer: 'shop',
              destinationPeer: 'warehouse',
              state: 'Running',
              doInitialSnapshot: true,
              idleTimeoutSeconds: 1,
              tableMappings: [
                {
                  source: { schema: 'public', table: 'orders' },
                  destination: { schema: 'public', table: 'orders' },
                },
                {
                  source: { schema: 'public', table: 'customers' },
                  destination: { schema: 'public', table: 'customers' },
                },
              ],
            },
          },
          {
            apiVersion: 'tributary.dev/v1alpha1',
            kind: 'Mirror',
            metadata: { name: 'shop-to-events' },
            spec: {
              sourcePeer: 'shop',
              destinationPeer: 'events',
              state: 'Running',
              doInitialSnapshot: true,
              idleTimeoutSeconds: 1,
              script: 'topic-per-table',
              tableMappings: [
                {
                  source: { schema: 'public', table: 'orders' },
                  destination: { schema: 'public', table: 'orders' },
                },
              ],
            },
          },
        ],
      }),
    );
    writeFileSync(
      join(workDir, 'kustomization.yaml'),
      JSON.stringify({
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        namespace,
        resources: [relative(workDir, join(repoRoot, 'examples')), 'warehouse.yaml'],
        secretGenerator: [
          generated('shop-db', 'shop', postgres.superuser.password),
          generated('warehouse-db', 'warehouse', warehousePasswords[0]),
          generated('analytics-db', 'analytics', clickhouse.server.password),
          generated('events-kafka', 'events', kafka.scram.password),
        ],
        patches: [
          peerPatch('shop', '/spec/relational', relational(source.name)),
          peerPatch('analytics', '/spec/analytics', {
            host: facts.gateway,
            port: clickhouse.server.nativePort,
            httpPort: Number(new URL(clickhouse.server.url).port),
            user: clickhouse.server.user,
            database: chDatabase,
            disableTls: true,
          }),
          peerPatch('events', '/spec/stream', {
            servers: [`${facts.gateway}:${kafka.podPort}`],
            username: kafka.scram.username,
            sasl: 'SCRAM-SHA-512',
            disableTls: true,
          }),
          {
            target: { kind: 'Mirror', name: 'shop-to-analytics' },
            patch: JSON.stringify([
              { op: 'replace', path: '/spec/tableMappings/0/destination/schema', value: chDatabase },
              { op: 'replace', path: '/spec/tableMappings/1/destination/schema', value: chDatabase },
              { op: 'replace', path: '/spec/idleTimeoutSeconds', value: 1 },
            ]),
          },
        ],
      }),
    );
    await kubectl(facts, ['apply', '-k', workDir]);

    for (const name of ['shop-to-warehouse', 'shop-to-analytics', 'shop-to-events']) {
      await waitFor(() => engineRunning(name), 180_000, `the ${name} engine pod running`);
    }
    await waitForSameRows(source.client, warehouse.client, 'orders', 180_000);
    await waitForSameRows(source.client, warehouse.client, 'customers', 60_000);
    const chCount = async (table: string) => {
      const result = await analytics.query({
        query: `SELECT count() AS n FROM ${chDatabase}.${table} FINAL`,
        format: 'JSONEachRow',
      });
      return Number(((await result.json()) as { n: string }[])[0]?.n);
    };
    await waitFor(async () => (await chCount('orders')) === 500, 180_000, 'orders in ClickHouse');
    await waitFor(async () => (await chCount('customers')) === 200, 60_000, 'customers in ClickHouse');

    // The engine creates the topic with its first message.
    const admin = kafkaClient('SCRAM-SHA-512').admin();
    await admin.connect();
    try {
      // With a leader: a consumer that joins before the topic's partition has
      // one can be left without an assignment until its next metadata refresh.
      await waitFor(
        async () => {
          const { topics } = await admin.fetchTopicMetadata({ topics: [kafkaTopic] });
          const partitions = topics[0]?.partitions ?? [];
          return partitions.length > 0 && partitions.every((partition) => partition.leader >= 0);
        },
        180_000,
        `topic ${kafkaTopic} with a leader`,
      );
    } finally {
      await admin.disconnect();
    }
    consumer = kafkaClient('SCRAM-SHA-512').consumer({ groupId: `cluster-${suffix}` });
    await consumer.connect();
    await consumer.subscribe({ topic: kafkaTopic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        const value = JSON.parse(message.value?.toString() ?? 'null') as {
          id?: number;
          edited?: boolean;
        } | null;
        if (value?.id !== undefined) (value.edited ? editedIds : kafkaIds).add(Number(value.id));
      },
    });
    await waitForKafka(async () => kafkaIds.size === 500, 'every order as a Kafka message');
  }, 600_000);

  it('shows state, phase, lag and rows in kubectl get mirrors, and the story in kubectl describe', async () => {
    await waitFor(() => phaseIs('shop-to-warehouse', 'STATUS_RUNNING'), 120_000, 'STATUS_RUNNING');
    let table = '';
    await waitFor(
      async () => {
        table = await k('get', 'mirrors');
        const row = table.split('\n').find((line) => line.startsWith('shop-to-warehouse '));
        return /\bRunning\s+STATUS_RUNNING\s+True\s+\d+\s+\d+/.test(row ?? '');
      },
      120_000,
      'kubectl get mirrors to show the running mirror with lag and rows',
    );
    expect(table.split('\n')[0]).toMatch(/^NAME\s+API NAME\s+STATE\s+PHASE\s+READY\s+LAG\s+ROWS\s+AGE/);
    const events = await kubectlJson<{ items: { reason: string; message: string }[] }>(facts, [
      '-n',
      namespace,
      'get',
      'events',
      '--field-selector',
      'involvedObject.kind=Mirror,involvedObject.name=shop-to-warehouse',
    ]);
    expect(events.items.length).toBeGreaterThan(0);
    const described = await k('describe', 'mirror', 'shop-to-warehouse');
    expect(described).toContain('Events:');
    for (const event of events.items) expect(described).toContain(event.reason);
  }, 300_000);

  it('pauses (engine pod gone, STATUS_PAUSED, nothing lost) and resumes', async () => {
    await k('patch', 'mirror', 'shop-to-warehouse', '--type', 'merge', '-p', '{"spec":{"state":"Paused"}}');
    await waitFor(() => phaseIs('shop-to-warehouse', 'STATUS_PAUSED'), 120_000, 'STATUS_PAUSED');
    await waitFor(
      async () => (await enginePod('shop-to-warehouse')) === undefined,
      120_000,
      'the engine pod gone',
    );
    await source.client.query(
      `INSERT INTO orders SELECT i, 1, 'while paused' FROM generate_series(501, 520) i`,
    );
    // No engine runs: nothing can have arrived.
    const arrived = await warehouse.client.query('SELECT count(*) AS n FROM orders WHERE id > 500');
    expect(Number(arrived.rows[0].n)).toBe(0);
    await k('patch', 'mirror', 'shop-to-warehouse', '--type', 'merge', '-p', '{"spec":{"state":"Running"}}');
    await waitFor(() => engineRunning('shop-to-warehouse'), 120_000, 'the engine pod back');
    await waitForSameRows(source.client, warehouse.client, 'orders', 120_000);
    await waitFor(() => phaseIs('shop-to-warehouse', 'STATUS_RUNNING'), 120_000, 'STATUS_RUNNING again');
  }, 400_000);

  it('rolls the engine pod when a table is added, and loads the table', async () => {
    const before = await enginePod('shop-to-warehouse');
    await k(
      'patch',
      'mirror',
      'shop-to-warehouse',
      '--type',
      'json',
      '-p',
      JSON.stringify([
        {
          op: 'add',
          path: '/spec/tableMappings/-',
          value: {
            source: { schema: 'public', table: 'refunds' },
            destination: { schema: 'public', table: 'refunds' },
          },
        },
      ]),
    );
    await waitFor(
      async () => {
        const pod = await enginePod('shop-to-warehouse');
        return pod !== undefined && pod.metadata.uid !== before?.metadata.uid && podReady(pod);
      },
      180_000,
      'a new engine pod',
    );
    await waitForSameRows(source.client, warehouse.client, 'refunds', 180_000);
    await source.client.query('INSERT INTO refunds VALUES (51, 102)');
    await waitForSameRows(source.client, warehouse.client, 'refunds', 120_000);
  }, 400_000);

  it('loses nothing when the engine pod is deleted and its process killed with -9 under writes', async () => {
    const writer = startWriter();
    try {
      const first = await enginePod('shop-to-warehouse');
      await waitFor(async () => (await sourceCount('orders')) > 600, 60_000, 'writes flowing');
      await k('delete', 'pod', `${engine('shop-to-warehouse')}-0`, '--wait=false');
      await waitFor(
        async () => {
          const pod = await enginePod('shop-to-warehouse');
          return pod !== undefined && pod.metadata.uid !== first?.metadata.uid && podReady(pod);
        },
        180_000,
        'the engine pod re-created',
      );
      const restarted = (await enginePod('shop-to-warehouse')) as PodView;
      const restarts = restarted.status.containerStatuses?.[0]?.restartCount ?? 0;
      // The catalog must have seen a batch from the new pod before the next kill.
      const baseline = await sourceCount('orders');
      await waitFor(
        async () =>
          Number((await warehouse.client.query('SELECT count(*) AS n FROM orders')).rows[0].n) >= baseline,
        120_000,
        'the new pod streaming',
      );
      process.kill(await containerPid(facts, restarted, 'engine'), 'SIGKILL');
      await waitFor(
        async () => {
          const pod = await enginePod('shop-to-warehouse');
          return (
            (pod?.status.containerStatuses?.[0]?.restartCount ?? 0) > restarts && podReady(pod as PodView)
          );
        },
        180_000,
        'the killed engine container restarted',
      );
    } finally {
      await writer.stop();
    }
    await waitForSameRows(source.client, warehouse.client, 'orders', 180_000);
    expect(await tableRows(warehouse.client, 'orders', 'id')).toEqual(
      await tableRows(source.client, 'orders', 'id'),
    );
  }, 600_000);

  it('fails over when the leading operator is killed with -9, and the new leader reconciles', async () => {
    const lease = () =>
      kubectlJson<{ spec: { holderIdentity?: string; renewTime?: string; leaseTransitions?: number } }>(
        facts,
        ['-n', namespace, 'get', 'lease', 'tributary-operator'],
      );
    const before = (await lease()).spec;
    const leader = (await podsOf(facts, namespace, operatorSelector)).find(
      (pod) => pod.metadata.name === before.holderIdentity,
    );
    expect(leader).toBeDefined();
    // kill -9 of its process, and its pod object removed at once (as after a
    // node loss): the restarted container cannot come back as the holder.
    const killedAt = Date.now();
    process.kill(await containerPid(facts, leader as PodView, 'operator'), 'SIGKILL');
    await k('delete', 'pod', leader?.metadata.name ?? '', '--grace-period=0', '--force', '--wait=false');
    // The lease (15 s) expires; another replica takes it over and renews it.
    await waitFor(
      async () => {
        const spec = (await lease()).spec;
        return (
          spec.holderIdentity !== before.holderIdentity &&
          (spec.leaseTransitions ?? 0) > (before.leaseTransitions ?? 0) &&
          new Date(spec.renewTime ?? 0).getTime() > killedAt
        );
      },
      60_000,
      'another operator holding the Lease',
    );
    const after = (await lease()).spec;
    const live = (await podsOf(facts, namespace, operatorSelector))
      .filter(podReady)
      .map((pod) => pod.metadata.name);
    expect(live).toContain(after.holderIdentity);
    // The new leader acts on a change made after the failover.
    await k('patch', 'mirror', 'shop-to-analytics', '--type', 'merge', '-p', '{"spec":{"state":"Paused"}}');
    await waitFor(
      () => phaseIs('shop-to-analytics', 'STATUS_PAUSED'),
      120_000,
      'the analytics mirror paused',
    );
    await waitFor(async () => (await enginePod('shop-to-analytics')) === undefined, 120_000, 'its pod gone');
  }, 400_000);

  it('picks up a password changed in a peer Secret and an edited Script: the engine pods roll', async () => {
    const warehousePod = await enginePod('shop-to-warehouse');
    const eventsPod = await enginePod('shop-to-events');
    await source.client.query(`ALTER ROLE ${warehouseRole} PASSWORD '${warehousePasswords[1]}'`);
    await k(
      'patch',
      'secret',
      'warehouse-db',
      '--type',
      'merge',
      '-p',
      JSON.stringify({ stringData: { password: warehousePasswords[1] } }),
    );
    await waitFor(
      async () => {
        const pod = await enginePod('shop-to-warehouse');
        return pod !== undefined && pod.metadata.uid !== warehousePod?.metadata.uid && podReady(pod);
      },
      180_000,
      'the warehouse engine rolled after the password change',
    );
    // The new pod logs in with the new password: new rows arrive.
    await source.client.query(`INSERT INTO orders VALUES (900001, 1, 'after the password change')`);
    await waitForSameRows(source.client, warehouse.client, 'orders', 180_000);

    // The Script now tags every message; the engine must run the new source.
    await k(
      'patch',
      'script',
      'topic-per-table',
      '--type',
      'merge',
      '-p',
      JSON.stringify({
        spec: {
          source:
            'function onRecord(record)\n  return { topic = "shop." .. record.source.table, value = json.encode({ id = record.row.id, edited = true }) }\nend\n',
        },
      }),
    );
    await waitFor(
      async () => {
        const pod = await enginePod('shop-to-events');
        return pod !== undefined && pod.metadata.uid !== eventsPod?.metadata.uid && podReady(pod);
      },
      180_000,
      'the Kafka engine rolled after the Script edit',
    );
    await source.client.query(`INSERT INTO orders VALUES (900002, 1, 'after the script edit')`);
    await waitForKafka(async () => editedIds.has(900002), 'a message from the edited Script');
  }, 500_000);

  it('shows an engine pod that cannot be scheduled or is OOM-killed in the Mirror, its Events and the API', async () => {
    const broken = (name: string, engineSettings: Record<string, unknown>) => ({
      apiVersion: 'tributary.dev/v1alpha1',
      kind: 'Mirror',
      metadata: { name, namespace },
      spec: {
        sourcePeer: 'shop',
        destinationPeer: 'warehouse',
        state: 'Running',
        doInitialSnapshot: true,
        tableMappings: [
          {
            source: { schema: 'public', table: 'refunds' },
            destination: { schema: 'public', table: name.replaceAll('-', '_') },
          },
        ],
        engine: engineSettings,
      },
    });
    await kubectl(
      facts,
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          broken('no-node', { nodeSelector: { 'tributary.dev/no-such-node': 'true' } }),
          broken('no-memory', { resources: { requests: { memory: '16Mi' }, limits: { memory: '16Mi' } } }),
        ],
      }),
    );
    const readyCondition = async (name: string) =>
      (
        await kubectlJson<{
          status?: { conditions?: { type: string; status: string; reason: string; message: string }[] };
        }>(facts, ['-n', namespace, 'get', 'mirror', name])
      ).status?.conditions?.find((condition) => condition.type === 'Ready');
    await waitFor(
      async () => (await readyCondition('no-node'))?.reason === 'Unschedulable',
      120_000,
      'Ready=False Unschedulable on the unschedulable mirror',
    );
    await waitFor(
      async () =>
        ['OOMKilled', 'CrashLoopBackOff'].includes((await readyCondition('no-memory'))?.reason ?? ''),
      180_000,
      'the OOM-killed engine in the Mirror',
    );
    const oom = await readyCondition('no-memory');
    expect(oom?.status).toBe('False');
    expect(oom?.message).toContain(`${engine('no-memory')}-0`);
    const events = await kubectlJson<{ items: { reason: string }[] }>(facts, [
      '-n',
      namespace,
      'get',
      'events',
      '--field-selector',
      'involvedObject.kind=Mirror,involvedObject.name=no-node',
    ]);
    expect(events.items.map((event) => event.reason)).toContain('Unschedulable');
    const status = await api('/api/v1/mirrors/status', { flowJobName: 'no-node' });
    expect(String(status.json.errorMessage)).toContain(`${engine('no-node')}-0 cannot be scheduled`);
    await k('delete', 'mirror', 'no-node', 'no-memory', '--timeout=180s');
  }, 400_000);

  it("posts to the webhook of the chart's Secret when a mirror fails and when it recovers, from the leading operator pod", async () => {
    const name = 'notify-broken';
    const slotsBefore = await slotsOf();
    const publicationsBefore = await publications();
    const told = (kind: string) =>
      receiver.deliveries.filter((delivery) => delivery.body.mirror === name && delivery.body.kind === kind);
    /** Waits as `waitFor` does; on a timeout the error also holds what the operators logged of notifications. */
    const waitTold = async (kind: string) => {
      try {
        await waitFor(async () => told(kind).length > 0, 180_000, `a ${kind} notification of ${name}`);
      } catch (error) {
        const logs = await Promise.all(
          (await podsOf(facts, namespace, operatorSelector)).map((pod) =>
            k('logs', pod.metadata.name).catch(String),
          ),
        );
        const lines = logs.flatMap((log) => log.split('\n')).filter((line) => line.includes('notification'));
        const received = `the receiver took ${receiver.deliveries.length} bodies`;
        throw new Error(
          `${(error as Error).message}; ${received}; the operators' notification log lines:\n${lines.join('\n')}`,
        );
      }
    };
    // The destination holds a row the mirror did not write: its initial load
    // refuses to empty the table, a fault that needs a person (the mirror fails).
    await source.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await source.client.query(`INSERT INTO notes VALUES (1, 'the source''s')`);
    await warehouse.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await warehouse.client.query(`INSERT INTO notes VALUES (1, 'not the mirror''s')`);
    try {
      await kubectl(
        facts,
        ['apply', '-f', '-'],
        JSON.stringify({
          apiVersion: 'tributary.dev/v1alpha1',
          kind: 'Mirror',
          metadata: { name, namespace },
          spec: {
            sourcePeer: 'shop',
            destinationPeer: 'warehouse',
            state: 'Running',
            doInitialSnapshot: true,
            idleTimeoutSeconds: 1,
            tableMappings: [
              {
                source: { schema: 'public', table: 'notes' },
                destination: { schema: 'public', table: 'notes' },
              },
            ],
          },
        }),
      );
      await waitTold('mirror_failed');
      const [failed] = told('mirror_failed');
      expect(failed?.body).toMatchObject({
        version: 1,
        kind: 'mirror_failed',
        severity: 'critical',
        mirror: name,
        namespace,
      });
      expect(String(failed?.body.message)).toContain('public.notes');
      // Posted to the URL the Secret holds, by the pod holding the Lease.
      expect(failed?.path).toBe(`/hook/${webhookToken}`);
      const lease = await kubectlJson<{ spec: { holderIdentity?: string } }>(facts, [
        '-n',
        namespace,
        'get',
        'lease',
        'tributary-operator',
      ]);
      const leader = (await podsOf(facts, namespace, operatorSelector)).find(
        (pod) => pod.metadata.name === lease.spec.holderIdentity,
      );
      expect(leader?.status.podIP).toBeDefined();
      expect(failed?.from).toBe(leader?.status.podIP);
      await waitFor(() => phaseIs(name, 'STATUS_FAILED'), 60_000, 'the mirror STATUS_FAILED');

      // Fixed, and retried through the api-server: the mirror streams, and is said to.
      await warehouse.client.query('DELETE FROM notes');
      const retried = await api('/api/v1/mirrors/state_change', {
        flowJobName: name,
        requestedFlowState: 'STATUS_RUNNING',
      });
      expect(retried.status, JSON.stringify(retried.json)).toBe(200);
      await waitTold('mirror_recovered');
      expect(told('mirror_recovered')[0]?.body).toMatchObject({
        severity: 'resolved',
        mirror: name,
        namespace,
      });
      await waitForSameRows(source.client, warehouse.client, 'notes', 60_000);
      // One notification per transition, however many looks and reconciles.
      expect(told('mirror_failed')).toHaveLength(1);
      expect(told('mirror_recovered')).toHaveLength(1);
    } finally {
      await k('delete', 'mirror', name, '--timeout=180s').catch(() => {});
    }

    // No body holds a password or the Secret's URL; no operator log holds the URL.
    const bodies = JSON.stringify(receiver.deliveries.map((delivery) => delivery.body));
    for (const secret of [postgres.superuser.password, ...warehousePasswords, apiPassword, webhookToken]) {
      if (secret) expect(bodies).not.toContain(secret);
    }
    for (const pod of await podsOf(facts, namespace, operatorSelector)) {
      const log = await k('logs', pod.metadata.name);
      expect(log).not.toContain(webhookToken);
      expect(log).not.toContain(receiver.url);
    }
    // Its slot and publication gone, as the later steps count them.
    await waitFor(
      async () => (await slotsOf()).length === slotsBefore.length,
      120_000,
      'the notified mirror slot dropped',
    );
    expect(await publications()).toEqual(publicationsBefore);
  }, 500_000);

  it('runs a Snowflake mirror in a pod, its batch files in the temporary volume; a volume too small shows as engine_resource', async () => {
    // The emulator, reached from pods on the bridge (scripts/testenv/node.sh).
    const database = uniqueName('NODE');
    const schema = `node_${suffix}`.toLowerCase();
    const peerConfig = emulatorConfig(database, {
      accessUrl: `http://${facts.gateway}:${new URL(emulatorUrl).port}`,
    });
    const lake = new SnowflakeAdmin(emulatorConfig(database));
    const mirrorOf = (name: string, table: string, engineSettings?: Record<string, unknown>) => ({
      apiVersion: 'tributary.dev/v1alpha1',
      kind: 'Mirror',
      metadata: { name, namespace },
      spec: {
        sourcePeer: 'shop',
        destinationPeer: 'lake',
        state: 'Running',
        doInitialSnapshot: true,
        tableMappings: [
          { source: { schema: 'public', table }, destination: { schema, table: name.replaceAll('-', '_') } },
        ],
        ...(engineSettings ? { engine: engineSettings } : {}),
      },
    });
    try {
      await kubectl(
        facts,
        ['apply', '-f', '-'],
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'List',
          items: [
            {
              apiVersion: 'v1',
              kind: 'Secret',
              metadata: {
                name: 'lake-key',
                namespace,
                labels: { 'tributary.dev/peer-secret': 'true' },
                annotations: { 'tributary.dev/peers': 'lake' },
              },
              stringData: { privateKey: peerConfig.privateKey },
            },
            {
              apiVersion: 'tributary.dev/v1alpha1',
              kind: 'Peer',
              metadata: { name: 'lake', namespace },
              spec: {
                kind: 'datawarehouse',
                datawarehouse: {
                  accountId: peerConfig.accountId,
                  username: peerConfig.username,
                  database: peerConfig.database,
                  warehouse: peerConfig.warehouse,
                  role: peerConfig.role,
                  queryTimeout: peerConfig.queryTimeout,
                  accessUrl: peerConfig.accessUrl,
                },
                secretRef: { name: 'lake-key' },
              },
            },
            mirrorOf('to-lake', 'refunds'),
            // A memory-backed volume of a page: the first batch file does not fit.
            mirrorOf('tiny-tmp', 'orders', { temporaryStorage: { sizeLimit: '4Ki', medium: 'Memory' } }),
          ],
        }),
      );
      const lakeRows = async () =>
        (
          await lake
            .rows(`SELECT count(*) AS "N" FROM "${database}"."${schema.toUpperCase()}"."TO_LAKE"`)
            .catch(() => [{ N: -1 }])
        )[0]?.N;
      await waitFor(
        async () => Number(await lakeRows()) === (await sourceCount('refunds')),
        180_000,
        'the rows in Snowflake',
      );
      await source.client.query('INSERT INTO refunds VALUES (100001, 1)');
      await waitFor(
        async () => Number(await lakeRows()) === (await sourceCount('refunds')),
        120_000,
        'a change in Snowflake',
      );

      const degraded = async () =>
        (
          await kubectlJson<{
            status?: { conditions?: { type: string; status: string; reason: string; message: string }[] };
          }>(facts, ['-n', namespace, 'get', 'mirror', 'tiny-tmp'])
        ).status?.conditions?.find((condition) => condition.type === 'Degraded');
      await waitFor(
        async () => (await degraded())?.message?.includes('the file system is full') === true,
        180_000,
        'the full temporary volume in the Mirror',
      );
      expect((await degraded())?.status).toBe('True');
      expect((await degraded())?.message).toContain('TMPDIR');
      const status = await api('/api/v1/mirrors/status', { flowJobName: 'tiny-tmp' });
      expect(String(status.json.errorMessage)).toContain('the file system is full');
    } finally {
      await k('delete', 'mirror', 'to-lake', 'tiny-tmp', '--timeout=180s').catch(() => {});
      await k('delete', 'peer', 'lake', '--timeout=60s').catch(() => {});
      await k('delete', 'secret', 'lake-key').catch(() => {});
      await lake.close().catch(() => {});
    }
  }, 600_000);

  it('drops the slot and publication when a Mirror is deleted; its StatefulSet and Secret go', async () => {
    const slotsBefore = await slotsOf();
    const publicationsBefore = await publications();
    expect(slotsBefore.length).toBe(3);
    await k('delete', 'mirror', 'shop-to-events', '--timeout=180s');
    await waitFor(
      async () => (await slotsOf()).length === slotsBefore.length - 1,
      60_000,
      'the slot dropped',
    );
    expect((await publications()).length).toBe(publicationsBefore.length - 1);
    await waitFor(
      async () =>
        (await k('get', 'statefulsets,secrets', '-o', 'name')).includes(engine('shop-to-events')) === false,
      120_000,
      'the engine StatefulSet and Secret gone',
    );
  }, 300_000);

  it('leaves nothing behind when a Mirror is force-deleted: owned objects collected, slot dropped', async () => {
    const slotsBefore = await slotsOf();
    // Default slot names end in a hash of the installation and the mirror's name.
    const analyticsSlot = slotsBefore.find((slot) => slot.startsWith('tributary_shop_to_analytics_'));
    expect(analyticsSlot).toBeDefined();
    // Force-deleted (its finalizer removed by hand): the garbage collector
    // removes what the Mirror owns, and the engine Secret's own finalizer lets
    // the operator drop the slot first.
    const [analyticsStatefulSet, analyticsSecret] = await Promise.all([
      kubectlJson<{ metadata: { ownerReferences?: { kind: string; name: string }[] } }>(facts, [
        '-n',
        namespace,
        'get',
        'statefulset',
        engine('shop-to-analytics'),
      ]),
      kubectlJson<{ metadata: { ownerReferences?: { kind: string; name: string }[] } }>(facts, [
        '-n',
        namespace,
        'get',
        'secret',
        engine('shop-to-analytics'),
      ]),
    ]);
    for (const owned of [analyticsStatefulSet, analyticsSecret]) {
      expect(owned.metadata.ownerReferences).toEqual([
        expect.objectContaining({ kind: 'Mirror', name: 'shop-to-analytics' }),
      ]);
    }
    await k(
      'patch',
      'mirror',
      'shop-to-analytics',
      '--type',
      'merge',
      '-p',
      '{"metadata":{"finalizers":null}}',
    );
    await k('delete', 'mirror', 'shop-to-analytics', '--timeout=60s');
    await waitFor(
      async () =>
        !(await k('get', 'statefulsets,secrets', '-o', 'name')).includes(engine('shop-to-analytics')),
      120_000,
      'the StatefulSet and Secret of the force-deleted mirror collected',
    );
    await waitFor(
      async () => !(await slotsOf()).includes(analyticsSlot ?? ''),
      120_000,
      'the slot of the force-deleted mirror dropped',
    );
  }, 300_000);

  it('does the same through the api-server pod: create, status, pause, resume, delete', async () => {
    const peer = await api('/api/v1/peers/create', {
      peer: {
        name: 'rest-destination',
        type: 3,
        relational_config: { ...restDestination.config, host: facts.gateway },
      },
    });
    expect(peer.status, JSON.stringify(peer.json)).toBe(200);
    const created = await api('/api/v1/flows/cdc/create', {
      connection_configs: {
        flow_job_name: 'rest-mirror',
        source_name: 'shop',
        destination_name: 'rest-destination',
        table_mappings: [
          { source_table_identifier: 'public.customers', destination_table_identifier: 'public.customers' },
        ],
        do_initial_snapshot: true,
        idle_timeout_seconds: 1,
      },
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const flowState = async () =>
      (await api('/api/v1/mirrors/status', { flowJobName: 'rest-mirror' })).json.currentFlowState;
    await waitFor(() => engineRunning('rest-mirror'), 180_000, 'the REST mirror engine pod');
    await waitForSameRows(source.client, restDestination.client, 'customers', 180_000);
    await waitFor(async () => (await flowState()) === 'STATUS_RUNNING', 120_000, 'STATUS_RUNNING over REST');

    const pause = await api('/api/v1/mirrors/state_change', {
      flowJobName: 'rest-mirror',
      requestedFlowState: 'STATUS_PAUSED',
    });
    expect(pause.status, JSON.stringify(pause.json)).toBe(200);
    await waitFor(async () => (await flowState()) === 'STATUS_PAUSED', 120_000, 'STATUS_PAUSED over REST');
    await waitFor(async () => (await enginePod('rest-mirror')) === undefined, 120_000, 'its pod gone');
    await source.client.query(`INSERT INTO customers VALUES (201, 'while paused', NULL)`);
    const resume = await api('/api/v1/mirrors/state_change', {
      flowJobName: 'rest-mirror',
      requestedFlowState: 'STATUS_RUNNING',
    });
    expect(resume.status, JSON.stringify(resume.json)).toBe(200);
    await waitForSameRows(source.client, restDestination.client, 'customers', 180_000);

    const slotsBefore = (await slotsOf()).length;
    const terminate = await api('/api/v1/mirrors/state_change', {
      flowJobName: 'rest-mirror',
      requestedFlowState: 'STATUS_TERMINATING',
    });
    expect(terminate.status, JSON.stringify(terminate.json)).toBe(200);
    await waitFor(
      async () => (await slotsOf()).length === slotsBefore - 1,
      120_000,
      'the REST mirror slot dropped',
    );
    await waitFor(
      async () => !(await k('get', 'statefulsets,secrets', '-o', 'name')).includes(engine('rest-mirror')),
      120_000,
      'the REST mirror StatefulSet and Secret gone',
    );
  }, 600_000);
});

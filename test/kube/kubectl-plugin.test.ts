// `kubectl tributary` against the real kube-apiserver, with a kubeconfig as a
// user has one: list, status, pause, resume, logs and report of Mirrors in a
// namespace of the suite's own. No operator runs: the suite writes the
// Mirrors' status, the engine and operator pods and their Events as the
// operator and a kubelet would. No kubelet runs either, so container logs
// cannot be read (the plugin says so, and the report notes it); the engine
// pod's metrics are served by the suite on this machine's address, which the
// suite writes as the pod's IP, so the API server's pod proxy reaches them.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import { networkInterfaces, tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { group, version } from '../../operator/src/crds/api-group.ts';
import { EventRecorder } from '../../operator/src/events.ts';
import { type PluginOutcome, runPlugin } from '../../operator/src/kubectl/main.ts';
import { runBounded } from '../support/bounded-child.ts';
import { waitFor } from '../support/databases.ts';
import { checkedJsonExample, jsonShape } from '../support/doc-examples.ts';
import { adminConfig, createNamespace, ensureCrds, kubectl } from '../support/kube.ts';
import { kube, repoRoot } from '../support/testenv.ts';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** An address of this machine the API server may proxy to (not loopback: it refuses those). */
function machineAddress(): string {
  const address = Object.values(networkInterfaces())
    .flat()
    .find((candidate) => candidate?.family === 'IPv4' && !candidate.internal)?.address;
  if (!address) throw new Error('this machine has no IPv4 address but loopback: the pod proxy needs one');
  return address;
}

/** Every file under `dir`, by path relative to it. */
function filesUnder(dir: string, prefix = ''): Map<string, string> {
  const files = new Map<string, string>();
  for (const entry of readdirSync(join(dir, prefix), { withFileTypes: true })) {
    const path = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) for (const [inner, text] of filesUnder(dir, path)) files.set(inner, text);
    else files.set(path, readFileSync(join(dir, path), 'utf8'));
  }
  return files;
}

describe('kubectl tributary', () => {
  const config = adminConfig();
  const objects = config.makeApiClient(CustomObjectsApi);
  const core = config.makeApiClient(CoreV1Api);
  const workDir = mkdtempSync(join(tmpdir(), 'tributary-kubectl-plugin-'));
  const kubeconfig = join(workDir, 'kubeconfig');
  // Distinctive values: none of them may appear in a report, in any encoding.
  const shopPassword = `shop-${randomBytes(12).toString('hex')}`;
  const analyticsPassword = `analytics-${randomBytes(12).toString('hex')}`;
  const catalogPassword = `catalog-${randomBytes(12).toString('hex')}`;
  const secretValues = [shopPassword, analyticsPassword, catalogPassword];
  let namespace = '';
  let metricsServer: Server;
  const at = (plural: string) => ({ group, version, namespace, plural });

  /** The plugin in process, as a user with `kubeconfig` runs it (KUBECONFIG, in the work directory). */
  const plugin = (argv: string[], env: NodeJS.ProcessEnv = {}): Promise<PluginOutcome> =>
    runPlugin(argv, {
      env: { HOME: workDir, KUBECONFIG: kubeconfig, ...env },
      cwd: workDir,
      now: () => new Date(),
      version: () => 'tributary (kubectl plugin test)',
    });

  const mirrorObject = async (name: string) =>
    (await objects.getNamespacedCustomObject({ ...at('mirrors'), name })) as {
      spec: { state: string };
      status?: { failedGeneration?: number };
    };

  async function createMirror(name: string, state: 'Running' | 'Paused', status: Record<string, unknown>) {
    await objects.createNamespacedCustomObject({
      ...at('mirrors'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Mirror',
        metadata: { name },
        spec: {
          sourcePeer: 'shop',
          destinationPeer: 'analytics',
          state,
          doInitialSnapshot: true,
          tableMappings: [
            {
              source: { schema: 'public', table: 'orders' },
              destination: { schema: 'shop', table: 'orders' },
            },
            { source: { schema: 'public', table: 'items' }, destination: { schema: 'shop', table: 'items' } },
          ],
        },
      },
    });
    // As the operator writes it (operator/src/controllers/mirror.ts).
    await objects.patchNamespacedCustomObjectStatus({ ...at('mirrors'), name, body: { status } }, mergePatch);
  }

  const since = '2024-05-01T10:00:00.000Z';
  const condition = (type: string, status: string, reason: string, message = '') => ({
    type,
    status,
    reason,
    message,
    lastTransitionTime: since,
    observedGeneration: 1,
  });
  const tableStatus = (table: string, state: string) => ({
    sourceTableIdentifier: `public.${table}`,
    destinationTableIdentifier: `shop.${table}`,
    state,
    stateSince: since,
    rowsApplied: { inserts: '12', updates: '3', deletes: '1' },
    lastAppliedLsn: '26543210',
  });

  beforeAll(async () => {
    await ensureCrds(config);
    namespace = await createNamespace('kubectl-plugin');
    // The admin identity, with the suite's namespace as its context's, and a
    // second context elsewhere: as a user's kubeconfig has them.
    const admin = parse(readFileSync(kube.adminKubeconfig, 'utf8')) as {
      contexts: { name: string; context: Record<string, string> }[];
      'current-context': string;
    };
    const [adminContext] = admin.contexts;
    if (!adminContext) throw new Error('the admin kubeconfig has no context');
    admin.contexts = [
      { name: 'plugin', context: { ...adminContext.context, namespace } },
      { name: 'elsewhere', context: { ...adminContext.context, namespace: 'kube-system' } },
    ];
    admin['current-context'] = 'plugin';
    writeFileSync(kubeconfig, stringify(admin), { mode: 0o600 });

    // Peer Secrets applied with kubectl: its last-applied annotation holds the password again.
    const peerSecret = (name: string, peer: string, password: string) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        labels: { 'tributary.dev/peer-secret': 'true' },
        annotations: { 'tributary.dev/peers': peer },
      },
      stringData: { password },
    });
    await kubectl(
      ['apply', '-n', namespace, '-f', '-'],
      [
        peerSecret('shop-db', 'shop', shopPassword),
        peerSecret('analytics-db', 'analytics', analyticsPassword),
      ]
        .map((secret) => stringify(secret))
        .join('---\n'),
    );
    for (const [name, spec] of [
      [
        'shop',
        {
          kind: 'relational',
          relational: { host: 'shop-db.databases.svc', port: 5432, user: 'replicator', database: 'shop' },
          secretRef: { name: 'shop-db' },
        },
      ],
      [
        'analytics',
        {
          kind: 'analytics',
          analytics: {
            host: 'clickhouse.analytics.svc',
            port: 9000,
            user: 'tributary',
            database: 'shop',
            disableTls: true,
          },
          secretRef: { name: 'analytics-db' },
        },
      ],
    ] as const) {
      await objects.createNamespacedCustomObject({
        ...at('peers'),
        body: { apiVersion: `${group}/${version}`, kind: 'Peer', metadata: { name }, spec },
      });
    }

    await createMirror('orders', 'Running', {
      observedGeneration: 1,
      phase: 'STATUS_RUNNING',
      workflowId: 'orders-1',
      errorMessage: '',
      lagSeconds: 7,
      rowsSynced: '1250',
      lastBatchId: '41',
      lastSyncedLsn: '26543210',
      lastSyncTime: since,
      conditions: [
        condition('Ready', 'True', 'Running', 'streaming changes'),
        condition('Failed', 'False', 'NoFailure'),
        condition('SlotHealthy', 'True', 'Healthy', 'replication slot tributary_orders'),
        condition('TablesHealthy', 'False', 'TableErrored', 'public.items: column price changed type'),
      ],
      snapshot: {
        tables: [
          { table: 'public.orders', partitionsCompleted: 4, partitionsTotal: 4, rowsSynced: '1000' },
          { table: 'public.items', partitionsCompleted: 2, partitionsTotal: 2, rowsSynced: '250' },
        ],
      },
      tables: [
        { ...tableStatus('orders', 'TABLE_STATE_STREAMING'), lastCommitTime: since },
        {
          ...tableStatus('items', 'TABLE_STATE_ERRORED'),
          error: {
            kind: 'schema_mismatch',
            message: 'column price changed type',
            remedy: 'resync the table: kubectl tributary does not, tributary mirrors resync does',
          },
          behindLsn: '26000000',
        },
      ],
    });
    await createMirror('archive', 'Paused', {
      observedGeneration: 1,
      phase: 'STATUS_PAUSED',
      conditions: [condition('Ready', 'False', 'Paused', 'mirror is STATUS_PAUSED')],
    });
    await createMirror('broken', 'Running', {
      observedGeneration: 1,
      phase: 'STATUS_FAILED',
      failedGeneration: 1,
      errorMessage: `cannot connect to postgres://replicator:${shopPassword}@shop-db.databases.svc/shop`,
      conditions: [condition('Ready', 'False', 'Failed', 'mirror is STATUS_FAILED')],
    });

    // The engine's config Secret, as the StatefulSet runtime writes it: the catalog's and the peers' passwords.
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'tributary-engine-orders' },
        stringData: {
          'engine.json': JSON.stringify({
            catalogUrl: `postgres://tributary:${catalogPassword}@catalog.tributary.svc/catalog`,
            source: { host: 'shop-db.databases.svc', user: 'replicator', password: shopPassword },
            destination: { host: 'clickhouse.analytics.svc', password: analyticsPassword },
          }),
        },
      },
    });

    // The engine pod: Running on this machine's address, where the suite serves its metrics.
    metricsServer = createServer((request, response) => {
      response.writeHead(request.url === '/metrics' ? 200 : 404, {
        'content-type': 'text/plain; version=0.0.4',
      });
      response.end(request.url === '/metrics' ? 'tributary_engine_batches_total{mirror="orders"} 41\n' : '');
    });
    await new Promise<void>((resolve) => metricsServer.listen(0, '0.0.0.0', resolve));
    const metricsPort = (metricsServer.address() as { port: number }).port;
    const podIp = machineAddress();
    const pod = (name: string, labels: Record<string, string>, container: string, port?: number) => ({
      metadata: { name, labels },
      spec: {
        automountServiceAccountToken: false,
        containers: [
          {
            name: container,
            image: 'registry.example/tributary:test',
            ...(port === undefined ? {} : { ports: [{ name: 'metrics', containerPort: port }] }),
            env: [
              { name: 'TMPDIR', value: '/tmp' },
              // A secret a pod template should not hold, but might.
              { name: 'SHOP_PASSWORD', value: shopPassword },
            ],
          },
        ],
      },
    });
    await core.createNamespacedPod({
      namespace,
      body: pod('tributary-engine-orders-0', { 'tributary.dev/mirror': 'orders' }, 'engine', metricsPort),
    });
    const enginePod = await core.readNamespacedPod({ namespace, name: 'tributary-engine-orders-0' });
    enginePod.status = {
      phase: 'Running',
      podIP: podIp,
      podIPs: [{ ip: podIp }],
      containerStatuses: [
        {
          name: 'engine',
          image: 'registry.example/tributary:test',
          imageID: '',
          ready: true,
          restartCount: 1,
          state: { running: { startedAt: new Date(since) } },
        },
      ],
    };
    await core.replaceNamespacedPodStatus({ namespace, name: 'tributary-engine-orders-0', body: enginePod });

    // The operator: two replicas of a release named `tributary`, one holding the Lease.
    const operatorLabels = {
      'app.kubernetes.io/name': 'tributary-operator',
      'app.kubernetes.io/instance': 'tributary',
    };
    for (const name of ['tributary-operator-leader', 'tributary-operator-standby'])
      await core.createNamespacedPod({ namespace, body: pod(name, operatorLabels, 'operator', 9090) });
    await config.makeApiClient(CoordinationV1Api).createNamespacedLease({
      namespace,
      body: {
        metadata: { name: 'tributary-operator' },
        spec: { holderIdentity: 'tributary-operator-leader' },
      },
    });

    const mirror = await mirrorObject('orders');
    const events = new EventRecorder(config, namespace, pino({ level: 'silent' }));
    const target = {
      kind: 'Mirror' as const,
      name: 'orders',
      uid: (mirror as { metadata?: { uid?: string } }).metadata?.uid,
    };
    await events.record(target, 'Normal', 'PhaseChanged', 'STATUS_SNAPSHOT -> STATUS_RUNNING');
    await events.record(
      target,
      'Warning',
      'Retrying',
      `connection to postgres://replicator:${shopPassword}@shop-db.databases.svc/shop refused`,
    );
  });

  afterAll(async () => {
    await new Promise((resolve) => metricsServer?.close(resolve));
    rmSync(workDir, { recursive: true, force: true });
  });

  it('lists the Mirrors of the context’s namespace, as a table, JSON and YAML', async () => {
    const table = await plugin(['list']);
    expect(table).toMatchObject({ exitCode: 0, stderr: '' });
    expect(table.stdout.split('\n')).toEqual([
      'NAME     SOURCE  DESTINATION  STATE    PHASE    READY  LAG  TABLES  ERRORED',
      'archive  shop    analytics    Paused   paused   False  -    0       0',
      'broken   shop    analytics    Running  failed   False  -    0       0',
      'orders   shop    analytics    Running  running  True   7s   2       1',
    ]);
    const json = JSON.parse((await plugin(['list', '-o', 'json'])).stdout) as { mirrors: unknown[] };
    expect(json.mirrors).toHaveLength(3);
    expect(json.mirrors[2]).toEqual({
      namespace,
      name: 'orders',
      source: 'shop',
      destination: 'analytics',
      state: 'Running',
      phase: 'STATUS_RUNNING',
      ready: 'True',
      lagSeconds: 7,
      tables: 2,
      erroredTables: 1,
      heldTables: 0,
    });
    expect(parse((await plugin(['list', '-o', 'yaml'])).stdout)).toEqual(json);
  });

  it('lists every namespace with -A, and another namespace with --context or -n', async () => {
    const all = await plugin(['list', '-A']);
    expect(all.exitCode).toBe(0);
    expect(all.stdout.split('\n')[0]).toMatch(/^NAMESPACE +NAME +SOURCE/);
    expect(all.stdout).toMatch(new RegExp(`^${namespace} +orders +shop +analytics`, 'm'));
    expect(await plugin(['status', 'orders', '--context', 'elsewhere'])).toEqual({
      exitCode: 1,
      stdout: '',
      stderr: 'kubectl tributary: no mirror "orders" in namespace kube-system',
    });
    expect((await plugin(['status', 'orders', '--context', 'elsewhere', '-n', namespace])).exitCode).toBe(0);
    // The kubeconfig named on the command line, where KUBECONFIG names none.
    const explicit = await plugin(['list', '--kubeconfig', kubeconfig], { KUBECONFIG: '' });
    expect(explicit.stdout).toContain('orders');
  });

  it('shows a mirror’s tables, slot and conditions', async () => {
    const { exitCode, stdout } = await plugin(['status', 'orders']);
    expect(exitCode).toBe(0);
    expect(stdout).toContain(`Mirror:       ${namespace}/orders`);
    expect(stdout).toContain('Peers:        shop → analytics');
    expect(stdout).toContain('Ready:        True (Running): streaming changes');
    expect(stdout).toContain('Lag:          7s');
    expect(stdout).toContain('Slot:         healthy (Healthy): replication slot tributary_orders');
    expect(stdout).toMatch(
      /public\.orders +shop\.orders +streaming +1000 \(4\/4\) +12\/3\/1 +2024-05-01T10:00:00\.000Z/,
    );
    expect(stdout).toMatch(
      /public\.items +shop\.items +errored +250 \(2\/2\) +12\/3\/1 +- +schema_mismatch: column price changed type \(behind from LSN 26000000\)/,
    );
    expect(stdout).toMatch(
      /TablesHealthy +False +TableErrored +2024-05-01T10:00:00\.000Z +public\.items: column price changed type/,
    );
  });

  it('prints status as JSON in the documented shape, and the same as YAML', async () => {
    const json = JSON.parse((await plugin(['status', 'orders', '-o', 'json'])).stdout) as Record<
      string,
      unknown
    >;
    expect(jsonShape(json)).toEqual(
      jsonShape(checkedJsonExample('docs/kubectl-plugin.md', 'test/kube/kubectl-plugin.test.ts')),
    );
    expect(json).toMatchObject({
      name: 'orders',
      phase: 'STATUS_RUNNING',
      lagSeconds: 7,
      slot: { health: 'healthy', reason: 'Healthy' },
      tables: [
        {
          source: 'public.orders',
          state: 'TABLE_STATE_STREAMING',
          initialLoad: { rows: '1000', partitionsCompleted: 4, partitionsTotal: 4 },
        },
        {
          source: 'public.items',
          state: 'TABLE_STATE_ERRORED',
          problem: { kind: 'schema_mismatch', behindLsn: '26000000' },
        },
      ],
    });
    expect(parse((await plugin(['status', 'orders', '-o', 'yaml'])).stdout)).toEqual(json);
  });

  it('pauses and resumes through spec.state, and retries a failed mirror through its status', async () => {
    expect(await plugin(['pause', 'orders'])).toMatchObject({
      exitCode: 0,
      stdout:
        'mirror orders: pause requested (spec.state Paused); the engine stops at its next batch boundary',
    });
    expect((await mirrorObject('orders')).spec.state).toBe('Paused');
    expect((await plugin(['pause', 'orders'])).stdout).toMatch(/^mirror orders is already paused/);
    expect((await plugin(['resume', 'orders'])).stdout).toBe(
      'mirror orders: resume requested (spec.state Running)',
    );
    expect((await mirrorObject('orders')).spec.state).toBe('Running');

    expect((await mirrorObject('broken')).status?.failedGeneration).toBe(1);
    expect((await plugin(['resume', 'broken'])).stdout).toBe(
      'mirror broken: retry requested; the operator starts its engine again',
    );
    expect((await mirrorObject('broken')).status?.failedGeneration).toBeUndefined();
    expect((await mirrorObject('broken')).spec.state).toBe('Running');
  });

  it('fails clearly, with a non-zero exit: no such mirror, no engine pod, no kubelet, a wrong command line', async () => {
    expect(await plugin(['pause', 'nope'])).toEqual({
      exitCode: 1,
      stdout: '',
      stderr: `kubectl tributary: no mirror "nope" in namespace ${namespace}`,
    });
    expect(await plugin(['logs', 'archive'])).toMatchObject({
      exitCode: 1,
      stderr: 'kubectl tributary: mirror archive has no engine pod (it is paused)',
    });
    // The pod is on no node: there is no kubelet to ask for its log.
    expect(await plugin(['logs', 'orders'])).toMatchObject({
      exitCode: 1,
      stderr:
        'kubectl tributary: pod tributary-engine-orders-0 is on no node yet (phase Running): it has no log to read',
    });
    expect(await plugin(['status'])).toMatchObject({
      exitCode: 2,
      stderr: 'kubectl tributary: status needs a mirror name',
    });
    expect(await plugin(['list'], { KUBECONFIG: '', HOME: join(workDir, 'no-home') })).toMatchObject({
      exitCode: 1,
      stderr: 'kubectl tributary: no kubeconfig: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config',
    });
  });

  it('names the verb and resource RBAC refused', async () => {
    const rbac = config.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'mirror-reader' },
        rules: [{ apiGroups: [group], resources: ['mirrors'], verbs: ['get', 'list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'mirror-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'mirror-reader' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: kube.restrictedUser }],
      },
    });
    const restricted = (argv: string[]) =>
      plugin(
        [
          ...argv,
          '--kubeconfig',
          kube.restrictedKubeconfig,
          ...(argv.includes('-A') ? [] : ['-n', namespace]),
        ],
        {
          KUBECONFIG: '',
        },
      );
    await waitFor(
      async () => (await restricted(['status', 'orders'])).exitCode === 0,
      30_000,
      'the binding to apply',
    );
    expect(await restricted(['pause', 'orders'])).toEqual({
      exitCode: 1,
      stdout: '',
      stderr:
        `kubectl tributary: not allowed to patch mirrors.tributary.dev "orders" in namespace ${namespace}: ` +
        `mirrors.tributary.dev "orders" is forbidden: User "${kube.restrictedUser}" cannot patch resource "mirrors" in API group "tributary.dev" in the namespace "${namespace}"`,
    });
    const listAll = await restricted(['list', '-A']);
    expect(listAll.exitCode).toBe(1);
    expect(listAll.stderr).toMatch(
      /^kubectl tributary: not allowed to list mirrors\.tributary\.dev in any namespace: /,
    );
    expect((await mirrorObject('orders')).spec.state).toBe('Running');

    // A report with these rights: what it may read, and the refusals in its README.
    const file = join(workDir, 'restricted-report.tar.gz');
    expect((await restricted(['report', 'orders', '-f', file])).exitCode).toBe(0);
    const out = join(workDir, 'restricted-report');
    mkdirSync(out);
    execFileSync('tar', ['-xzf', file, '-C', out]);
    const readme = readFileSync(join(out, 'restricted-report', 'README.txt'), 'utf8');
    expect(readme).toContain('mirrors/orders.yaml');
    expect(readme).toMatch(/peers\/shop: not allowed to get peers\.tributary\.dev "shop" in namespace /);
    expect(readme).toMatch(/engine pods of mirror orders: not allowed to list pods in namespace /);
  });

  it('writes a report of one mirror with its resources, Events, pods and metrics, and not one secret', async () => {
    const { exitCode, stdout } = await plugin(['report', 'orders']);
    expect(exitCode).toBe(0);
    const written = /^wrote (\S+\.tar\.gz): (\d+) files; (\d+) not collected \(see README\.txt\)$/.exec(
      stdout,
    );
    expect(written, stdout).not.toBeNull();
    const archive = written?.[1] ?? '';
    expect(dirname(archive)).toBe(workDir);
    expect(archive).toMatch(new RegExp(`tributary-report-${namespace}-orders-\\d{8}T\\d{6}Z\\.tar\\.gz$`));
    const out = join(workDir, 'orders-report');
    mkdirSync(out);
    execFileSync('tar', ['-xzf', archive, '-C', out]);
    const [folder] = readdirSync(out);
    const files = filesUnder(join(out, folder ?? ''));
    const root = folder ?? '';
    expect(root).toMatch(/^tributary-report-/);
    expect([...files.keys()].sort()).toEqual([
      'README.txt',
      'engine/tributary-engine-orders-0.metrics.txt',
      'engine/tributary-engine-orders-0.yaml',
      'events.txt',
      'events.yaml',
      'mirrors/orders.status.txt',
      'mirrors/orders.yaml',
      'operator/lease.yaml',
      'operator/tributary-operator-leader.yaml',
      'operator/tributary-operator-standby.yaml',
      'peers/analytics.yaml',
      'peers/shop.yaml',
      'secrets/analytics-db.yaml',
      'secrets/shop-db.yaml',
      'secrets/tributary-engine-orders.yaml',
    ]);
    const file = (path: string) => files.get(path) ?? '';
    expect(parse(file('mirrors/orders.yaml'))).toMatchObject({
      kind: 'Mirror',
      status: { phase: 'STATUS_RUNNING' },
    });
    expect(file('mirrors/orders.status.txt')).toContain('Slot:         healthy (Healthy)');
    expect(parse(file('peers/shop.yaml'))).toMatchObject({ spec: { secretRef: { name: 'shop-db' } } });
    expect(parse(file('secrets/shop-db.yaml'))).toMatchObject({
      metadata: { name: 'shop-db', labels: { 'tributary.dev/peer-secret': 'true' } },
      data: { password: `<redacted>: ${shopPassword.length} bytes` },
    });
    expect(file('secrets/tributary-engine-orders.yaml')).toMatch(/engine\.json: "<redacted>: \d+ bytes"/);
    expect(file('engine/tributary-engine-orders-0.metrics.txt')).toContain(
      'tributary_engine_batches_total{mirror="orders"} 41',
    );
    expect(parse(file('operator/lease.yaml'))).toMatchObject({
      spec: { holderIdentity: 'tributary-operator-leader' },
    });
    expect(file('events.txt')).toMatch(
      /Normal +PhaseChanged +Mirror\/orders +1 +STATUS_SNAPSHOT -> STATUS_RUNNING/,
    );
    expect(file('events.txt')).toMatch(
      /Warning +Retrying +Mirror\/orders +1 +connection to postgres:\/\/replicator:<redacted>@/,
    );
    const readme = file('README.txt');
    expect(readme).toContain(`Namespace:  ${namespace}`);
    expect(readme).toContain('Program:    tributary (kubectl plugin test)');
    // No kubelet: the logs are noted as not collected, and why.
    expect(readme).toContain(
      'engine/tributary-engine-orders-0.engine.log: pod tributary-engine-orders-0 is on no node yet (phase Running): it has no log to read',
    );
    expect(readme).toMatch(/engine\/tributary-engine-orders-0\.engine\.previous\.log: /);
    expect(readme).toMatch(/operator\/tributary-operator-leader\.operator\.log: /);
    expect(readme).toMatch(/operator\/tributary-operator-leader\.metrics\.txt: /);
    expect(readme).toContain('engine/tributary-engine-orders.statefulset.yaml: does not exist');

    // Not one secret value, in any encoding, in any file.
    for (const [path, text] of files) {
      for (const secret of secretValues) {
        for (const form of [
          secret,
          Buffer.from(secret).toString('base64'),
          Buffer.from(`"${secret}"`).toString('base64'),
        ])
          expect(text.includes(form), `${path} holds a secret`).toBe(false);
      }
    }
    expect(file('engine/tributary-engine-orders-0.yaml')).toMatch(/name: SHOP_PASSWORD\s+value: <redacted>/);
  });

  it('writes a report of the whole namespace where -f says', async () => {
    const target = join(workDir, 'all.tar.gz');
    const { exitCode, stdout } = await plugin(['report', '-f', target]);
    expect(exitCode).toBe(0);
    expect(stdout).toMatch(new RegExp(`^wrote ${target}: \\d+ files`));
    const out = join(workDir, 'all-report');
    mkdirSync(out);
    execFileSync('tar', ['-xzf', target, '-C', out]);
    const files = filesUnder(join(out, 'all'));
    for (const mirror of ['archive', 'broken', 'orders'])
      expect(files.has(`mirrors/${mirror}.yaml`)).toBe(true);
    expect(files.get('README.txt')).toContain(
      'Mirrors:    archive, broken, orders (every mirror of the namespace)',
    );
    expect(files.get('mirrors/broken.yaml')).toContain('cannot connect to postgres://replicator:<redacted>@');
    for (const [path, text] of files)
      for (const secret of secretValues) expect(text.includes(secret), `${path} holds a secret`).toBe(false);
  });

  it('runs as a kubectl plugin found on PATH', async () => {
    const pluginDir = join(workDir, 'plugins');
    mkdirSync(pluginDir);
    symlinkSync(join(repoRoot, 'bin', 'kubectl-tributary.js'), join(pluginDir, 'kubectl-tributary'));
    const env = {
      ...process.env,
      KUBECONFIG: kubeconfig,
      PATH: [pluginDir, dirname(process.execPath), process.env.PATH ?? ''].join(delimiter),
    };
    const listed = await runBounded(kube.kubectl, ['tributary', 'list'], {
      env,
      boundMs: 60_000,
      label: 'kubectl tributary list',
    });
    expect(listed).toMatchObject({ status: 0 });
    expect(listed.stdout).toMatch(/^orders +shop +analytics +Running +running +True/m);
    const missing = await runBounded(kube.kubectl, ['tributary', 'status', 'nope'], {
      env,
      boundMs: 60_000,
      label: 'kubectl tributary status nope',
    });
    expect(missing).toMatchObject({
      status: 1,
      stderr: `kubectl tributary: no mirror "nope" in namespace ${namespace}\n`,
    });
  });
});

// The user's path through the cluster, with the real kubectl: the CRDs and the
// examples/ folder applied as shipped (a kustomize overlay only points the
// example peers at the test servers and adds their Secrets), the operator
// reconciling, rows arriving in ClickHouse, pause and resume and a table added
// with `kubectl patch`, `kubectl delete` tearing the mirror down.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { type ClickHouseClient, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresCatalog } from '../../engine/src/index.ts';
import { createTestDatabase, droppablePool, type TestDatabase, waitFor } from '../support/databases.ts';
import { kubectl, waitUntilCrdsServed } from '../support/kube.ts';
import { exitOf, startOperator } from '../support/operator-process.ts';
import { clickhouse, kafka, repoRoot } from '../support/testenv.ts';

const mirrorName = 'shop-to-analytics';
const orderColumns = ['id', 'item', 'amount'] as const;
const customerColumns = ['id', 'name'] as const;

/** The overlay: the shipped examples, with connection details and Secrets for this machine. */
function overlay(namespace: string, source: TestDatabase, analyticsDatabase: string): string {
  const directory = mkdtempSync(join(tmpdir(), 'tributary-examples-'));
  const secret = (name: string, peer: string, password: string) =>
    `  - name: ${name}\n    literals: [${JSON.stringify(`password=${password}`)}]\n    options: { disableNameSuffixHash: true, labels: { tributary.dev/peer-secret: "true" }, annotations: { tributary.dev/peers: ${peer} } }`;
  const set = (kind: string, name: string, path: string, value: unknown) =>
    `  - target: { kind: ${kind}, name: ${name} }\n    patch: |\n      - op: add\n        path: ${path}\n        value: ${JSON.stringify(value)}`;
  const { password: sourcePassword, ...sourceConfig } = source.config;
  const chPort = Number(new URL(clickhouse.server.url).port);
  writeFileSync(
    join(directory, 'kustomization.yaml'),
    [
      'apiVersion: kustomize.config.k8s.io/v1beta1',
      'kind: Kustomization',
      `namespace: ${namespace}`,
      'resources:',
      // kustomize takes a base outside the overlay's folder, but only by a relative path.
      `  - ${relative(directory, join(repoRoot, 'examples'))}`,
      'secretGenerator:',
      secret('shop-db', 'shop', sourcePassword),
      secret('analytics-db', 'analytics', clickhouse.server.password),
      secret('events-kafka', 'events', kafka.scram.password),
      'patches:',
      set('Peer', 'shop', '/spec/relational', sourceConfig),
      set('Peer', 'analytics', '/spec/analytics', {
        host: '127.0.0.1',
        port: clickhouse.server.nativePort,
        httpPort: chPort,
        user: clickhouse.server.user,
        database: analyticsDatabase,
        disableTls: true,
      }),
      set('Peer', 'events', '/spec/stream/servers', [kafka.saslBroker]),
      set('Peer', 'events', '/spec/stream/username', kafka.scram.username),
      set('Peer', 'events', '/spec/stream/disableTls', true),
      set('Mirror', mirrorName, '/spec/tableMappings/0/destination/schema', analyticsDatabase),
      set('Mirror', mirrorName, '/spec/tableMappings/1/destination/schema', analyticsDatabase),
      set('Mirror', mirrorName, '/spec/idleTimeoutSeconds', 1),
      '',
    ].join('\n'),
  );
  return directory;
}

describe('kubectl with the shipped examples', () => {
  const namespace = `kubectl-${randomBytes(4).toString('hex')}`;
  const analyticsDatabase = `shop_${randomBytes(4).toString('hex')}`;
  let source: TestDatabase;
  let catalogDatabase: TestDatabase;
  let analytics: ClickHouseClient;
  let overlayDirectory = '';
  let operator: ChildProcess | undefined;
  const inNamespace = (...args: string[]) => kubectl(['--namespace', namespace, ...args]);

  /** Rows as `id|column|…` lines, live ones only at the destination. */
  const lines = (rows: Record<string, unknown>[], columns: readonly string[]) =>
    rows.map((row) => columns.map((column) => String(row[column])).join('|'));
  const destinationRows = async (table: string, columns: readonly string[]): Promise<string[]> => {
    const result = await analytics.query({
      query: `SELECT ${columns.join(', ')} FROM ${analyticsDatabase}.${table} FINAL
              WHERE _tributary_is_deleted = 0 ORDER BY id`,
      format: 'JSONEachRow',
    });
    return lines(await result.json<Record<string, unknown>>(), columns);
  };
  const sourceRows = async (table: string, columns: readonly string[]): Promise<string[]> =>
    lines(
      (await source.client.query(`SELECT ${columns.join(', ')} FROM ${table} ORDER BY id`)).rows,
      columns,
    );
  const sameRows = (table: string, columns: readonly string[]) =>
    waitFor(
      async () =>
        JSON.stringify(await sourceRows(table, columns)) ===
        JSON.stringify(await destinationRows(table, columns).catch(() => [])),
      60_000,
      `${table} to reach ClickHouse`,
    );
  const phase = async () =>
    (await inNamespace('get', 'mirror', mirrorName, '-o', 'jsonpath={.status.phase}')).trim();

  beforeAll(async () => {
    [source, catalogDatabase] = await Promise.all([
      createTestDatabase('kc_src'),
      createTestDatabase('kc_cat'),
    ]);
    const pool = droppablePool({ ...catalogDatabase.config, max: 1 });
    await new PostgresCatalog(pool).migrate();
    await pool.end();
    await source.client.query(`CREATE TABLE orders (id int PRIMARY KEY, item text, amount int)`);
    await source.client.query(`CREATE TABLE customers (id int PRIMARY KEY, name text, email text)`);
    await source.client.query(`CREATE TABLE refunds (id int PRIMARY KEY, order_id int)`);
    await source.client.query(
      `INSERT INTO orders SELECT g, 'item ' || g, g * 3 FROM generate_series(1, 500) g`,
    );
    await source.client.query(
      `INSERT INTO customers SELECT g, 'name ' || g, 'c' || g || '@example.com' FROM generate_series(1, 50) g`,
    );
    await source.client.query(`INSERT INTO refunds SELECT g, g * 3 FROM generate_series(1, 20) g`);
    analytics = createClient({
      url: clickhouse.server.url,
      username: clickhouse.server.user,
      password: clickhouse.server.password,
      // Polls read tables before the engine creates them: those errors are expected.
      log: { level: ClickHouseLogLevel.OFF },
    });
    await analytics.command({ query: `CREATE DATABASE ${analyticsDatabase}` });
    overlayDirectory = overlay(namespace, source, analyticsDatabase);
  });

  afterAll(async () => {
    operator?.kill('SIGTERM');
    if (operator) await exitOf(operator);
    await analytics?.command({ query: `DROP DATABASE IF EXISTS ${analyticsDatabase}` });
    await analytics?.close();
    await Promise.all([source?.drop(), catalogDatabase?.drop()]);
    if (overlayDirectory) rmSync(overlayDirectory, { recursive: true, force: true });
  });

  it('applies the CRDs and the examples', async () => {
    await kubectl(['apply', '--server-side', '--force-conflicts', '-f', join(repoRoot, 'crds')]);
    await kubectl(['wait', '--for=condition=Established', '--timeout=60s', '-f', join(repoRoot, 'crds')]);
    await waitUntilCrdsServed();
    await kubectl(['create', 'namespace', namespace]);
    // As a user would: the operator runs before the examples arrive, and
    // kubectl creates them in its own order (the Mirror before its Peers).
    operator = startOperator(namespace, catalogDatabase.config, 'kubectl-operator');
    await waitFor(
      async () =>
        (await inNamespace('get', 'lease', 'tributary-operator', '-o', 'jsonpath={.spec.holderIdentity}')) ===
        'kubectl-operator',
      60_000,
      'the operator to lead',
    );
    const applied = await kubectl(['apply', '-k', overlayDirectory]);
    for (const object of [
      'secret/shop-db',
      'peer.tributary.dev/shop',
      'peer.tributary.dev/analytics',
      'peer.tributary.dev/events',
      'script.tributary.dev/topic-per-table',
      `mirror.tributary.dev/${mirrorName}`,
    ]) {
      expect(applied).toContain(`${object} created`);
    }
  });

  it('reconciles: every example peer is checked and Ready', async () => {
    await inNamespace(
      'wait',
      '--for=condition=Ready',
      '--timeout=90s',
      'peer/shop',
      'peer/analytics',
      'peer/events',
    );
    const versions = await inNamespace(
      'get',
      'peers',
      '-o',
      'jsonpath={range .items[*]}{.metadata.name}={.status.version}{"\\n"}{end}',
    );
    expect(versions).toMatch(/^shop=\S+/m);
    expect(versions).toMatch(/^analytics=\S+/m);
  });

  it('loads the example mirror into ClickHouse and lists it in `kubectl get mirrors`', async () => {
    await sameRows('orders', orderColumns);
    await sameRows('customers', customerColumns);
    const emailColumns = await analytics.query({
      query: `SELECT name FROM system.columns WHERE database = '${analyticsDatabase}' AND table = 'customers'
              AND name = 'email'`,
      format: 'JSONEachRow',
    });
    expect(await emailColumns.json()).toEqual([]);
    await waitFor(async () => (await phase()) === 'STATUS_RUNNING', 60_000, 'running');
    const table = await inNamespace('get', 'mirrors');
    const [header, row] = table.trim().split('\n');
    expect(header?.split(/\s+/)).toEqual([
      'NAME',
      'API',
      'NAME',
      'STATE',
      'PHASE',
      'READY',
      'LAG',
      'ROWS',
      'AGE',
    ]);
    // Applied with kubectl: no API name annotation (its API name is its object name), an empty cell.
    expect(row?.split(/\s+/).slice(0, 3)).toEqual([mirrorName, 'Running', 'STATUS_RUNNING']);
    expect(row?.indexOf('Running')).toBe(header?.indexOf('STATE'));
  });

  it('pauses and resumes with `kubectl patch`, and takes an added table', async () => {
    await inNamespace('patch', 'mirror', mirrorName, '--type', 'merge', '-p', '{"spec":{"state":"Paused"}}');
    await inNamespace(
      'wait',
      '--for=jsonpath={.status.phase}=STATUS_PAUSED',
      '--timeout=60s',
      `mirror/${mirrorName}`,
    );
    await source.client.query(`INSERT INTO orders VALUES (1001, 'while paused', 1)`);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(await destinationRows('orders', orderColumns)).not.toContain('1001|while paused|1');

    const addRefunds = JSON.stringify([
      { op: 'replace', path: '/spec/state', value: 'Running' },
      {
        op: 'add',
        path: '/spec/tableMappings/-',
        value: {
          source: { schema: 'public', table: 'refunds' },
          destination: { schema: analyticsDatabase, table: 'refunds' },
        },
      },
    ]);
    await inNamespace('patch', 'mirror', mirrorName, '--type', 'json', '-p', addRefunds);
    await sameRows('orders', orderColumns);
    await sameRows('refunds', ['id', 'order_id']);
    await inNamespace(
      'wait',
      '--for=jsonpath={.status.phase}=STATUS_RUNNING',
      '--timeout=60s',
      `mirror/${mirrorName}`,
    );

    const described = await inNamespace('describe', 'mirror', mirrorName);
    expect(described).toMatch(/PhaseChanged/);
    expect(described).toMatch(/STATUS_PAUSED/);
  });

  it('refuses an edit of an immutable field with the CRD rule', async () => {
    const refused = await inNamespace(
      'patch',
      'mirror',
      mirrorName,
      '--type',
      'merge',
      '-p',
      '{"spec":{"sourcePeer":"analytics"}}',
    ).then(
      () => '',
      (error: Error) => error.message,
    );
    expect(refused).toMatch(/sourcePeer.*immutable|immutable.*sourcePeer/i);
  });

  it('tears the mirror down on `kubectl delete` before the object goes', async () => {
    await inNamespace('delete', 'mirror', mirrorName, '--timeout=90s');
    expect(await inNamespace('get', 'mirrors', '-o', 'name')).toBe('');
    const slots = await source.client.query(`SELECT 1 FROM pg_replication_slots WHERE database = $1`, [
      source.name,
    ]);
    expect(slots.rowCount).toBe(0);
    expect((await source.client.query(`SELECT 1 FROM pg_publication`)).rowCount).toBe(0);
    // Dropping a mirror leaves the data it delivered.
    expect(await destinationRows('refunds', ['id', 'order_id'])).toHaveLength(20);
  });
});

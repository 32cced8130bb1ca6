// The user's path to a Snowflake mirror with the real kubectl: the shipped
// examples/snowflake/ (a kustomize overlay points its peer at the emulator,
// adds the Secret with an encrypted key, and a source peer for this machine),
// the operator reconciling the peer to Ready, rows arriving in Snowflake, and
// `kubectl delete` tearing the mirror down and forgetting its checkpoint.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresCatalog } from '../../engine/src/index.ts';
import { createTestDatabase, droppablePool, type TestDatabase, waitFor } from '../support/databases.ts';
import { kubectl, waitUntilCrdsServed } from '../support/kube.ts';
import { exitOf, startOperator } from '../support/operator-process.ts';
import { emulatorConfig, SnowflakeAdmin, testPrivateKey, uniqueName } from '../support/snowflake-peer.ts';
import { repoRoot } from '../support/testenv.ts';

const mirrorName = 'shop-to-warehouse';
const passphrase = 'kubectl passphrase';

describe('kubectl with the Snowflake examples', () => {
  const namespace = `kubectl-sf-${randomBytes(4).toString('hex')}`;
  const config = emulatorConfig(uniqueName('KC'));
  let source: TestDatabase;
  let catalogDatabase: TestDatabase;
  let admin: SnowflakeAdmin;
  let overlayDirectory = '';
  let operator: ChildProcess | undefined;
  const inNamespace = (...args: string[]) => kubectl(['--namespace', namespace, ...args]);

  function overlay(): string {
    const directory = mkdtempSync(join(tmpdir(), 'tributary-examples-sf-'));
    const { password: sourcePassword, ...sourceConfig } = source.config;
    const set = (kind: string, name: string, path: string, value: unknown) =>
      `  - target: { kind: ${kind}, name: ${name} }\n    patch: |\n      - op: add\n        path: ${path}\n        value: ${JSON.stringify(value)}`;
    writeFileSync(
      join(directory, 'shop.yaml'),
      [
        'apiVersion: tributary.dev/v1alpha1',
        'kind: Peer',
        'metadata: { name: shop }',
        'spec:',
        '  kind: relational',
        `  relational: ${JSON.stringify(sourceConfig)}`,
        '  secretRef: { name: shop-db }',
        '',
      ].join('\n'),
    );
    const literal = (key: string, value: string) => JSON.stringify(`${key}=${value}`);
    writeFileSync(join(directory, 'key.pem'), testPrivateKey(passphrase));
    writeFileSync(
      join(directory, 'kustomization.yaml'),
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        `namespace: ${namespace}`,
        'resources:',
        `  - ${relative(directory, join(repoRoot, 'examples', 'snowflake'))}`,
        '  - shop.yaml',
        'secretGenerator:',
        `  - name: shop-db\n    literals: [${literal('password', sourcePassword)}]\n    options: { disableNameSuffixHash: true, labels: { tributary.dev/peer-secret: "true" }, annotations: { tributary.dev/peers: shop } }`,
        `  - name: warehouse-key\n    files: [privateKey=key.pem]\n    literals: [${literal('password', passphrase)}]\n    options: { disableNameSuffixHash: true, labels: { tributary.dev/peer-secret: "true" }, annotations: { tributary.dev/peers: warehouse } }`,
        'patches:',
        set('Peer', 'warehouse', '/spec/datawarehouse', {
          accountId: config.accountId,
          username: config.username,
          database: config.database,
          warehouse: config.warehouse,
          role: config.role,
          queryTimeout: 30,
          accessUrl: config.accessUrl,
        }),
        set('Mirror', mirrorName, '/spec/idleTimeoutSeconds', 1),
        '',
      ].join('\n'),
    );
    return directory;
  }

  const rows = async (sql: string): Promise<string[]> =>
    (await admin.rows(sql)).map((row) => Object.values(row).map(String).join('|'));
  const sameOrders = () =>
    waitFor(
      async () => {
        const expected = (await source.client.query(`SELECT id, item FROM orders ORDER BY id`)).rows.map(
          (row) => `${row.id}|${row.item}`,
        );
        const actual = await rows(
          `SELECT TO_VARCHAR("ID") AS "K", "ITEM" FROM "${config.database}"."SHOP"."ORDERS" ORDER BY "ID"`,
        ).catch(() => []);
        return JSON.stringify(expected) === JSON.stringify(actual);
      },
      90_000,
      'orders to reach Snowflake',
    );

  beforeAll(async () => {
    [source, catalogDatabase] = await Promise.all([
      createTestDatabase('kcsf_src'),
      createTestDatabase('kcsf_cat'),
    ]);
    const pool = droppablePool({ ...catalogDatabase.config, max: 1 });
    await new PostgresCatalog(pool).migrate();
    await pool.end();
    await source.client.query(`CREATE TABLE orders (id int PRIMARY KEY, item text)`);
    await source.client.query(`CREATE TABLE customers (id int PRIMARY KEY, name text, email text)`);
    await source.client.query(`INSERT INTO orders SELECT g, 'item ' || g FROM generate_series(1, 300) g`);
    await source.client.query(
      `INSERT INTO customers SELECT g, 'name ' || g, 'e' || g FROM generate_series(1, 30) g`,
    );
    admin = new SnowflakeAdmin(config);
    overlayDirectory = overlay();
  });

  afterAll(async () => {
    operator?.kill('SIGTERM');
    if (operator) await exitOf(operator);
    await admin?.close();
    await Promise.all([source?.drop(), catalogDatabase?.drop()]);
    if (overlayDirectory) rmSync(overlayDirectory, { recursive: true, force: true });
  });

  it('applies the examples; the peer is checked and Ready', async () => {
    await kubectl(['apply', '--server-side', '--force-conflicts', '-f', join(repoRoot, 'crds')]);
    await kubectl(['wait', '--for=condition=Established', '--timeout=60s', '-f', join(repoRoot, 'crds')]);
    await waitUntilCrdsServed();
    await kubectl(['create', 'namespace', namespace]);
    operator = startOperator(namespace, catalogDatabase.config, 'kubectl-sf-operator');
    const applied = await kubectl(['apply', '-k', overlayDirectory]);
    expect(applied).toContain('peer.tributary.dev/warehouse created');
    expect(applied).toContain(`mirror.tributary.dev/${mirrorName} created`);
    await inNamespace('wait', '--for=condition=Ready', '--timeout=90s', 'peer/warehouse', 'peer/shop');
  });

  it('loads and streams the mirror into Snowflake', async () => {
    await sameOrders();
    await waitFor(
      async () =>
        (await inNamespace('get', 'mirror', mirrorName, '-o', 'jsonpath={.status.phase}')).trim() ===
        'STATUS_RUNNING',
      60_000,
      'running',
    );
    await source.client.query(`UPDATE orders SET item = 'changed' WHERE id <= 10`);
    await source.client.query(`DELETE FROM orders WHERE id > 290`);
    await sameOrders();
    const columns = await rows(
      `SELECT COLUMN_NAME FROM "${config.database}".INFORMATION_SCHEMA.COLUMNS
       WHERE TABLE_SCHEMA = 'SHOP' AND TABLE_NAME = 'CUSTOMERS' ORDER BY COLUMN_NAME`,
    );
    expect(columns).toEqual(['ID', 'NAME']);
  });

  it('tears the mirror down on `kubectl delete`', async () => {
    await inNamespace('delete', 'mirror', mirrorName, '--timeout=90s');
    expect(await inNamespace('get', 'mirrors', '-o', 'name')).toBe('');
    expect(
      await rows(
        `SELECT "MIRROR" FROM "${config.database}"."_TRIBUTARY_INTERNAL"."CHECKPOINTS" WHERE "MIRROR" = '${mirrorName}'`,
      ),
    ).toEqual([]);
    // The delivered rows stay.
    expect((await rows(`SELECT COUNT(*) AS "N" FROM "${config.database}"."SHOP"."ORDERS"`))[0]).toBe('290');
  });
});

// Notifications in cluster mode: the leading operator, against the real
// kube-apiserver and PostgreSQL, sends a failed Mirror's notification to a real
// webhook receiver whose URL it reads from a file (the chart mounts it from a
// Secret), with the namespace in the body, once.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { group, version } from '../../operator/src/crds/schemas.ts';
import { createTestDatabase, randomSuffix, type TestDatabase, waitFor } from '../support/databases.ts';
import { adminConfig, createNamespace, installCrds } from '../support/kube.ts';
import { exitOf, startOperator } from '../support/operator-process.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.ts';

describe('notifications in cluster mode', () => {
  const config = adminConfig();
  const objects = config.makeApiClient(CustomObjectsApi);
  const core = config.makeApiClient(CoreV1Api);
  let namespace = '';
  let source: TestDatabase;
  let destination: TestDatabase;
  let catalogDatabase: TestDatabase;
  let receiver: WebhookReceiver;
  let operator: ChildProcess | undefined;
  const at = (plural: string) => ({ group, version, namespace, plural });
  const broken = `broken-${randomSuffix()}`;

  async function applyPeer(name: string, database: TestDatabase) {
    const { password, ...relational } = database.config;
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
        spec: { kind: 'relational', relational, secretRef: { name: `${name}-secret` } },
      },
    });
  }

  beforeAll(async () => {
    await installCrds(config);
    namespace = await createNamespace('notify');
    [source, destination, catalogDatabase] = await Promise.all([
      createTestDatabase('ntk_src'),
      createTestDatabase('ntk_dst'),
      createTestDatabase('ntk_cat'),
    ]);
    // The destination holds rows the mirror did not write: its initial load refuses to empty them.
    await source.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await destination.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await destination.client.query(`INSERT INTO notes VALUES (1, 'not the mirror''s')`);
    await applyPeer('source', source);
    await applyPeer('destination', destination);
    receiver = await startWebhookReceiver();
    const urlFile = join(mkdtempSync(join(tmpdir(), 'tributary-notify-')), 'url');
    writeFileSync(urlFile, receiver.url);
    operator = startOperator(namespace, catalogDatabase.config, 'operator-notify', 4, undefined, {
      env: { TRIBUTARY_NOTIFY_URL_FILE: urlFile, TRIBUTARY_NOTIFY_CHECK_SECONDS: '1' },
    });
  });

  afterAll(async () => {
    operator?.kill('SIGTERM');
    if (operator) await exitOf(operator);
    await receiver?.close();
    await Promise.all([source?.drop(), destination?.drop(), catalogDatabase?.drop()]);
  });

  const applyMirror = (name: string) =>
    objects.createNamespacedCustomObject({
      ...at('mirrors'),
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Mirror',
        metadata: { name },
        spec: {
          sourcePeer: 'source',
          destinationPeer: 'destination',
          tableMappings: [
            {
              source: { schema: 'public', table: 'notes' },
              destination: { schema: 'public', table: 'notes' },
            },
          ],
          doInitialSnapshot: true,
          idleTimeoutSeconds: 1,
        },
      },
    });

  it('sends one notification for a failed Mirror, naming its namespace', async () => {
    await applyMirror(broken);
    const failures = (mirror: string) =>
      receiver.bodies.filter((body) => body.kind === 'mirror_failed' && body.mirror === mirror);
    await waitFor(async () => failures(broken).length > 0, 120_000, 'a mirror_failed notification');
    expect(failures(broken)[0]).toMatchObject({ namespace, severity: 'critical', version: 1 });
    expect(failures(broken)[0]?.message).toContain('notes');
    const phase = async (name: string) =>
      (
        (await objects.getNamespacedCustomObject({ ...at('mirrors'), name })) as {
          status?: { phase?: string };
        }
      ).status?.phase;
    await waitFor(async () => (await phase(broken)) === 'STATUS_FAILED', 60_000, 'failed status');
    // A second mirror failing the same way: by its notification (they go out in
    // order) the first has been looked at and reconciled many times, told once.
    const second = `${broken}-2`;
    await applyMirror(second);
    await waitFor(async () => failures(second).length > 0, 120_000, 'the second mirror_failed');
    expect(failures(broken)).toHaveLength(1);
    expect(receiver.bodies.filter((body) => body.mirror === broken).map((body) => body.kind)).toEqual([
      'mirror_failed',
    ]);
    expect(JSON.stringify(receiver.bodies)).not.toContain(source.config.password);
  });
});

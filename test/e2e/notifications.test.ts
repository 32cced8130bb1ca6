// Notifications from a real standalone process to a real webhook receiver: a
// mirror that fails (its destination refuses the initial load) and recovers, a
// table the destination refuses a row of (errored, then streaming again after a
// resync), and a slot that goes missing while the receiver is down, delivered
// once it is up again. Each transition is one notification, and no body carries
// a password or a row value.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, randomSuffix, type TestDatabase, waitFor } from '../support/databases.ts';
import {
  createRelationalPeers,
  createTableMirror,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.ts';

const password = 'notifications-test-password';
const refusedValue = 'refused-row-value-'.repeat(3);

describe('notifications from standalone mode', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  let receiver: WebhookReceiver;
  const suffix = randomSuffix();
  const broken = `broken-${suffix}`;
  const picky = `picky-${suffix}`;
  const dir = mkdtempSync(join(tmpdir(), 'tributary-notify-'));

  const state = (mirror: string) => mirrorState(service, mirror);
  const told = (mirror: string, kind: string) =>
    receiver.bodies.filter((body) => body.mirror === mirror && body.kind === kind);
  const waitTold = (mirror: string, kind: string, timeoutMs = 90_000) =>
    waitFor(async () => told(mirror, kind).length > 0, timeoutMs, `${kind} of ${mirror}`);

  beforeAll(async () => {
    [source, destination] = await Promise.all([createTestDatabase('ntf_src'), createTestDatabase('ntf_dst')]);
    // Refused by the destination at the initial load: it holds rows the mirror did not write.
    await source.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await destination.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await destination.client.query(`INSERT INTO notes VALUES (1, 'not the mirror''s')`);
    // One row of this table breaks a CHECK constraint of its destination table: the table errors alone.
    for (const table of ['good', 'checked']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text)`);
      await source.client.query(`INSERT INTO ${table} SELECT g, 'v' || g FROM generate_series(1, 100) g`);
    }
    await source.client.query(`UPDATE checked SET v = $1 WHERE id = 50`, [refusedValue]);
    await destination.client.query(
      `CREATE TABLE checked (id int PRIMARY KEY, v text, CONSTRAINT short_v CHECK (length(v) < 20))`,
    );
    receiver = await startWebhookReceiver();
    const urlFile = join(dir, 'webhook-url');
    writeFileSync(urlFile, receiver.url);
    service = await startStandalone(join(dir, 'data'), password, {
      env: {
        TRIBUTARY_NOTIFY_URL_FILE: urlFile,
        TRIBUTARY_NOTIFY_CHECK_SECONDS: '1',
        TRIBUTARY_SLOT_HEALTH_SECONDS: '1',
      },
    });
    await createRelationalPeers(service, [
      [`src-${suffix}`, source],
      [`dst-${suffix}`, destination],
    ]);
  });

  afterAll(async () => {
    await service?.stop();
    await receiver?.close();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('tells a failed mirror and its recovery, once each', async () => {
    const created = await createTableMirror(service, {
      name: broken,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table: 'public.notes',
    });
    expect(created.status).toBe(200);
    await waitTold(broken, 'mirror_failed');
    expect(await state(broken)).toBe('STATUS_FAILED');
    const [failed] = told(broken, 'mirror_failed');
    expect(failed).toMatchObject({ version: 1, severity: 'critical', mirror: broken });
    expect(typeof failed?.installation).toBe('string');
    expect(failed?.message).toMatch(/notes/);

    await destination.client.query(`DELETE FROM notes`);
    const resumed = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: broken,
      requestedFlowState: 'STATUS_RUNNING',
    });
    expect(resumed.status).toBe(200);
    await waitTold(broken, 'mirror_recovered');
    expect(told(broken, 'mirror_failed')).toHaveLength(1);
    expect(told(broken, 'mirror_recovered')).toHaveLength(1);
  });

  it("tells a table's fault and its streaming again after a resync", async () => {
    const created = await createTableMirror(service, {
      name: picky,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table: ['public.good', 'public.checked'],
    });
    expect(created.status).toBe(200);
    await waitTold(picky, 'table_errored');
    const [errored] = told(picky, 'table_errored');
    expect(errored).toMatchObject({
      table: 'public.checked',
      reason: 'schema_mismatch',
      severity: 'warning',
    });
    expect(errored?.message).toContain('short_v');
    await waitFor(async () => (await state(picky)) === 'STATUS_RUNNING', 60_000, 'picky running');

    await destination.client.query(`ALTER TABLE checked DROP CONSTRAINT short_v`);
    const resync = await service.call('POST', '/api/v1/mirrors/tables/resync', {
      flowJobName: picky,
      sourceTableIdentifier: 'public.checked',
    });
    expect(resync.status).toBe(200);
    await waitTold(picky, 'table_recovered', 120_000);
    expect(told(picky, 'table_errored')).toHaveLength(1);
    expect(told(picky, 'table_recovered')).toEqual([expect.objectContaining({ table: 'public.checked' })]);
  });

  it('delivers what happened while the receiver was down once it is up, once', async () => {
    const paused = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: broken,
      requestedFlowState: 'STATUS_PAUSED',
    });
    expect(paused.status).toBe(200);
    await waitFor(async () => (await state(broken)) === 'STATUS_PAUSED', 60_000, 'broken paused');
    await receiver.down();
    const requestsBefore = receiver.requests();
    // A paused mirror's slot dropped by hand: the slot health monitor finds it missing.
    const dropped = await source.client.query<{ slot_name: string }>(
      `SELECT slot_name, pg_drop_replication_slot(slot_name) FROM pg_replication_slots
        WHERE database = current_database() AND slot_name LIKE $1 AND NOT active`,
      [`%${broken.replaceAll('-', '_')}%`],
    );
    expect(dropped.rowCount).toBe(1);
    await waitFor(
      async () => service.logLines.some((line) => line.includes('notification delivery failed')),
      60_000,
      'a failed delivery',
    );
    expect(told(broken, 'slot_in_danger'), JSON.stringify(receiver.bodies, null, 1)).toHaveLength(0);
    await receiver.up();
    await waitTold(broken, 'slot_in_danger');
    const [danger] = told(broken, 'slot_in_danger');
    expect(danger).toMatchObject({ reason: 'SlotMissing', severity: 'critical' });
    expect(receiver.requests()).toBeGreaterThan(requestsBefore);
    // Two reads of the slot later (each a look that finds it missing again), still one.
    const lastRead = async () => {
      const metrics = await (await fetch(`${service.baseUrl}/metrics`)).text();
      const line = metrics
        .split('\n')
        .find((entry) =>
          entry.startsWith(`tributary_mirror_slot_last_read_timestamp_seconds{mirror="${broken}"`),
        );
      return Number(line?.split(' ').at(-1) ?? 0);
    };
    const readAt = await lastRead();
    await waitFor(async () => (await lastRead()) >= readAt + 2, 30_000, 'two more slot reads');
    expect(told(broken, 'slot_in_danger')).toHaveLength(1);

    const everything = JSON.stringify(receiver.bodies);
    for (const secret of [password, source.config.password, destination.config.password, refusedValue]) {
      if (secret) expect(everything).not.toContain(secret);
    }
    expect(new Set(receiver.bodies.map((body) => body.id)).size).toBe(receiver.bodies.length);
  });
});

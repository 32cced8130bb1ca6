// The retained WAL limit against a real source, through a real standalone
// process: two paused mirrors whose slots pass their 1 MiB limit while the
// source writes. With the default action (Alert) the slot stays and is
// unhealthy (RetainedWalOverLimit), with a notification; with DropSlot the slot
// is dropped, with a log line and a notification, and the mirror, resumed,
// empties its destination table and loads it again, equal to the source row by
// row (rows deleted while it was paused included), then streams on.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestDatabase,
  randomSuffix,
  type TestDatabase,
  tableCells,
  waitFor,
  waitForSameRows,
} from '../support/databases.ts';
import {
  createRelationalPeers,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.ts';

const password = 'retained-wal-limit-password';
const limit = 1_048_576;

interface SlotHealthWire {
  readonly slotName: string;
  readonly reason: string;
  readonly message: string;
}

describe('a limit on retained WAL', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  let receiver: WebhookReceiver;
  const suffix = randomSuffix();
  const alerting = `alert-${suffix}`;
  const dropping = `drop-${suffix}`;
  const dir = mkdtempSync(join(tmpdir(), 'tributary-wal-limit-'));

  const state = (mirror: string) => mirrorState(service, mirror);
  const slotHealth = async (mirror: string) =>
    (
      (await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror })).body as {
        slotHealth?: SlotHealthWire;
      }
    ).slotHealth;
  const slotExists = async (name: string) =>
    (await source.client.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name = $1`, [name]))
      .rowCount === 1;
  const stateChange = (mirror: string, requestedFlowState: string) =>
    service.call('POST', '/api/v1/mirrors/state_change', { flowJobName: mirror, requestedFlowState });
  const create = (configs: Record<string, unknown>) =>
    service.call('POST', '/api/v1/flows/cdc/create', {
      connection_configs: {
        source_name: `src-${suffix}`,
        destination_name: `dst-${suffix}`,
        idle_timeout_seconds: 1,
        ...configs,
      },
    });
  const mapping = (table: string) => [
    { source_table_identifier: `public.${table}`, destination_table_identifier: `public.${table}` },
  ];

  beforeAll(async () => {
    [source, destination] = await Promise.all([createTestDatabase('wal_src'), createTestDatabase('wal_dst')]);
    for (const table of ['alerting', 'dropping']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, pad text)`);
      await source.client.query(`INSERT INTO ${table} SELECT g, 'v' || g FROM generate_series(1, 500) g`);
    }
    receiver = await startWebhookReceiver();
    writeFileSync(join(dir, 'url'), receiver.url);
    service = await startStandalone(join(dir, 'data'), password, {
      env: {
        TRIBUTARY_SLOT_HEALTH_SECONDS: '1',
        TRIBUTARY_NOTIFY_URL_FILE: join(dir, 'url'),
        TRIBUTARY_NOTIFY_CHECK_SECONDS: '1',
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

  it('refuses DropSlot without a limit or without an initial load, naming the field', async () => {
    const noLimit = await create({
      flow_job_name: `nolimit-${suffix}`,
      table_mappings: mapping('dropping'),
      do_initial_snapshot: true,
      retained_wal_limit_action: 'DropSlot',
    });
    expect(noLimit.status).toBe(400);
    expect(JSON.stringify(noLimit.body)).toContain('DropSlot needs maxRetainedWalBytes');
    const noLoad = await create({
      flow_job_name: `noload-${suffix}`,
      table_mappings: mapping('dropping'),
      do_initial_snapshot: false,
      maxRetainedWalBytes: limit,
      retainedWalLimitAction: 'DropSlot',
    });
    expect(noLoad.status).toBe(400);
    expect(JSON.stringify(noLoad.body)).toContain('DropSlot needs doInitialSnapshot');
  });

  it('alerts on one paused mirror, drops the slot of the other, which loads again when resumed', {
    timeout: 240_000,
  }, async () => {
    // Both spellings of the fields: snake_case here, camelCase below.
    expect(
      (
        await create({
          flow_job_name: alerting,
          table_mappings: mapping('alerting'),
          do_initial_snapshot: true,
          max_retained_wal_bytes: limit,
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await create({
          flow_job_name: dropping,
          table_mappings: mapping('dropping'),
          do_initial_snapshot: true,
          maxRetainedWalBytes: String(limit),
          retainedWalLimitAction: 'DropSlot',
        })
      ).status,
    ).toBe(200);
    for (const mirror of [alerting, dropping]) {
      await waitFor(async () => (await state(mirror)) === 'STATUS_RUNNING', 90_000, `${mirror} running`);
    }
    await waitForSameRows(source.client, destination.client, 'dropping');
    // The slot monitor reads each slot on its own interval: its first reading may not be in yet.
    for (const mirror of [alerting, dropping]) {
      await waitFor(async () => Boolean((await slotHealth(mirror))?.slotName), 60_000, `${mirror} slot read`);
    }
    const droppingSlot = (await slotHealth(dropping))?.slotName ?? '';
    const alertingSlot = (await slotHealth(alerting))?.slotName ?? '';
    expect(droppingSlot).toMatch(/^tributary_drop_/);
    for (const mirror of [alerting, dropping])
      expect((await stateChange(mirror, 'STATUS_PAUSED')).status).toBe(200);
    for (const mirror of [alerting, dropping]) {
      await waitFor(async () => (await state(mirror)) === 'STATUS_PAUSED', 60_000, `${mirror} paused`);
    }

    // Several MiB of WAL while both are paused, and rows gone that the reload must not bring back.
    await source.client.query(`DELETE FROM dropping WHERE id <= 100`);
    for (const table of ['alerting', 'dropping']) {
      await source.client.query(
        `INSERT INTO ${table} SELECT g, repeat(md5(g::text), 8) FROM generate_series(1001, 11000) g`,
      );
    }

    await waitFor(async () => !(await slotExists(droppingSlot)), 60_000, 'the over-limit slot dropped');
    await waitFor(
      async () => receiver.bodies.some((body) => body.kind === 'slot_dropped' && body.mirror === dropping),
      30_000,
      'the slot_dropped notification',
    );
    const dropped = await slotHealth(dropping);
    expect(dropped?.reason).toBe('SlotNotCreated');
    const logs = await service.call('POST', '/api/v1/mirrors/logs', {
      flowJobName: dropping,
      numPerPage: 100,
    });
    expect(JSON.stringify(logs.body)).toContain('dropped (retainedWalLimitAction DropSlot)');
    expect(await state(dropping)).toBe('STATUS_PAUSED');

    // Alert only: the slot stays, unhealthy, told once.
    await waitFor(
      async () => (await slotHealth(alerting))?.reason === 'RetainedWalOverLimit',
      30_000,
      'the alerting mirror over its limit',
    );
    expect(await slotExists(alertingSlot)).toBe(true);
    await waitFor(
      async () =>
        receiver.bodies.some(
          (body) =>
            body.kind === 'slot_in_danger' &&
            body.mirror === alerting &&
            body.reason === 'RetainedWalOverLimit',
        ),
      30_000,
      'the alerting mirror told in danger',
    );

    // Resumed: the dropped one loads its table again from a new slot, equal row by row, and streams.
    for (const mirror of [alerting, dropping])
      expect((await stateChange(mirror, 'STATUS_RUNNING')).status).toBe(200);
    await waitFor(
      async () => (await state(dropping)) === 'STATUS_RUNNING',
      120_000,
      'dropping running again',
    );
    await source.client.query(`INSERT INTO dropping VALUES (20000, 'after the reload')`);
    await source.client.query(`UPDATE dropping SET pad = 'changed' WHERE id = 200`);
    for (const table of ['dropping', 'alerting']) {
      await waitForSameRows(source.client, destination.client, table, 120_000).catch(() => {});
      expect(await tableCells(destination.client, table, 'id')).toEqual(
        await tableCells(source.client, table, 'id'),
      );
    }
    expect(await slotExists(droppingSlot)).toBe(true);
    const logsAfter = await service.call('POST', '/api/v1/mirrors/logs', {
      flowJobName: dropping,
      numPerPage: 100,
    });
    expect(JSON.stringify(logsAfter.body)).toContain('initial load');
  });
});

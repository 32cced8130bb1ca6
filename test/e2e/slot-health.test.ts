// Slot health in every mirror state, against a real source: a standalone
// process reading each mirror's slot every second. While the mirror is paused
// (no engine) and its source writes, the WAL its slot retains grows in
// /metrics, in /api/v1/mirrors/status and on the console's mirror page; a slot
// dropped by hand behind a paused mirror turns the verdict to SlotMissing.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, randomSuffix, type TestDatabase, waitFor } from '../support/databases.ts';
import { checkedJsonExample, jsonShape } from '../support/doc-examples.ts';
import {
  createRelationalPeers,
  createTableMirror,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';
import { destinationPostgres, sourcePostgres } from '../support/testenv.ts';

const password = 'slot-health-password';

interface SlotHealthWire {
  slotName: string;
  checkedAt: string;
  status: string;
  reason: string;
  message: string;
  active?: boolean;
  walStatus?: string;
  retainedWalBytes?: string;
  unconfirmedBytes?: string;
}

describe(`slot health on PostgreSQL ${sourcePostgres.major}`, () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-slot-health-')), 'data');
  const suffix = randomSuffix();
  const mirror = `slots-${suffix}`;

  const slotHealth = async (): Promise<SlotHealthWire | undefined> => {
    const { body } = await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror });
    return (body as { slotHealth?: SlotHealthWire }).slotHealth;
  };
  /** The mirror's value of a metric, undefined when the series is absent. */
  const metric = async (name: string): Promise<number | undefined> => {
    const text = await (await fetch(`${service.baseUrl}/metrics`)).text();
    const line = text
      .split('\n')
      .find((candidate) => candidate.startsWith(`${name}{`) && candidate.includes(`mirror="${mirror}"`));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
  };

  beforeAll(async () => {
    [source, destination] = await Promise.all([
      createTestDatabase('slh_src', sourcePostgres),
      createTestDatabase('slh_dst', destinationPostgres),
    ]);
    await source.client.query(`CREATE TABLE orders (id int PRIMARY KEY, item text)`);
    await source.client.query(`INSERT INTO orders VALUES (1, 'tea')`);
    service = await startStandalone(dataDir, password, { env: { TRIBUTARY_SLOT_HEALTH_SECONDS: '1' } });
    await createRelationalPeers(service, [
      [`src-${suffix}`, source],
      [`dst-${suffix}`, destination],
    ]);
  });

  afterAll(async () => {
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('shows the WAL a paused mirror retains grow, in metrics, status and console', async () => {
    const created = await createTableMirror(service, {
      name: mirror,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table: 'public.orders',
    });
    expect(created.status).toBe(200);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 60_000, 'running');
    await waitFor(async () => (await slotHealth())?.active === true, 30_000, 'an active, read slot');
    // Lag in seconds from commit times: 0 on a caught-up, idle mirror.
    const status = await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror });
    expect((status.body as { lagSeconds?: number }).lagSeconds).toBe(0);
    const running = await slotHealth();
    expect(running).toMatchObject({ status: 'True', reason: 'Healthy', walStatus: 'reserved' });
    expect(running?.slotName).toMatch(/^tributary_slots_/);
    // int64 as decimal strings, protojson's way.
    expect(running?.retainedWalBytes).toMatch(/^\d+$/);

    const paused = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: mirror,
      requestedFlowState: 'STATUS_PAUSED',
    });
    expect(paused.status).toBe(200);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_PAUSED', 60_000, 'paused');
    await waitFor(async () => (await slotHealth())?.active === false, 30_000, 'an inactive slot');
    const atPause = BigInt((await slotHealth())?.retainedWalBytes ?? '0');
    expect(await metric('tributary_mirror_slot_active')).toBe(0);

    // About 24 MB of WAL at the source while no engine runs for the mirror.
    await source.client.query(`CREATE TABLE filler (id int, pad text)`);
    await source.client.query(
      `INSERT INTO filler SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 80000) AS g`,
    );
    const written = 16n * 1024n * 1024n;
    await waitFor(
      async () => BigInt((await slotHealth())?.retainedWalBytes ?? '0') >= atPause + written,
      30_000,
      'retained WAL grown by 16 MiB in the status',
    );
    const grown = await slotHealth();
    expect(grown).toMatchObject({ status: 'True', reason: 'Healthy', active: false });
    // docs/api.md shows this answer: the same fields, the same JSON types.
    expect(jsonShape(grown)).toEqual(
      jsonShape(checkedJsonExample('docs/api.md', 'test/e2e/slot-health.test.ts')),
    );
    expect(BigInt(grown?.unconfirmedBytes ?? '0')).toBeGreaterThanOrEqual(written);
    expect(await metric('tributary_mirror_slot_retained_wal_bytes')).toBeGreaterThanOrEqual(
      Number(atPause + written),
    );
    expect(await metric('tributary_mirror_slot_healthy')).toBe(1);
    expect(await metric('tributary_mirror_slot_last_read_timestamp_seconds')).toBeGreaterThan(
      Date.now() / 1000 - 30,
    );

    // The console's mirror page shows the same figures.
    const page = await fetch(`${service.baseUrl}/mirrors/${encodeURIComponent(mirror)}`, {
      headers: { authorization: `Basic ${Buffer.from(`:${password}`).toString('base64')}` },
    });
    expect(page.status).toBe(200);
    const text = await page.text();
    expect(text).toContain(`Replication slot <code>${grown?.slotName}</code>`);
    expect(text).toMatch(/WAL retained<\/th><td>\d+\.\d MiB/);
    expect(text).toContain('<th scope="row">active</th><td>no</td>');
    // Lag in seconds is a streaming engine's figure: a paused mirror shows the slot's instead.
    expect(text).not.toContain('class="lag"');
  });

  it('says SlotMissing once the paused mirror’s slot is dropped behind its back', async () => {
    const before = await slotHealth();
    expect(before?.slotName).toBeTruthy();
    await source.client.query(`SELECT pg_drop_replication_slot($1)`, [before?.slotName]);
    await waitFor(async () => (await slotHealth())?.reason === 'SlotMissing', 30_000, 'SlotMissing');
    const missing = await slotHealth();
    expect(missing).toMatchObject({ status: 'False', reason: 'SlotMissing' });
    expect(missing?.message).toContain('does not exist');
    expect(missing?.retainedWalBytes).toBeUndefined();
    expect(await metric('tributary_mirror_slot_retained_wal_bytes')).toBeUndefined();
    expect(await metric('tributary_mirror_slot_healthy')).toBe(0);
  });
});

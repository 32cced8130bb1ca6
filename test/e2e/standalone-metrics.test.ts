// /metrics of a real standalone process over a mirror's life: the series of a
// dropped mirror are gone in the first scrape that no longer lists the mirror,
// while another mirror's stay.
import { mkdtempSync } from 'node:fs';
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

const password = 'standalone-metrics-password';

describe('standalone /metrics', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-metrics-')), 'data');
  const suffix = randomSuffix();
  const dropped = `dropped-${suffix}`;
  const kept = `kept-${suffix}`;

  const scrape = async () => (await fetch(`${service.baseUrl}/metrics`)).text();
  const seriesOf = (metrics: string, mirror: string) =>
    metrics.split('\n').filter((line) => !line.startsWith('#') && line.includes(`mirror="${mirror}"`));
  const state = (mirror: string) => mirrorState(service, mirror);

  beforeAll(async () => {
    [source, destination] = await Promise.all([createTestDatabase('met_src'), createTestDatabase('met_dst')]);
    for (const table of ['orders', 'items']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, item text)`);
      await source.client.query(`INSERT INTO ${table} VALUES (1, 'tea'), (2, 'milk')`);
    }
    service = await startStandalone(dataDir, password);
    await createRelationalPeers(service, [
      [`src-${suffix}`, source],
      [`dst-${suffix}`, destination],
    ]);
  });

  afterAll(async () => {
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('drops the series of a dropped mirror within one scrape and keeps the others', async () => {
    for (const [mirror, table] of [
      [dropped, 'public.orders'],
      [kept, 'public.items'],
    ] as const) {
      const created = await createTableMirror(service, {
        name: mirror,
        sourcePeer: `src-${suffix}`,
        destinationPeer: `dst-${suffix}`,
        table,
      });
      expect(created.status).toBe(200);
    }
    for (const mirror of [dropped, kept]) {
      await waitFor(async () => (await state(mirror)) === 'STATUS_RUNNING', 60_000, `${mirror} running`);
    }
    await source.client.query(`INSERT INTO orders VALUES (3, 'bread')`);
    await source.client.query(`INSERT INTO items VALUES (3, 'bread')`);
    // Both mirrors have engine series (CDC rows counted) and facade gauges.
    await waitFor(
      async () => {
        const metrics = await scrape();
        return [dropped, kept].every((mirror) =>
          seriesOf(metrics, mirror).some((line) => line.startsWith('tributary_engine_cdc_rows_total')),
        );
      },
      60_000,
      'CDC rows of both mirrors in /metrics',
    );
    const before = await scrape();
    expect(seriesOf(before, dropped).map((line) => line.split('{')[0])).toEqual(
      expect.arrayContaining([
        'tributary_mirror_phase',
        'tributary_engine_snapshot_rows_total',
        'tributary_engine_cdc_batches_total',
        'tributary_engine_batch_sync_seconds_bucket',
        'tributary_engine_acknowledged_lsn_bytes',
      ]),
    );

    const drop = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: dropped,
      requestedFlowState: 'STATUS_TERMINATING',
    });
    expect(drop.status).toBe(200);
    await waitFor(async () => (await state(dropped)) === 'STATUS_TERMINATED', 60_000, 'dropped');
    // The first scrape in which the facade no longer lists the mirror has none of its engine series either.
    let after = '';
    await waitFor(
      async () => {
        after = await scrape();
        return !after.includes(`tributary_mirror_phase{mirror="${dropped}"`);
      },
      30_000,
      'the dropped mirror to leave /metrics',
    );
    expect(seriesOf(after, dropped)).toEqual([]);
    expect(seriesOf(after, kept).some((line) => line.startsWith('tributary_engine_cdc_rows_total'))).toBe(
      true,
    );
    expect(after).toContain(`tributary_mirror_phase{mirror="${kept}",phase="STATUS_RUNNING"} 1`);
  });
});

// What a user sees through the facade while a mirror retries a fault, and the
// figures that must keep telling the truth past nine batches and during an
// outage: status errorMessage with the state unchanged, last batch id and lag
// gauges from finished batches only, and a re-created mirror that never answers
// the dropped one's state.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, randomSuffix, type TestDatabase, waitFor } from '../support/databases.ts';
import { createFacade, type Facade } from '../support/facade.ts';

describe('fault visibility through the facade', () => {
  let facade: Facade;
  let source: TestDatabase;
  let destination: TestDatabase;
  const suffix = randomSuffix();
  const sourcePeer = `src-${suffix}`;
  const destinationPeer = `dst-${suffix}`;

  const create = (name: string) =>
    facade.post('/api/v1/flows/cdc/create', {
      connection_configs: {
        flow_job_name: name,
        source_name: sourcePeer,
        destination_name: destinationPeer,
        table_mappings: [
          { source_table_identifier: 'public.seen', destination_table_identifier: 'public.seen' },
        ],
        do_initial_snapshot: true,
      },
    });
  const status = async (name: string) =>
    (await facade.post('/api/v1/mirrors/status', { flowJobName: name })).json() as {
      currentFlowState: string;
      errorMessage: string;
      ok: boolean;
    };
  const gauge = async (metric: string, mirror: string): Promise<number | undefined> => {
    const text = (await facade.request({ method: 'GET', url: '/metrics' })).body;
    const line = text.split('\n').find((row) => row.startsWith(`${metric}{mirror="${mirror}"}`));
    return line === undefined ? undefined : Number(line.split(' ').at(-1));
  };

  beforeAll(async () => {
    [source, destination] = await Promise.all([
      createTestDatabase('visible_src'),
      createTestDatabase('visible_dst'),
    ]);
    await source.client.query(`CREATE TABLE seen (id int PRIMARY KEY)`);
    facade = await createFacade();
    for (const [name, database] of [
      [sourcePeer, source],
      [destinationPeer, destination],
    ] as const) {
      const response = await facade.post('/api/v1/peers/create', {
        peer: { name, type: 3, relational_config: { ...database.config } },
      });
      expect(response.json()).toMatchObject({ status: 'CREATED' });
    }
  }, 60_000);

  afterAll(async () => {
    await facade?.close();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('shows a retried fault as errorMessage while the state stays running', async () => {
    const name = `retrying-${suffix}`;
    expect((await create(name)).statusCode).toBe(200);
    const { catalog } = facade.controlPlane;
    await catalog.transition(name, 'setup');
    await catalog.transition(name, 'running');
    const fault =
      'destination: sync batch 3 failed (ECONNREFUSED); retrying. check that the peer host and port are reachable from the engine';
    await catalog.setRetryingError(name, fault);
    expect(await status(name)).toMatchObject({
      currentFlowState: 'STATUS_RUNNING',
      ok: true,
      errorMessage: fault,
    });
    await catalog.setRetryingError(name, null);
    expect(await status(name)).toMatchObject({
      currentFlowState: 'STATUS_RUNNING',
      ok: true,
      errorMessage: '',
    });
  });

  it('shows a stalled step as stall {step, since} while the state stays as it is', async () => {
    const name = `stalled-${suffix}`;
    expect((await create(name)).statusCode).toBe(200);
    const { catalog } = facade.controlPlane;
    await catalog.transition(name, 'setup');
    await catalog.transition(name, 'snapshot');
    const step = 'initial load: destination: write public.seen partition 1 of 1';
    await catalog.setStall(name, { step, since: new Date('2026-01-02T03:04:05.000Z') });
    expect(await status(name)).toEqual({
      flowJobName: name,
      currentFlowState: 'STATUS_SNAPSHOT',
      ok: true,
      errorMessage: '',
      stall: { step, since: '2026-01-02T03:04:05.000Z' },
    });
    await catalog.setStall(name, null);
    expect(await status(name)).not.toHaveProperty('stall');
  });

  it('shows a fault of a first run that never reached setup', async () => {
    const name = `first-run-${suffix}`;
    expect((await create(name)).statusCode).toBe(200);
    const fault =
      'connect to 127.0.0.1:1/db failed (ECONNREFUSED); retrying. check that the peer host and port are reachable from the engine';
    await facade.controlPlane.catalog.setRetryingError(name, fault);
    expect(await status(name)).toMatchObject({
      currentFlowState: 'STATUS_SETUP',
      ok: true,
      errorMessage: fault,
    });
  });

  it('reports the last finished batch by number, and its lag keeps growing during an outage', async () => {
    const name = `lag-${suffix}`;
    expect((await create(name)).statusCode).toBe(200);
    const { catalog } = facade.controlPlane;
    for (let id = 1n; id <= 12n; id++) {
      await catalog.startBatch(name, { batchId: id, startTime: new Date(), startLsn: id * 10n });
      await catalog.finishBatch(name, {
        batchId: id,
        endTime: new Date(),
        rowCount: 1n,
        endLsn: id * 10n + 5n,
      });
    }
    // The outage: batch 13 started and cannot be written.
    await catalog.startBatch(name, { batchId: 13n, startTime: new Date(), startLsn: 130n });
    expect(await gauge('tributary_mirror_last_batch_id', name)).toBe(12);
    const first = await gauge('tributary_mirror_seconds_since_last_batch', name);
    expect(first).toBeGreaterThanOrEqual(0);
    await waitFor(
      async () => ((await gauge('tributary_mirror_seconds_since_last_batch', name)) ?? 0) > (first ?? 0),
      10_000,
      'the lag to grow',
    );
  });

  it('never answers the dropped mirror state for a mirror created again under its name', async () => {
    const name = `again-${suffix}`;
    expect((await create(name)).statusCode).toBe(200);
    const { catalog, store } = facade.controlPlane;
    for (const phase of ['setup', 'running', 'terminating', 'terminated'] as const) {
      await catalog.transition(name, phase);
    }
    await store.removeMirror(name);
    expect((await status(name)).currentFlowState).toBe('STATUS_TERMINATED');
    expect((await create(name)).statusCode).toBe(200);
    expect((await status(name)).currentFlowState).toBe('STATUS_SETUP');
  });
});

// POST /api/v1/mirrors/cdc/batches and /api/v1/mirrors/logs through
// app.inject(), over batches and logs seeded straight into the catalog.
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mirrorResourceSpecSchema } from '../../engine/src/index.ts';
import { randomSuffix } from '../support/databases.ts';
import { createFacade, type Facade } from '../support/facade.ts';

function expectError(response: LightMyRequestResponse, status: number, code: number, message: string): void {
  expect(response.statusCode, response.body).toBe(status);
  expect(response.json()).toEqual({ code, message: expect.stringContaining(message), details: [] });
}

describe('batches and logs', () => {
  let facade: Facade;
  const suffix = randomSuffix();
  const mirror = `history-${suffix}`;
  const other = `other-${suffix}`;
  /** A dropped mirror: its runtime row and batches remain, its resource is gone. */
  const dropped = `dropped-${suffix}`;
  const hugeBatchId = 9_007_199_254_740_993n; // 2^53 + 1: not exact as a JSON number
  const maxLsn = 18_446_744_073_709_551_615n; // 2^64 - 1
  const maxRows = 9_223_372_036_854_775_807n; // 2^63 - 1
  let seededFrom = 0;
  let seededUntil = 0;

  async function stateOf(): Promise<string> {
    const { store, catalog } = facade.controlPlane;
    const batches = await Promise.all(
      [mirror, other, dropped].map((name) => catalog.listBatches(name, { limit: 0, ascending: true })),
    );
    return JSON.stringify(
      {
        mirrors: await store.listMirrors(),
        batches,
        logs: await catalog.listLogs({ offset: 0, limit: 1_000 }),
      },
      (_, value: unknown) => (typeof value === 'bigint' ? value.toString() : value),
    );
  }

  const batches = (body: Record<string, unknown>) =>
    facade.post('/api/v1/mirrors/cdc/batches', { flowJobName: mirror, ...body });
  const batchIds = (response: LightMyRequestResponse): string[] =>
    response.json().cdcBatches.map((batch: { batchId: string }) => batch.batchId);
  const logs = (body: Record<string, unknown>) => facade.post('/api/v1/mirrors/logs', body);
  const messages = (response: LightMyRequestResponse): string[] =>
    response.json().errors.map((entry: { errorMessage: string }) => entry.errorMessage);

  beforeAll(async () => {
    facade = await createFacade();
    const { store, catalog } = facade.controlPlane;
    for (const name of [mirror, other]) {
      await store.createMirror(
        mirrorResourceSpecSchema.parse({
          name,
          sourcePeer: 'src',
          destinationPeer: 'dst',
          tableMappings: [
            { source: { schema: 'public', table: 't' }, destination: { schema: 'public', table: 't' } },
          ],
          doInitialSnapshot: false,
        }),
      );
    }
    const start = new Date('2025-01-02T03:04:05.000Z');
    const at = (seconds: number) => new Date(start.getTime() + seconds * 1_000);
    for (const [index, batchId] of [1n, 2n, 3n, 4n, hugeBatchId].entries()) {
      await catalog.startBatch(mirror, { batchId, startTime: at(index * 10), startLsn: 1_000n * batchId });
      if (batchId === hugeBatchId) continue; // the newest batch is still open
      await catalog.finishBatch(mirror, {
        batchId,
        endTime: at(index * 10 + 5),
        rowCount: batchId === 4n ? maxRows : batchId * 10n,
        endLsn: batchId === 4n ? maxLsn : 1_000n * batchId + 500n,
      });
    }
    await catalog.startBatch(other, { batchId: 1n, startTime: start, startLsn: 1n });
    await catalog.transition(dropped, 'setup');
    await catalog.startBatch(dropped, { batchId: 7n, startTime: start, startLsn: 70n });

    seededFrom = Date.now();
    await catalog.appendLog(mirror, 'INFO', 'a1 started');
    await catalog.appendLog(mirror, 'WARN', 'a2 slow');
    await catalog.appendLog(other, 'ERROR', 'b1 failed');
    await catalog.appendLog(mirror, 'ERROR', 'a3 failed');
    await catalog.appendLog(other, 'INFO', 'b2 started');
    await catalog.appendLog(mirror, 'INFO', 'a4 resumed');
    seededUntil = Date.now();
  });

  afterAll(async () => {
    await facade?.close();
  });

  describe('mirrors/cdc/batches', () => {
    it('lists every batch, newest first, with 64-bit values as strings', async () => {
      const response = await batches({});
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({
        cdcBatches: [
          {
            batchId: hugeBatchId.toString(),
            batch_id: hugeBatchId.toString(),
            startTime: '2025-01-02T03:04:45.000Z',
            endTime: null,
            numRows: '0',
            startLsn: (1_000n * hugeBatchId).toString(),
            endLsn: '0',
          },
          {
            batchId: '4',
            batch_id: '4',
            startTime: '2025-01-02T03:04:35.000Z',
            endTime: '2025-01-02T03:04:40.000Z',
            numRows: maxRows.toString(),
            startLsn: '4000',
            endLsn: maxLsn.toString(),
          },
          {
            batchId: '3',
            batch_id: '3',
            startTime: '2025-01-02T03:04:25.000Z',
            endTime: '2025-01-02T03:04:30.000Z',
            numRows: '30',
            startLsn: '3000',
            endLsn: '3500',
          },
          {
            batchId: '2',
            batch_id: '2',
            startTime: '2025-01-02T03:04:15.000Z',
            endTime: '2025-01-02T03:04:20.000Z',
            numRows: '20',
            startLsn: '2000',
            endLsn: '2500',
          },
          {
            batchId: '1',
            batch_id: '1',
            startTime: '2025-01-02T03:04:05.000Z',
            endTime: '2025-01-02T03:04:10.000Z',
            numRows: '10',
            startLsn: '1000',
            endLsn: '1500',
          },
        ],
        total: 5,
        page: 1,
      });
    });

    it('limits, sorts and filters', async () => {
      const all = ['9007199254740993', '4', '3', '2', '1'];
      expect(batchIds(await batches({ ascending: true }))).toEqual([...all].reverse());
      expect(batchIds(await batches({ ascending: false }))).toEqual(all);
      expect(batchIds(await batches({ limit: 2 }))).toEqual(['9007199254740993', '4']);
      expect(batchIds(await batches({ limit: 2, ascending: true }))).toEqual(['1', '2']);
      expect(batchIds(await batches({ limit: 0 }))).toEqual(all);
      expect(batchIds(await batches({ limit: -5 }))).toEqual(all);
      expect(batchIds(await batches({ beforeId: 4 }))).toEqual(['3', '2', '1']);
      expect(batchIds(await batches({ afterId: 2 }))).toEqual(['9007199254740993', '4', '3']);
      expect(batchIds(await batches({ afterId: 1, beforeId: 4, ascending: true }))).toEqual(['2', '3']);
      expect(batchIds(await batches({ beforeId: -1, afterId: -1 }))).toEqual(all);
      expect(batchIds(await batches({ beforeId: 4, afterId: -1, limit: 1 }))).toEqual(['3']);
      expect(batchIds(await batches({ beforeId: 1 }))).toEqual([]);
      // Ids as the service sends them: decimal strings, exact past 2^53.
      expect(batchIds(await batches({ beforeId: '4' }))).toEqual(['3', '2', '1']);
      expect(batchIds(await batches({ afterId: '9007199254740992' }))).toEqual(['9007199254740993']);
      expect(batchIds(await batches({ beforeId: '9223372036854775807', limit: 1 }))).toEqual([
        '9007199254740993',
      ]);
      // `total` counts the mirror's batches, whatever the filter.
      expect((await batches({ beforeId: 3, limit: 1 })).json()).toMatchObject({ total: 5, page: 1 });
    });

    it('pages from 1 when a limit is given', async () => {
      expect(batchIds(await batches({ limit: 2, page: 1 }))).toEqual(['9007199254740993', '4']);
      const second = await batches({ limit: 2, page: 2 });
      expect(batchIds(second)).toEqual(['3', '2']);
      expect(second.json()).toMatchObject({ total: 5, page: 2 });
      expect(batchIds(await batches({ limit: 2, page: 3 }))).toEqual(['1']);
      expect(batchIds(await batches({ limit: 2, page: 4 }))).toEqual([]);
      expect((await batches({ limit: 2, page: 0 })).json().page).toBe(1);
    });

    it('survives a limit and a page whose product is beyond 64 bits', async () => {
      const response = await batches({ limit: 2 ** 52, page: 2 ** 20 });
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toEqual({ cdcBatches: [], total: 5, page: 2 ** 20 });
    });

    it('keeps each mirror to its own batches, and lists those of a dropped mirror', async () => {
      expect(batchIds(await facade.post('/api/v1/mirrors/cdc/batches', { flowJobName: other }))).toEqual([
        '1',
      ]);
      const response = await facade.post('/api/v1/mirrors/cdc/batches', { flowJobName: dropped });
      expect(response.statusCode).toBe(200);
      expect(batchIds(response)).toEqual(['7']);
    });

    it('answers 404 code 5 for an unknown mirror', async () => {
      for (const flowJobName of ['no-such-mirror', `x'; DROP TABLE y; --`, '"quoted"']) {
        expectError(
          await facade.post('/api/v1/mirrors/cdc/batches', { flowJobName }),
          404,
          5,
          `mirror ${flowJobName} not found`,
        );
      }
    });

    const bad: { name: string; body: unknown; message: string }[] = [
      { name: 'an empty body', body: {}, message: 'flowJobName: ' },
      { name: 'an empty name', body: { flowJobName: '' }, message: 'flowJobName: ' },
      {
        name: 'a name in both spellings',
        body: { flow_job_name: mirror, flowJobName: mirror },
        message: 'flowJobName: the same field is given twice',
      },
      {
        name: 'a limit that is not a number',
        body: { flowJobName: mirror, limit: 'ten' },
        message: 'limit: ',
      },
      { name: 'a fractional limit', body: { flowJobName: mirror, limit: 1.5 }, message: 'limit: ' },
      {
        name: 'a string ascending',
        body: { flowJobName: mirror, ascending: 'true' },
        message: 'ascending: ',
      },
      { name: 'a word as beforeId', body: { flowJobName: mirror, beforeId: 'four' }, message: 'beforeId: ' },
      {
        name: 'an id past 2^53 as a number',
        body: { flowJobName: mirror, afterId: 2 ** 53 + 2 },
        message: 'afterId: send ids beyond 2^53 as decimal strings',
      },
      {
        name: 'an id past 64 bits',
        body: { flowJobName: mirror, beforeId: '9223372036854775808' },
        message: 'beforeId: outside the 64-bit range',
      },
      { name: 'a fractional afterId', body: { flowJobName: mirror, afterId: 2.5 }, message: 'afterId: ' },
      { name: 'a negative page', body: { flowJobName: mirror, page: -1 }, message: 'page: ' },
      { name: 'a null body', body: null, message: 'flowJobName: ' },
    ];

    it.each(bad)('refuses $name with 400 code 3 and changes nothing', async ({ body, message }) => {
      const before = await stateOf();
      const response = await facade.request({
        method: 'POST',
        url: '/api/v1/mirrors/cdc/batches',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      expectError(response, 400, 3, message);
      expect(await stateOf()).toBe(before);
    });
  });

  describe('mirrors/logs', () => {
    it('returns only the total when num_per_page is 0 or unset', async () => {
      for (const body of [
        { flow_job_name: mirror },
        { flow_job_name: mirror, num_per_page: 0 },
        { flowJobName: mirror, numPerPage: 0 },
      ]) {
        const response = await logs(body);
        expect(response.statusCode).toBe(200);
        expect(response.json()).toEqual({ errors: [], total: 4, page: 1 });
      }
      expect((await logs({})).json()).toEqual({ errors: [], total: 6, page: 1 });
    });

    it('lists a mirror’s logs, newest first, with lower-case types', async () => {
      const response = await logs({ flow_job_name: mirror, num_per_page: 10 });
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(body).toEqual({
        errors: [
          {
            flowName: mirror,
            errorMessage: 'a4 resumed',
            errorType: 'info',
            errorTimestamp: expect.any(Number),
            id: expect.any(Number),
            // Additions: each written once (docs/api.md, mirrors/logs).
            repeatCount: 1,
            lastErrorTimestamp: expect.any(Number),
          },
          {
            flowName: mirror,
            errorMessage: 'a3 failed',
            errorType: 'error',
            errorTimestamp: expect.any(Number),
            id: expect.any(Number),
            // Additions: each written once (docs/api.md, mirrors/logs).
            repeatCount: 1,
            lastErrorTimestamp: expect.any(Number),
          },
          {
            flowName: mirror,
            errorMessage: 'a2 slow',
            errorType: 'warn',
            errorTimestamp: expect.any(Number),
            id: expect.any(Number),
            // Additions: each written once (docs/api.md, mirrors/logs).
            repeatCount: 1,
            lastErrorTimestamp: expect.any(Number),
          },
          {
            flowName: mirror,
            errorMessage: 'a1 started',
            errorType: 'info',
            errorTimestamp: expect.any(Number),
            id: expect.any(Number),
            // Additions: each written once (docs/api.md, mirrors/logs).
            repeatCount: 1,
            lastErrorTimestamp: expect.any(Number),
          },
        ],
        total: 4,
        page: 1,
      });
      for (const entry of body.errors as { errorTimestamp: number; id: number }[]) {
        expect(entry.errorTimestamp).toBeGreaterThanOrEqual(seededFrom);
        expect(entry.errorTimestamp).toBeLessThanOrEqual(seededUntil);
        expect(Number.isInteger(entry.id)).toBe(true);
      }
      // The camelCase spelling gives the same answer.
      expect((await logs({ flowJobName: mirror, numPerPage: 10 })).json()).toEqual(body);
    });

    it('lists the logs of every mirror for an empty name', async () => {
      for (const body of [
        { flow_job_name: '', num_per_page: 10 },
        { flowJobName: '', numPerPage: 10 },
        { num_per_page: 10 },
      ]) {
        const response = await logs(body);
        expect(response.statusCode).toBe(200);
        expect(messages(response)).toEqual([
          'a4 resumed',
          'b2 started',
          'a3 failed',
          'b1 failed',
          'a2 slow',
          'a1 started',
        ]);
        expect(response.json().total).toBe(6);
      }
      const otherLogs = await logs({ flow_job_name: other, num_per_page: 10 });
      expect(otherLogs.json().errors.map((entry: { flowName: string }) => entry.flowName)).toEqual([
        other,
        other,
      ]);
    });

    it('filters by level in any case', async () => {
      const cases: [string, string[]][] = [
        ['ALL', ['a4 resumed', 'a3 failed', 'a2 slow', 'a1 started']],
        ['all', ['a4 resumed', 'a3 failed', 'a2 slow', 'a1 started']],
        ['INFO', ['a4 resumed', 'a1 started']],
        ['info', ['a4 resumed', 'a1 started']],
        ['Warn', ['a2 slow']],
        ['ERROR', ['a3 failed']],
        ['error', ['a3 failed']],
      ];
      for (const [level, expected] of cases) {
        const response = await logs({ flow_job_name: mirror, level, num_per_page: 10 });
        expect(response.statusCode).toBe(200);
        expect(messages(response), level).toEqual(expected);
        expect(response.json().total, level).toBe(expected.length);
      }
      expect((await logs({ level: 'error' })).json()).toEqual({ errors: [], total: 2, page: 1 });
    });

    it('pages from 1', async () => {
      const page = (number: number | undefined) =>
        logs({ flow_job_name: mirror, num_per_page: 3, ...(number === undefined ? {} : { page: number }) });
      expect(messages(await page(undefined))).toEqual(['a4 resumed', 'a3 failed', 'a2 slow']);
      expect(messages(await page(1))).toEqual(['a4 resumed', 'a3 failed', 'a2 slow']);
      const second = await page(2);
      expect(messages(second)).toEqual(['a1 started']);
      expect(second.json()).toMatchObject({ total: 4, page: 2 });
      expect(messages(await page(3))).toEqual([]);
      const zero = await page(0);
      expect(messages(zero)).toEqual(['a4 resumed', 'a3 failed', 'a2 slow']);
      expect(zero.json().page).toBe(1);
    });

    it('answers an empty page far beyond the end', async () => {
      const response = await logs({
        flow_job_name: mirror,
        num_per_page: 1_000,
        page: Number.MAX_SAFE_INTEGER,
      });
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toEqual({ errors: [], total: 4, page: Number.MAX_SAFE_INTEGER });
    });

    it('filters by id in both spellings, ignoring -1', async () => {
      const all = (await logs({ flow_job_name: mirror, num_per_page: 10 })).json().errors as { id: number }[];
      const ids = all.map((entry) => entry.id); // newest first: a4, a3, a2, a1
      const [a4, a3, a2, a1] = ids as [number, number, number, number];
      expect(messages(await logs({ flow_job_name: mirror, num_per_page: 10, before_id: a3 }))).toEqual([
        'a2 slow',
        'a1 started',
      ]);
      expect(messages(await logs({ flowJobName: mirror, numPerPage: 10, beforeId: a3 }))).toEqual([
        'a2 slow',
        'a1 started',
      ]);
      expect(messages(await logs({ flow_job_name: mirror, num_per_page: 10, after_id: a2 }))).toEqual([
        'a4 resumed',
        'a3 failed',
      ]);
      expect(messages(await logs({ flowJobName: mirror, numPerPage: 10, afterId: a2 }))).toEqual([
        'a4 resumed',
        'a3 failed',
      ]);
      expect(
        messages(await logs({ flow_job_name: mirror, num_per_page: 10, after_id: a1, before_id: a4 })),
      ).toEqual(['a3 failed', 'a2 slow']);
      expect(
        messages(await logs({ flow_job_name: mirror, num_per_page: 10, before_id: -1, after_id: -1 })),
      ).toHaveLength(4);
      const filtered = await logs({ flow_job_name: mirror, num_per_page: 0, before_id: a3 });
      expect(filtered.json()).toEqual({ errors: [], total: 2, page: 1 });
    });

    it('answers an empty list for a mirror without logs', async () => {
      for (const name of ['no-such-mirror', `x'; DROP TABLE y; --`, '"quoted"']) {
        const response = await logs({ flow_job_name: name, num_per_page: 10 });
        expect(response.statusCode).toBe(200);
        expect(response.json()).toEqual({ errors: [], total: 0, page: 1 });
      }
    });

    const bad: { name: string; body: unknown; message: string }[] = [
      { name: 'an unknown level', body: { level: 'DEBUG' }, message: 'level: ' },
      { name: 'a numeric level', body: { level: 2 }, message: 'level: ' },
      { name: 'too many per page', body: { num_per_page: 1_001 }, message: 'num_per_page: ' },
      { name: 'a negative page size', body: { numPerPage: -1 }, message: 'numPerPage: ' },
      { name: 'a negative page', body: { page: -1 }, message: 'page: ' },
      { name: 'a string page', body: { page: 'one' }, message: 'page: ' },
      { name: 'a word as before_id', body: { before_id: 'five' }, message: 'before_id: ' },
      { name: 'a fractional afterId', body: { afterId: 1.5 }, message: 'afterId: ' },
      { name: 'a numeric name', body: { flow_job_name: 5 }, message: 'flow_job_name: ' },
      {
        name: 'a page size in both spellings',
        body: { num_per_page: 2, numPerPage: 2 },
        message: 'numPerPage: the same field is given twice',
      },
      { name: 'an array body', body: [], message: 'expected object' },
    ];

    it.each(bad)('refuses $name with 400 code 3 and changes nothing', async ({ body, message }) => {
      const before = await stateOf();
      expectError(await logs(body as Record<string, unknown>), 400, 3, message);
      expect(await stateOf()).toBe(before);
    });
  });
});

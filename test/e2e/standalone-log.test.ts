// The standalone service's own log, read as a log pipeline would: every line is
// JSON without a repeated key, and every lifecycle action of a mirror (created,
// paused, edited, resumed, failed, recovered, dropped) is one info line naming it.
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
import { DuplicateKeyError, parseStrictJson } from '../support/strict-json.ts';

const password = 'standalone-log-password';

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly mirror?: string;
  readonly lifecycle?: string;
}

describe('standalone service log', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-log-')), 'data');
  const suffix = randomSuffix();
  const healthy = `logged-${suffix}`;
  const broken = `broken-${suffix}`;

  const state = (mirror: string) => mirrorState(service, mirror);
  const reaches = (mirror: string, flowState: string) =>
    waitFor(async () => (await state(mirror)) === flowState, 60_000, `${mirror} ${flowState}`);
  const stateChange = (body: Record<string, unknown>) =>
    service.call('POST', '/api/v1/mirrors/state_change', body);
  const createMirror = (name: string, table: string) =>
    createTableMirror(service, {
      name,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table,
    });

  beforeAll(async () => {
    [source, destination] = await Promise.all([createTestDatabase('log_src'), createTestDatabase('log_dst')]);
    await source.client.query(`CREATE TABLE orders (id int PRIMARY KEY, item text)`);
    await source.client.query(`INSERT INTO orders VALUES (1, 'tea'), (2, 'milk')`);
    // The destination already holds a notes table with rows the mirror did not
    // write: its initial load refuses to empty it, and the mirror fails until
    // someone empties it (what create cannot see: it checks the source only).
    await source.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await destination.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await destination.client.query(`INSERT INTO notes VALUES (1, 'not the mirror''s')`);
    service = await startStandalone(dataDir, password, { logLevel: 'info' });
    await createRelationalPeers(service, [
      [`src-${suffix}`, source],
      [`dst-${suffix}`, destination],
    ]);
  });

  afterAll(async () => {
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('logs each lifecycle action of a mirror once, and writes every line as JSON without a repeated key', async () => {
    expect((await createMirror(healthy, 'public.orders')).status).toBe(200);
    await reaches(healthy, 'STATUS_RUNNING');
    expect((await stateChange({ flowJobName: healthy, requestedFlowState: 'STATUS_PAUSED' })).status).toBe(
      200,
    );
    await reaches(healthy, 'STATUS_PAUSED');
    const edited = await stateChange({
      flowJobName: healthy,
      requestedFlowState: 'STATUS_RUNNING',
      flowConfigUpdate: { cdcFlowConfigUpdate: { batch_size: 500 } },
    });
    expect(edited.status).toBe(200);
    await reaches(healthy, 'STATUS_RUNNING');

    expect((await createMirror(broken, 'public.notes')).status).toBe(200);
    await reaches(broken, 'STATUS_FAILED');
    await destination.client.query(`DELETE FROM notes`);
    expect((await stateChange({ flowJobName: broken, requestedFlowState: 'STATUS_RUNNING' })).status).toBe(
      200,
    );
    await reaches(broken, 'STATUS_RUNNING');

    for (const mirror of [healthy, broken]) {
      expect(
        (await stateChange({ flowJobName: mirror, requestedFlowState: 'STATUS_TERMINATING' })).status,
      ).toBe(200);
      await reaches(mirror, 'STATUS_TERMINATED');
    }
    expect(await service.stop()).toBe(0);

    // The checker itself refuses what it is here to find.
    expect(() => parseStrictJson('{"mirror":"a","mirror":"a"}')).toThrow(DuplicateKeyError);
    expect(service.logLines.length).toBeGreaterThan(20);
    const lines = service.logLines.map((line) => parseStrictJson(line) as LogLine);

    const lifecycle = (mirror: string) =>
      lines.filter((line) => line.mirror === mirror && line.lifecycle !== undefined);
    for (const line of lifecycle(healthy).concat(lifecycle(broken))) {
      expect(line.level).toBe(30);
      expect(line.msg).toMatch(new RegExp(`^mirror ${line.lifecycle}`));
    }
    expect(lifecycle(healthy).map((line) => line.lifecycle)).toEqual([
      'created',
      'paused',
      'edited',
      'resumed',
      'dropped',
    ]);
    expect(lifecycle(broken).map((line) => line.lifecycle)).toEqual([
      'created',
      'failed',
      'recovered',
      'dropped',
    ]);
  });
});

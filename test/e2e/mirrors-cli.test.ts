// `tributary mirrors …` run as a user runs it, against a real standalone process
// with a running PostgreSQL → PostgreSQL mirror: list, status, logs, pause,
// resume and drop, and the exit codes of a wrong password and of bad usage.
import { spawn } from 'node:child_process';
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
import { repoRoot } from '../support/testenv.ts';

const password = 'mirrors-cli-password';

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

describe('tributary mirrors', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const scratch = mkdtempSync(join(tmpdir(), 'tributary-cli-'));
  const passwordFile = join(scratch, 'api-password');
  const suffix = randomSuffix();
  const mirror = `cli_${suffix}`;

  /** The CLI as a child process (never blocking the test's event loop), killed after 60 s. */
  const tributary = (args: readonly string[], env: Record<string, string> = {}): Promise<Run> =>
    new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [join(repoRoot, 'bin', 'tributary.js'), 'mirrors', ...args], {
        env: {
          ...process.env,
          TRIBUTARY_URL: service.baseUrl,
          TRIBUTARY_API_PASSWORD_FILE: passwordFile,
          ...env,
        },
        timeout: 60_000,
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk) => {
        stdout += chunk;
      });
      child.stderr.on('data', (chunk) => {
        stderr += chunk;
      });
      child.on('error', reject);
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });

  beforeAll(async () => {
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
    [source, destination] = await Promise.all([createTestDatabase('cli_src'), createTestDatabase('cli_dst')]);
    await source.client.query(`CREATE TABLE orders (id int PRIMARY KEY, item text)`);
    await source.client.query(`INSERT INTO orders SELECT g, 'item ' || g FROM generate_series(1, 40) g`);
    service = await startStandalone(join(scratch, 'data'), password);
    await createRelationalPeers(service, [
      [`src_${suffix}`, source],
      [`dst_${suffix}`, destination],
    ]);
    const created = await createTableMirror(service, {
      name: mirror,
      sourcePeer: `src_${suffix}`,
      destinationPeer: `dst_${suffix}`,
      table: 'public.orders',
    });
    expect(created.status).toBe(200);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 60_000, 'running');
  });

  afterAll(async () => {
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('lists the mirror with its state and peers, and shows its status and logs', async () => {
    const list = await tributary(['list']);
    expect(list.status, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^NAME +STATE +SOURCE +DESTINATION +ERROR$/m);
    expect(list.stdout).toMatch(new RegExp(`^${mirror} +running +src_${suffix} +dst_${suffix}$`, 'm'));

    const asJson = await tributary(['list', '--json']);
    expect(JSON.parse(asJson.stdout).mirrors).toContainEqual(
      expect.objectContaining({ name: mirror, state: 'STATUS_RUNNING', sourceName: `src_${suffix}` }),
    );

    const status = await tributary(['status', mirror]);
    expect(status.status, status.stderr).toBe(0);
    expect(status.stdout).toMatch(new RegExp(`mirror ${mirror}: running, lag \\d+(\\.\\d+)? s`));
    expect(status.stdout).toContain(`src_${suffix} → dst_${suffix}`);
    expect(status.stdout).toMatch(
      /public\.orders → public\.orders: streaming, initial load done \(40 rows\), applied \d+ inserts, 0 updates, 0 deletes/,
    );

    // A table the mirror does not map: the service's 400, exit 1.
    const unmapped = await tributary(['resync', mirror, 'public.nowhere']);
    expect(unmapped.status).toBe(1);
    expect(unmapped.stderr).toContain('400');
    expect(unmapped.stderr).toContain('is not a source table');
    const resync = await tributary(['resync', mirror, 'public.orders']);
    expect(resync.status, resync.stderr).toBe(0);
    expect(resync.stdout.trim()).toBe(`resync: requested for table public.orders of mirror ${mirror}`);

    const logs = await tributary(['logs', mirror, '--level', 'info', '--per-page', '50']);
    expect(logs.status, logs.stderr).toBe(0);
    expect(logs.stdout).toMatch(/^\d{4}-\d\d-\d\dT\S+ info +.*initial load finished/m);
  });

  it('pauses, resumes and drops the mirror', async () => {
    const paused = await tributary(['pause', mirror]);
    expect(paused.status, paused.stderr).toBe(0);
    expect(paused.stdout.trim()).toBe(`pause: requested for mirror ${mirror}`);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_PAUSED', 60_000, 'paused');

    expect((await tributary(['resume', mirror])).status).toBe(0);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 60_000, 'resumed');

    expect((await tributary(['drop', mirror])).status).toBe(0);
    await waitFor(
      async () => (await mirrorState(service, mirror)) === 'STATUS_TERMINATED',
      60_000,
      'dropped',
    );
    const list = await tributary(['list']);
    expect(list.stdout).not.toContain(mirror);
  });

  it('exits 1 with the API’s message when the service refuses, 2 on bad usage', async () => {
    const wrong = await tributary(['list'], {
      TRIBUTARY_API_PASSWORD_FILE: '',
      TRIBUTARY_API_PASSWORD: 'not-the-password',
    });
    expect(wrong.status).toBe(1);
    expect(wrong.stderr).toContain('401');
    expect(wrong.stderr).not.toContain('not-the-password');

    const unknown = await tributary(['status', 'no_such_mirror']);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain('mirror no_such_mirror not found');

    for (const args of [
      ['explode'],
      ['pause'],
      ['list', 'extra'],
      ['logs', mirror, '--page', '0'],
      ['list', '--bogus'],
      ['resync', mirror],
      ['resync', mirror, 'public.orders', 'extra'],
    ]) {
      const usage = await tributary(args);
      expect(usage.status, args.join(' ')).toBe(2);
    }
  });
});

// The README's run command (`make start`) followed by its example, word for
// word but for the port and the data directory, against the real services; then
// every other JSON and shell example of README.md and docs/*.md, run against the
// same service or as it stands, unless its marker says why it cannot be
// (test/support/doc-examples.ts describes the markers).
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropTestDatabase, waitFor } from '../support/databases.ts';
import { type DocExample, runnableLanguageExamples, shellLanguages } from '../support/doc-examples.ts';
import { freePort } from '../support/standalone-process.ts';
import { postgres, repoRoot } from '../support/testenv.ts';

const run = promisify(execFile);

function readmeExample(): string {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  const start = readme.indexOf('<!-- readme-example:start -->');
  const end = readme.indexOf('<!-- readme-example:end -->');
  expect(start).toBeGreaterThan(0);
  const block = readme.slice(start, end);
  return block.slice(block.indexOf('```sh') + '```sh'.length, block.lastIndexOf('```'));
}

/** The example's databases are fixed names: clear them (and their slots) first and last. */
async function dropExampleDatabases(): Promise<void> {
  for (const name of ['shop', 'warehouse']) await dropTestDatabase(postgres, name);
}

const where = (example: DocExample) => `${example.file}:${example.line}`;
const examples = runnableLanguageExamples();
const apiExamples = examples.filter((example) => example.marker?.startsWith('api '));
const shellExamples = examples.filter(
  (example) => example.marker === undefined && shellLanguages.includes(example.language),
);

describe('README and docs', () => {
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-readme-')), 'data');
  let port = 0;
  let service: ReturnType<typeof spawn> | undefined;

  beforeAll(async () => {
    await dropExampleDatabases();
    port = await freePort();
    // detached: its own process group, so make and the node it starts stop together.
    service = spawn('make', ['--no-print-directory', 'start', `DATA_DIR=${dataDir}`], {
      cwd: repoRoot,
      detached: true,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, TRIBUTARY_PORT: String(port), TRIBUTARY_LOG_LEVEL: 'warn' },
    });
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok === true,
      120_000,
      'make start to serve',
    );
  });

  afterAll(async () => {
    if (service?.pid) {
      const exited = new Promise((resolve) => service?.once('exit', resolve));
      process.kill(-service.pid, 'SIGTERM');
      await exited;
    }
    await dropExampleDatabases();
  });

  it('runs its example against `make start`', async () => {
    const script = readmeExample()
      .replaceAll('127.0.0.1:8112', `127.0.0.1:${port}`)
      .replaceAll('.data/', `${dataDir}/`);
    const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: repoRoot,
      timeout: 120_000,
    });
    expect(stdout).toContain('"status":"CREATED"');
    expect(stdout).toMatch(/"workflowId":"shop_orders-/);
    expect(stdout).toMatch(/3 \| bread/);
    expect(stdout).toContain('"currentFlowState":"STATUS_RUNNING"');
    expect(stdout).toContain('"cdcBatches":[{');
    expect(stdout).toContain('initial load finished');
    expect(stdout.match(/\{"ok":true,"errorMessage":""\}/g)).toHaveLength(3);
  });

  it('runs every JSON and shell example of the docs, or says why it cannot', () => {
    expect(examples.length).toBeGreaterThan(5);
    for (const example of examples) {
      const { marker } = example;
      if (marker === undefined) {
        // JSON needs to say where it goes; shell runs as it stands (below).
        expect(shellLanguages, `${where(example)}: a JSON example needs a doc-example marker`).toContain(
          example.language,
        );
      } else if (marker === 'readme-example') {
        expect(example.file).toBe('README.md');
      } else if (marker.startsWith('skip:')) {
        expect(
          marker.slice('skip:'.length).trim().length,
          `${where(example)}: say why it is skipped`,
        ).toBeGreaterThan(20);
      } else if (marker.startsWith('checked-by ')) {
        const checker = marker.slice('checked-by '.length);
        expect(readFileSync(join(repoRoot, checker), 'utf8'), `${where(example)}: ${checker}`).toContain(
          `'${example.file}'`,
        );
      } else {
        expect(marker, where(example)).toMatch(/^api (GET|POST) \/api\/v1\/\S+$/);
        expect(example.language, where(example)).toBe('json');
      }
    }
    expect(apiExamples.length).toBeGreaterThanOrEqual(2);
    expect(shellExamples.length).toBeGreaterThanOrEqual(1);
  });

  it.each(apiExamples.map((example) => [where(example), example] as const))(
    'sends %s to `make start` and is accepted',
    async (_where, example) => {
      const [, method = 'POST', path = ''] = (example.marker ?? '').split(' ');
      const password = readFileSync(join(dataDir, 'api-password'), 'utf8').trim();
      const response = await fetch(`http://127.0.0.1:${port}${path}`, {
        method,
        headers: {
          authorization: `Basic ${Buffer.from(`:${password}`).toString('base64')}`,
          'content-type': 'application/json',
        },
        ...(method === 'POST' ? { body: example.code } : {}),
      });
      const body = (await response.json()) as Record<string, unknown>;
      expect({ status: response.status, body }, where(example)).toMatchObject({ status: 200 });
      expect(body).not.toHaveProperty('code');
      if (path === '/api/v1/peers/create') expect(body).toMatchObject({ status: 'CREATED' });
    },
  );

  it.each(shellExamples.map((example) => [where(example), example] as const))(
    'runs the shell example %s',
    async (_where, example) => {
      // The Node that runs the tests is new enough; the machine's may not be.
      const path = `${dirname(process.execPath)}:${process.env.PATH ?? ''}`;
      const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', example.code], {
        cwd: repoRoot,
        timeout: 60_000,
        env: { ...process.env, PATH: path },
      });
      expect(stdout.trim().length).toBeGreaterThan(0);
    },
  );
});

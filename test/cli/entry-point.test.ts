// The real entry point, spawned as a user runs it: --help, --version, unknown
// roles, and what an older Node prints instead of a stack trace.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { restartArguments } from '../../bin/node-flags.js';
import { nodeIsRecentEnough, nodeTooOldExitCode } from '../../bin/node-version.js';
import { exitGraceMs, roles } from '../../bin/tributary.ts';
import { type ChildOutcome, runBounded } from '../support/bounded-child.ts';
import { waitFor } from '../support/databases.ts';
import { freePort } from '../support/engine-process.ts';
import { repoRoot } from '../support/testenv.ts';

const packageVersion = (
  JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }
).version;

/**
 * The entry point, run as a user runs it. A child still running after 45 s
 * (it takes under a second here, a few seconds on a loaded machine) is
 * described, recorded and run once more (test/support/bounded-child.ts): a
 * rare stall of Node's own exit did that in CI (docs/testing.md) and must not
 * fail a run, but it leaves its record. A second stall fails the test with the
 * description.
 */
async function tributary(
  entry: 'tributary.js' | 'tributary.ts',
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<ChildOutcome> {
  const label = `bin/${[entry, ...args].join(' ')}`;
  const run = () =>
    runBounded(process.execPath, [join(repoRoot, 'bin', entry), ...args], {
      env: { ...process.env, ...env },
      boundMs: 45_000,
      label,
    });
  const first = await run();
  if (first.overstayed === undefined) return first;
  const second = await run();
  if (second.overstayed !== undefined) throw new Error(`${first.overstayed}\n\n${second.overstayed}`);
  return second;
}

/** A `node` on PATH older than the one required (Debian's Node 20 here), if the machine has one. */
function findOldNode(): string | undefined {
  if (process.env.TRIBUTARY_TEST_OLD_NODE) return process.env.TRIBUTARY_TEST_OLD_NODE;
  for (const directory of (process.env.PATH ?? '').split(delimiter).concat(['/usr/bin', '/usr/local/bin'])) {
    const candidate = join(directory, 'node');
    const version = spawnSync(candidate, ['-p', 'process.versions.node'], { encoding: 'utf8' });
    if (version.status === 0 && !nodeIsRecentEnough(version.stdout.trim())) return candidate;
  }
  return undefined;
}

// Two bounded runs of a child and their descriptions fit (see tributary above).
describe('tributary entry point', { timeout: 180_000 }, () => {
  for (const entry of ['tributary.js', 'tributary.ts'] as const) {
    it(`${entry} --help exits 0 and describes every role in one line`, async () => {
      const { status, stdout } = await tributary(entry, ['--help']);
      expect(status).toBe(0);
      for (const role of Object.keys(roles)) expect(stdout).toMatch(new RegExp(`^  ${role} +\\S.+$`, 'm'));
      expect(stdout).toContain('--version');
    });
  }

  it('--version prints the package version and the checkout commit', async () => {
    const commit = execFileSync('git', ['-C', repoRoot, 'rev-parse', '--short=12', 'HEAD'], {
      encoding: 'utf8',
    }).trim();
    const { status, stdout } = await tributary('tributary.js', ['--version']);
    expect(status).toBe(0);
    expect(stdout.trim()).toBe(`tributary ${packageVersion} (commit ${commit})`);
  });

  it('--version prefers the commit recorded at image build', async () => {
    const { status, stdout } = await tributary('tributary.ts', ['--version'], {
      TRIBUTARY_COMMIT: 'abc123def456',
    });
    expect(status).toBe(0);
    expect(stdout.trim()).toBe(`tributary ${packageVersion} (commit abc123def456)`);
  });

  it('--version still answers without git', async () => {
    // No PATH: git cannot be found (node is started by its absolute path).
    const { status, stdout } = await tributary('tributary.ts', ['--version'], {
      PATH: '',
      TRIBUTARY_COMMIT: '',
    });
    expect(status).toBe(0);
    expect(stdout.trim()).toBe(`tributary ${packageVersion}`);
  });

  it('refuses a missing or unknown role with exit code 2 and the usage', async () => {
    const missing = await tributary('tributary.js', []);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('usage: tributary <standalone|api-server|operator|engine>');
    const unknown = await tributary('tributary.js', ['stand-alone']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain('unknown role "stand-alone"');
  });

  it('passes --help on to a role', async () => {
    const { status, stdout } = await tributary('tributary.js', ['standalone', '--help']);
    expect(status).toBe(0);
    expect(stdout).toContain('usage: tributary standalone');
  });

  it('--log-format pretty writes human lines from a real role, even to a pipe', async () => {
    const child = spawn(
      process.execPath,
      [
        join(repoRoot, 'bin', 'tributary.js'),
        'standalone',
        '--auth-disabled',
        '--data-dir',
        'memory://',
        '--port',
        '0',
        '--log-format',
        'pretty',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TRIBUTARY_LOG_LEVEL: 'info' } },
    );
    let stdout = '';
    child.stdout.on('data', (chunk) => {
      stdout += String(chunk);
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      await waitFor(async () => stdout.includes('tributary standalone ready'), 60_000, 'standalone ready');
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    const ready = stdout.split('\n').find((line) => line.includes('tributary standalone ready')) ?? '';
    expect(ready).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] .*INFO.*tributary standalone ready/);
    expect(stdout).toContain('WARN');
    expect(stdout).not.toMatch(/^\{"level"/m);
  });

  it('refuses an unknown log format with exit code 2', async () => {
    const flag = await tributary('tributary.js', ['standalone', '--log-format', 'xml']);
    expect(flag.status).toBe(2);
    expect(flag.stderr).toContain('--log-format (or TRIBUTARY_LOG_FORMAT) must be one of auto, json, pretty');
    const variable = await tributary('tributary.js', ['standalone'], { TRIBUTARY_LOG_FORMAT: 'yaml' });
    expect(variable.status).toBe(2);
  });

  it('refuses a bad stall bound or slot health interval by name with exit code 2, in standalone mode and the operator', async () => {
    for (const [variable, value, message] of [
      [
        'TRIBUTARY_SLOT_HEALTH_SECONDS',
        '0',
        'TRIBUTARY_SLOT_HEALTH_SECONDS must be a number of seconds, at least 1',
      ],
      ['TRIBUTARY_STALL_SECONDS', '-1', 'TRIBUTARY_STALL_SECONDS must be a positive number of seconds'],
    ] as const) {
      const standalone = await tributary(
        'tributary.js',
        ['standalone', '--data-dir', 'memory://', '--port', '0'],
        { TRIBUTARY_API_PASSWORD: 'a-long-enough-api-password', [variable]: value },
      );
      expect(standalone.status, variable).toBe(2);
      expect(standalone.stderr).toContain(message);
      const operator = await tributary('tributary.js', ['operator'], {
        TRIBUTARY_NAMESPACE: 'tributary',
        TRIBUTARY_CATALOG_URL: 'postgres://catalog.invalid/tributary',
        [variable]: value,
      });
      expect(operator.status, variable).toBe(2);
      expect(operator.stderr).toContain(message);
    }
  });

  it('refuses to start with an API password shorter than 16 characters, in both modes', async () => {
    const short = 'CHANGE-ME-please'.slice(0, 15);
    const message = 'the API password is shorter than 16 characters';
    const standalone = await tributary(
      'tributary.js',
      ['standalone', '--data-dir', 'memory://', '--port', '0'],
      {
        TRIBUTARY_API_PASSWORD: short,
      },
    );
    expect(standalone.status).toBe(2);
    expect(standalone.stderr).toContain(message);
    // Refused while reading its configuration, before it looks for the cluster or the catalog.
    const cluster = await tributary('tributary.js', ['api-server'], {
      TRIBUTARY_API_PASSWORD: short,
      TRIBUTARY_NAMESPACE: 'tributary',
      TRIBUTARY_CATALOG_URL: 'postgres://catalog.invalid/tributary',
    });
    expect(cluster.status).toBe(2);
    expect(cluster.stderr).toContain(message);
    for (const output of [standalone, cluster]) expect(output.stderr).not.toContain(short);
  });

  it('refuses to start with half a TLS pair or a certificate file it cannot read, in both modes', async () => {
    const half = await tributary(
      'tributary.js',
      ['standalone', '--data-dir', 'memory://', '--auth-disabled'],
      {
        TRIBUTARY_TLS_CERT_FILE: '/nonexistent/tls.crt',
      },
    );
    expect(half.status).toBe(2);
    expect(half.stderr).toContain('TLS needs both a certificate file and a key file');
    const tls = ['--tls-cert-file', '/nonexistent/tls.crt', '--tls-key-file', '/nonexistent/tls.key'];
    const standalone = await tributary('tributary.js', [
      'standalone',
      '--data-dir',
      'memory://',
      '--auth-disabled',
      ...tls,
    ]);
    const cluster = await tributary('tributary.js', ['api-server', ...tls], {
      TRIBUTARY_API_PASSWORD: 'a-long-enough-api-password',
      TRIBUTARY_NAMESPACE: 'tributary',
      TRIBUTARY_CATALOG_URL: 'postgres://catalog.invalid/tributary',
    });
    for (const output of [standalone, cluster]) {
      expect(output.status).toBe(2);
      expect(output.stderr).toContain(
        'cannot read the TLS certificate or key (/nonexistent/tls.crt, /nonexistent/tls.key): ENOENT',
      );
    }
  });

  it('refuses a credentials file others may read, in both modes, and one with authentication disabled', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'tributary-credentials-'));
    const file = join(directory, 'credentials');
    try {
      const hashed = await tributary('tributary.js', ['credentials', 'hash', 'alice', 'read']);
      expect(hashed.status).toBe(0);
      writeFileSync(file, hashed.stdout);
      const password = { TRIBUTARY_API_PASSWORD: 'a-long-enough-api-password' };
      const standalone = (...args: string[]) =>
        tributary(
          'tributary.js',
          ['standalone', '--data-dir', 'memory://', '--port', '0', ...args],
          password,
        );
      const cluster = () =>
        tributary('tributary.js', ['api-server', '--credentials-file', file], {
          ...password,
          TRIBUTARY_NAMESPACE: 'tributary',
          TRIBUTARY_CATALOG_URL: 'postgres://catalog.invalid/tributary',
        });
      chmodSync(file, 0o644);
      for (const output of [await standalone('--credentials-file', file), await cluster()]) {
        expect(output.status).toBe(2);
        expect(output.stderr).toContain(`the credentials file ${file} has mode 0644`);
      }
      // A Secret volume's group read is for the api-server only.
      chmodSync(file, 0o640);
      const groupReadable = await standalone('--credentials-file', file);
      expect(groupReadable.status).toBe(2);
      expect(groupReadable.stderr).toContain(`make it 0600 (chmod 600 ${file})`);
      chmodSync(file, 0o600);
      const open = await tributary('tributary.js', [
        'standalone',
        '--data-dir',
        'memory://',
        '--auth-disabled',
        '--credentials-file',
        file,
      ]);
      expect(open.status).toBe(2);
      expect(open.stderr).toContain('a credentials file needs authentication');
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it('refuses an API password file others may read, in both modes, naming the fix and not the password', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'tributary-password-file-'));
    const file = join(directory, 'api-password');
    const secret = 'a-long-enough-api-password-in-a-file';
    try {
      writeFileSync(file, secret, { mode: 0o644 });
      chmodSync(file, 0o644);
      const standalone = await tributary('tributary.js', [
        'standalone',
        '--data-dir',
        'memory://',
        '--port',
        '0',
        '--password-file',
        file,
      ]);
      const cluster = await tributary('tributary.js', ['api-server', '--password-file', file], {
        TRIBUTARY_NAMESPACE: 'tributary',
        TRIBUTARY_CATALOG_URL: 'postgres://catalog.invalid/tributary',
      });
      for (const output of [standalone, cluster]) {
        expect(output.status).toBe(2);
        expect(output.stderr).toContain(`the API password file ${file} has mode 0644`);
        expect(output.stderr).not.toContain(secret);
      }
      expect(standalone.stderr).toContain(`make it 0600 (chmod 600 ${file})`);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it('starts standalone mode without loading drivers of peers it has not met, nor the Kubernetes client', async () => {
    // A fresh process: what importing the standalone role loads, by import or
    // require, recorded by a resolve hook.
    const names = [
      'snowflake-sdk',
      'ssh2',
      'kafkajs',
      '@platformatic/kafka',
      '@clickhouse/client',
      '@kubernetes/client-node',
      'pg',
    ];
    const script = `import { registerHooks } from 'node:module';
      const resolved = [];
      registerHooks({ resolve: (specifier, context, next) => { const result = next(specifier, context); resolved.push(result.url); return result; } });
      await import(${JSON.stringify(join(repoRoot, 'api-server', 'src', 'standalone.ts'))});
      console.log(JSON.stringify(${JSON.stringify(names)}.map((name) => resolved.some((url) => url.includes('/node_modules/' + name + '/')))));`;
    const result = await runBounded(process.execPath, ['--input-type=module', '-e', script], {
      env: process.env,
      boundMs: 45_000,
      label: 'import of the standalone role',
    });
    expect(result.overstayed).toBeUndefined();
    expect(result.stderr).toBe('');
    // pg is loaded (every deployment needs it): the check sees loaded packages at all.
    expect(JSON.parse(result.stdout)).toEqual([false, false, false, false, false, false, true]);
  });

  it('ends a role by itself once idle, and by process.exit after the grace when a handle stays open', async () => {
    const end = (leaveOpen: boolean) =>
      runBounded(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `const { endProcess } = await import(${JSON.stringify(join(repoRoot, 'bin', 'tributary.ts'))});
          ${leaveOpen ? 'setInterval(() => {}, 1000);' : ''}
          const called = performance.now();
          process.on('beforeExit', () => console.log('ended by itself'));
          process.on('exit', () => console.log('exit after ' + Math.round(performance.now() - called) + ' ms'));
          endProcess(7);`,
        ],
        { env: process.env, boundMs: 45_000, label: 'endProcess' },
      );
    const idle = await end(false);
    expect(idle.status).toBe(7);
    const open = await end(true);
    expect(open.status).toBe(7);
    // 'beforeExit' comes when the event loop runs empty, never on process.exit: the idle
    // process ended by itself, the other by the fallback, which never fires before the grace.
    expect(idle.stdout).toContain('ended by itself');
    expect(open.stdout).not.toContain('ended by itself');
    const elapsed = (outcome: ChildOutcome) => Number(/exit after (\d+) ms/.exec(outcome.stdout)?.[1]);
    expect(elapsed(open)).toBeGreaterThanOrEqual(exitGraceMs);
  });

  const oldNode = findOldNode();
  it.skipIf(oldNode === undefined)('says which Node it needs when run by an older one', () => {
    const result = spawnSync(oldNode ?? 'node', [join(repoRoot, 'bin', 'tributary.js'), '--help'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.status).toBe(nodeTooOldExitCode);
    expect(result.stderr).toMatch(/^tributary needs Node\.js >= 22\.19 .*; this is Node\.js \d+\.\d+\.\d+\./);
    expect(result.stderr).toContain('scripts/ensure-node.sh');
    expect(result.stderr).not.toContain('    at ');
    expect(result.stdout).toBe('');
  });

  it('compares versions by major and minor', () => {
    expect(nodeIsRecentEnough('22.19.0')).toBe(true);
    expect(nodeIsRecentEnough('24.0.0')).toBe(true);
    expect(nodeIsRecentEnough('22.18.9')).toBe(false);
    expect(nodeIsRecentEnough('20.20.2')).toBe(false);
    expect(nodeIsRecentEnough('3.0.0')).toBe(false);
  });
});

/**
 * Starts standalone mode with a fresh data directory, waits for its first
 * answer on /healthz, and returns the command line of the process it started
 * (/proc/<pid>/cmdline): a restart with other flags keeps the process id.
 */
async function standaloneCommandLine(entry: 'tributary.js' | 'tributary.ts', nodeOptions: string[] = []) {
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-flags-')), 'data');
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      ...nodeOptions,
      join(repoRoot, 'bin', entry),
      'standalone',
      '--data-dir',
      dataDir,
      '--port',
      String(port),
    ],
    {
      stdio: 'ignore',
      env: {
        ...process.env,
        TRIBUTARY_API_PASSWORD: 'a-long-enough-api-password',
        TRIBUTARY_LOG_LEVEL: 'warn',
      },
    },
  );
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  try {
    await Promise.race([
      waitFor(
        async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok === true,
        120_000,
        'standalone to answer /healthz',
      ),
      exited.then((code) => {
        throw new Error(`standalone exited with ${code} before answering`);
      }),
    ]);
    return readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
    rmSync(join(dataDir, '..'), { recursive: true, force: true });
  }
}

describe('V8 flags of a role', () => {
  it('restarts Node with the missing flags first, then what Node was given, then the script', () => {
    expect(
      restartArguments(
        ['--liftoff-only'],
        ['--inspect', '--import', 'x.js'],
        ['/n/node', '/b/tributary.js', 'standalone'],
      ),
    ).toEqual(['--liftoff-only', '--inspect', '--import', 'x.js', '/b/tributary.js', 'standalone']);
  });

  it('does not restart when a flag is given in either sense, in any spelling V8 reads', () => {
    for (const given of [
      '--liftoff-only',
      '--liftoff_only',
      '--no-liftoff-only',
      '--noliftoff-only',
      '--no-liftoff_only',
    ]) {
      expect(restartArguments(['--liftoff-only'], [given], ['/n/node', '/b/tributary.js'])).toBeUndefined();
    }
    expect(restartArguments(['--liftoff-only'], ['--liftoff'], ['/n/node', '/b/tributary.js'])).toEqual([
      '--liftoff-only',
      '--liftoff',
      '/b/tributary.js',
    ]);
  });

  const procfs = existsSync('/proc/self/cmdline');
  for (const entry of ['tributary.js', 'tributary.ts'] as const) {
    it.skipIf(!procfs)(
      `${entry} runs standalone mode with WebAssembly compiled by Liftoff only`,
      async () => {
        const commandLine = await standaloneCommandLine(entry);
        expect(commandLine.slice(1)).toEqual([
          '--liftoff-only',
          '--optimize-for-size',
          join(repoRoot, 'bin', entry),
          'standalone',
          '--data-dir',
          expect.any(String),
          '--port',
          expect.any(String),
        ]);
      },
    );
  }

  it.skipIf(!procfs)('leaves V8 defaults to whoever asks for them with --no-liftoff-only', async () => {
    const commandLine = await standaloneCommandLine('tributary.js', ['--no-liftoff-only']);
    expect(commandLine).toContain('--no-liftoff-only');
    expect(commandLine).not.toContain('--liftoff-only');
  });

  it.skipIf(!procfs)('leaves V8 its heap growth to whoever asks with --no-optimize-for-size', async () => {
    const commandLine = await standaloneCommandLine('tributary.js', ['--no-optimize-for-size']);
    expect(commandLine).toContain('--no-optimize-for-size');
    expect(commandLine).not.toContain('--optimize-for-size');
    expect(commandLine).toContain('--liftoff-only');
  });
});

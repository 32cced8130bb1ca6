// Measures how long standalone mode takes from the command to its first answer
// on /healthz, on a warm machine: one run creates the data directory (and warms
// the OS and Node compile caches) and is not counted; the next runs are.
//
//   node scripts/startup-time.ts [runs] [make|node]
//
// `make` measures `make start` (what the README tells a newcomer to type), `node`
// the program alone (`node bin/tributary.js standalone`). Prints each run and the
// median in milliseconds.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const runs = Number(process.argv[2] ?? 5);
const how = process.argv[3] === 'node' ? 'node' : 'make';
const root = join(import.meta.dirname, '..');
const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-startup-')), 'data');

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function once(): Promise<number> {
  const port = await freePort();
  const env = { ...process.env, TRIBUTARY_PORT: String(port), TRIBUTARY_LOG_LEVEL: 'warn' };
  const started = performance.now();
  const child =
    how === 'make'
      ? spawn('make', ['--no-print-directory', 'start', `DATA_DIR=${dataDir}`], {
          cwd: root,
          env,
          detached: true,
          stdio: 'ignore',
        })
      : spawn(
          process.execPath,
          [join(root, 'bin', 'tributary.js'), 'standalone', '--data-dir', dataDir, '--auth-disabled'],
          {
            cwd: root,
            env,
            detached: true,
            stdio: 'ignore',
          },
        );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    for (const deadline = started + 120_000; performance.now() < deadline; ) {
      const answered = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (response) => response.ok,
        () => false,
      );
      if (answered) return performance.now() - started;
      if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error('no answer on /healthz within 120 s');
  } finally {
    if (child.exitCode === null && child.pid) process.kill(-child.pid, 'SIGTERM');
    await exited;
  }
}

try {
  await once();
  const times: number[] = [];
  for (let run = 0; run < runs; run++) {
    const ms = await once();
    times.push(ms);
    console.log(`run ${run + 1}: ${ms.toFixed(0)} ms`);
  }
  times.sort((a, b) => a - b);
  console.log(
    `${how === 'make' ? 'make start' : 'node bin/tributary.js standalone'}: median ${times[Math.floor(times.length / 2)]?.toFixed(0)} ms, best ${times[0]?.toFixed(0)} ms over ${runs} warm runs`,
  );
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}

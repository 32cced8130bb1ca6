// The global teardown's sweep (test/support/leftover-processes.ts) against real
// processes: it finds a process by the run id in its environment, even after the
// process was reparented, leaves other runs' processes alone, and stops one that
// ignores SIGTERM.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/databases.ts';
import { findRunProcesses, runIdVariable, stopProcesses } from '../support/leftover-processes.ts';

const started: number[] = [];

function startMarked(runId: string, script: string): number {
  // Detached and unref'd: reparented to init, as a daemonized server or an orphan of a dead worker is.
  const child = spawn(process.execPath, ['-e', script], {
    stdio: 'ignore',
    detached: true,
    env: { ...process.env, [runIdVariable]: runId },
  });
  child.unref();
  if (child.pid === undefined) throw new Error('spawn failed');
  started.push(child.pid);
  return child.pid;
}

afterAll(() => {
  for (const pid of started) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
});

describe('leftover processes of a test run', () => {
  it('finds the processes of one run only, and stops them, SIGTERM-deaf ones with SIGKILL', async () => {
    const runId = randomUUID();
    const polite = startMarked(runId, 'setInterval(() => {}, 1000)');
    // It says when its handler is in place, so the SIGTERM below cannot arrive before it.
    const readyFile = join(mkdtempSync(join(tmpdir(), 'tributary-leftover-')), 'ready');
    const deaf = startMarked(
      runId,
      `process.on('SIGTERM', () => {}); require('node:fs').writeFileSync(${JSON.stringify(readyFile)}, ''); setInterval(() => {}, 1000)`,
    );
    const otherRun = startMarked(randomUUID(), 'setInterval(() => {}, 1000)');

    await waitFor(async () => existsSync(readyFile), 30_000, 'the SIGTERM-deaf process to be ready');
    const found = findRunProcesses(runId, () => false).map(({ pid }) => pid);
    expect(found.sort()).toEqual([polite, deaf].sort());
    expect(found).not.toContain(otherRun);
    const [listed] = findRunProcesses(runId, ({ pid }) => pid !== polite);
    expect(listed?.command).toContain('setInterval');

    const killed = await stopProcesses(
      findRunProcesses(runId, () => false),
      1_000,
    );
    expect(killed).toEqual([deaf]);
    await waitFor(
      async () => findRunProcesses(runId, () => false).length === 0,
      10_000,
      'the run to be swept',
    );
    expect(findRunProcesses(runId, () => false)).toEqual([]);
  });
});

// The bound on the entry point's children (test/support/bounded-child.ts):
// a child that outstays it is described, killed and recorded.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runBounded } from '../support/bounded-child.ts';

describe('runBounded', () => {
  const directory = mkdtempSync(join(tmpdir(), 'tributary-bounded-'));
  const log = join(directory, 'overstays.log');
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  it('returns the status and the whole output of a child that ends in time', async () => {
    const outcome = await runBounded(
      process.execPath,
      ['-e', 'process.stdout.write("x".repeat(200000)); console.error("done"); process.exitCode = 3'],
      { env: process.env, boundMs: 60_000, label: 'quick', log },
    );
    expect(outcome).toEqual({ status: 3, signal: null, stdout: 'x'.repeat(200_000), stderr: 'done\n' });
    expect(existsSync(log)).toBe(false);
  });

  it('describes, kills and records a child still running at the bound', async () => {
    // A child that never ends: a timer keeps it alive.
    const outcome = await runBounded(
      process.execPath,
      ['-e', 'console.log("started"); setInterval(() => {}, 1000)'],
      {
        env: process.env,
        boundMs: 5_000, // ample for a child to start and print on a loaded machine
        label: 'idle child',
        log,
      },
    );
    expect(outcome.signal).toBe('SIGKILL');
    expect(outcome.stdout).toBe('started\n');
    expect(outcome.overstayed).toMatch(
      /^idle child: still running after 5000 ms\nprocess \d+: .*setInterval/,
    );
    // The main thread waits in the event loop's epoll: its state and system call are named.
    expect(outcome.overstayed).toMatch(/thread \d+ MainThread state=S wchan=\S+ syscall=\d+ /);
    expect(readFileSync(log, 'utf8')).toContain(outcome.overstayed);
  });
});

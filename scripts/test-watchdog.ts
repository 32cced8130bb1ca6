// Runs `vitest run` so that the run always ends: once vitest has written its
// JSON report it gets a bounded grace to exit; past it, the watchdog prints what
// is still open and kills vitest with everything the run started, and fails.
//
//   node scripts/test-watchdog.ts <report.json> [vitest arguments...]
//
// vitest runs with the default, json (to <report.json>) and hanging-process
// reporters, in a process group of its own. Every process of the run carries
// TRIBUTARY_TEST_RUN_ID (test/support/leftover-processes.ts); the global setup
// (test/support/global-setup.ts) writes what tests left running to
// leftover-processes.json beside the report, which scripts/test-summary.ts reads.
//
// Exit status: vitest's own; 1 when vitest had to be killed, or when processes
// of the run outlived vitest.
//
// Environment: TEST_EXIT_GRACE_SECONDS (default 120): how long vitest may take
// to close after its report (the global teardown stops leftovers within seconds;
// vitest's teardownTimeout is 30 s).
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { overstayLog } from '../test/support/bounded-child.ts';
import { leftoverReportVariable } from '../test/support/global-setup.ts';
import {
  describeProcesses,
  findGroupProcesses,
  findRunProcesses,
  runIdVariable,
  stopProcesses,
} from '../test/support/leftover-processes.ts';

const [reportArgument, ...vitestArguments] = process.argv.slice(2);
if (!reportArgument) {
  console.error('usage: test-watchdog.ts <report.json> [vitest arguments...]');
  process.exit(2);
}
const reportPath = resolve(reportArgument);
const leftoverReportPath = join(dirname(reportPath), 'leftover-processes.json');
const graceSeconds = Number(process.env.TEST_EXIT_GRACE_SECONDS ?? 120);
const runId = randomUUID();

// A report of an earlier run must not start the grace clock.
rmSync(reportPath, { force: true });
rmSync(leftoverReportPath, { force: true });
rmSync(overstayLog, { force: true });

const vitestEntry = join(
  dirname(createRequire(import.meta.url).resolve('vitest/package.json')),
  'vitest.mjs',
);
const vitest: ChildProcess = spawn(
  process.execPath,
  [
    vitestEntry,
    'run',
    '--reporter=default',
    '--reporter=hanging-process',
    '--reporter=json',
    `--outputFile.json=${reportPath}`,
    ...vitestArguments,
  ],
  {
    stdio: 'inherit',
    // Its own process group: one signal reaches vitest, its workers and their children.
    detached: true,
    env: { ...process.env, [runIdVariable]: runId, [leftoverReportVariable]: leftoverReportPath },
  },
);
const vitestPid = vitest.pid;
if (vitestPid === undefined) throw new Error('vitest did not start');

function signalGroup(signal: NodeJS.Signals): void {
  try {
    process.kill(-(vitestPid as number), signal);
  } catch {
    // The group is empty already.
  }
}

// The group is detached from the terminal's: pass an interrupt on.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => signalGroup(signal));

const exitStatus = new Promise<number>((resolveStatus) =>
  vitest.once('exit', (code, signal) => resolveStatus(code ?? (signal ? 1 : 0))),
);

let reportSeenAt: number | undefined;
const poll = setInterval(async () => {
  if (reportSeenAt === undefined) {
    if (existsSync(reportPath)) reportSeenAt = Date.now();
    return;
  }
  if (Date.now() - reportSeenAt < graceSeconds * 1000) return;
  clearInterval(poll);
  console.error(
    `\ntest-watchdog: vitest wrote its report ${graceSeconds} s ago and has not exited; what is still open:`,
  );
  // The global setup's handler prints vitest's open resources and the run's processes.
  try {
    process.kill(vitestPid, 'SIGUSR2');
  } catch {}
  await new Promise((resolveWait) => setTimeout(resolveWait, 3_000));
  // Seen from outside: every process of vitest's group, the ones started without the run's id too.
  console.error(`processes in vitest's process group:\n${describeProcesses(findGroupProcesses(vitestPid))}`);
  signalGroup('SIGKILL');
}, 1_000);

let status = await exitStatus;
clearInterval(poll);
if (reportSeenAt !== undefined && Date.now() - reportSeenAt >= graceSeconds * 1000) {
  console.error('test-watchdog: killed vitest: it did not exit after its report');
  status = 1;
}
// What outlived vitest (a process the teardown could not reach, a daemonized server):
// report it, stop it, and fail, so a leak never goes unseen.
const outlived = findRunProcesses(runId, () => false);
if (outlived.length > 0) {
  console.error(
    `test-watchdog: ${outlived.length} process(es) of the run outlived vitest:\n${describeProcesses(outlived)}`,
  );
  await stopProcesses(outlived, 5_000);
  status = status === 0 ? 1 : status;
}
process.exit(status);

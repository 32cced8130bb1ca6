// vitest global setup of every project: marks the run and, after it, stops what
// the tests left running.
//
// Why it matters: vitest's forks pool reads each worker's stdout and stderr
// through a pipe and, when it closes, waits for those pipes to end. A process a
// test spawned with stderr 'inherit' (engine, operator, standalone) and never
// stopped holds that pipe open, so vitest would wait forever after writing its
// report. This teardown runs inside vitest's close, before the pool closes: it
// finds the run's processes (test/support/leftover-processes.ts), reports each
// one on stderr and in the leftover report, and stops them.
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { describeProcesses, findRunProcesses, runIdVariable, stopProcesses } from './leftover-processes.ts';

/** Where the watchdog wants the leftovers written (JSON array), read by scripts/test-summary.ts. */
export const leftoverReportVariable = 'TRIBUTARY_TEST_LEFTOVER_REPORT';

/** How long a leftover gets to exit on SIGTERM before SIGKILL. */
const stopGraceMs = 5_000;

// Every project calls this setup, and each project may load this module anew:
// the flag lives on the process, so the signal handler and the sweep (and the
// one leftover report) exist once.
const registeredKey = Symbol.for('tributary.test.global-setup');
const processFlags = globalThis as { [registeredKey]?: boolean };

export default function setup(): () => Promise<void> {
  // The watchdog sets the id before vitest starts; a plain `vitest run` gets one here,
  // before its workers are forked (they copy this environment).
  process.env[runIdVariable] ??= randomUUID();
  const runId = process.env[runIdVariable];
  const vitestPid = process.pid;
  if (processFlags[registeredKey]) return async () => {};
  processFlags[registeredKey] = true;
  // The watchdog sends SIGUSR2 when vitest outlives its report: say what keeps it alive.
  process.on('SIGUSR2', () => {
    console.error(
      `vitest (pid ${vitestPid}) still open resources: ${process.getActiveResourcesInfo().join(', ')}`,
    );
    const children = findRunProcesses(runId, () => false);
    if (children.length > 0)
      console.error(`processes of this run still alive:\n${describeProcesses(children)}`);
  });
  return async () => {
    // vitest's own workers are children of this process and carry the id too.
    const leftovers = findRunProcesses(runId, (candidate) => candidate.parentPid === vitestPid);
    const reportPath = process.env[leftoverReportVariable];
    if (reportPath) writeFileSync(reportPath, `${JSON.stringify(leftovers, null, 2)}\n`);
    if (leftovers.length === 0) return;
    console.error(
      `\n${leftovers.length} process(es) started by tests were still running after the run; a test did not stop them (stopping now):\n${describeProcesses(leftovers)}\n`,
    );
    const killed = await stopProcesses(leftovers, stopGraceMs);
    if (killed.length > 0) console.error(`needed SIGKILL: ${killed.join(', ')}`);
  };
}

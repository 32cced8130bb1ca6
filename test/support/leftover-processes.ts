// Finds and stops the processes a test run left behind.
//
// Every process of one run carries the run's id in its environment: the
// global setup (test/support/global-setup.ts) or the watchdog
// (scripts/test-watchdog.ts) puts TRIBUTARY_TEST_RUN_ID in the environment
// vitest starts its workers with, and the test helpers spawn engines,
// operators, standalone services and private PostgreSQL servers with
// `...process.env`. The id survives reparenting (a daemonized postmaster, or
// a child whose worker died), which a walk of the process tree would not, and
// it never matches the shared test services (started by scripts/testenv/
// without it) nor another developer's run (another id). Linux only: it reads
// /proc, as the machines that run this suite do.
import { readdirSync, readFileSync } from 'node:fs';

export const runIdVariable = 'TRIBUTARY_TEST_RUN_ID';

export interface LeftoverProcess {
  readonly pid: number;
  readonly parentPid: number;
  /** The command line, arguments joined by spaces (environment values are never read out). */
  readonly command: string;
}

/** `/proc/<pid>/<name>` (a path below it, such as `task/<tid>/stat`), or undefined when it cannot be read. */
export function readProcFile(pid: number, name: string): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/${name}`, 'latin1');
  } catch {
    // Gone meanwhile, or not ours to read.
    return undefined;
  }
}

/**
 * The fields of a `stat` file after the command name, from the state on:
 * "pid (comm) state ppid pgrp ...", where comm may hold spaces and parentheses,
 * so the split is after the last ')'.
 */
export function statFields(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** Parent pid and process group of a live process; undefined when it is gone or a zombie. */
function statusOf(pid: number): { parentPid: number; groupId: number } | undefined {
  const stat = readProcFile(pid, 'stat');
  if (stat === undefined) return undefined;
  const fields = statFields(stat);
  const state = fields[0];
  if (state === 'Z' || state === 'X') return undefined; // a zombie is already dead
  return { parentPid: Number(fields[1]), groupId: Number(fields[2]) };
}

function processIds(): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => pid !== process.pid);
}

function commandOf(pid: number): string {
  return (readProcFile(pid, 'cmdline') ?? '').split('\0').join(' ').trim();
}

/** Live processes whose environment holds `TRIBUTARY_TEST_RUN_ID=<runId>`, except `excluded` ones. */
export function findRunProcesses(
  runId: string,
  excluded: (process: LeftoverProcess) => boolean,
): LeftoverProcess[] {
  const marker = `${runIdVariable}=${runId}`;
  const found: LeftoverProcess[] = [];
  for (const pid of processIds()) {
    const environment = readProcFile(pid, 'environ');
    if (environment === undefined || !environment.split('\0').includes(marker)) continue;
    const status = statusOf(pid);
    if (status === undefined) continue;
    const candidate = { pid, parentPid: status.parentPid, command: commandOf(pid) };
    if (!excluded(candidate)) found.push(candidate);
  }
  return found;
}

/** Live processes of a process group, marked or not (a child spawned with a bare environment too). */
export function findGroupProcesses(groupId: number): LeftoverProcess[] {
  const found: LeftoverProcess[] = [];
  for (const pid of processIds()) {
    const status = statusOf(pid);
    if (status?.groupId === groupId)
      found.push({ pid, parentPid: status.parentPid, command: commandOf(pid) });
  }
  return found;
}

function isAlive(pid: number): boolean {
  return statusOf(pid) !== undefined;
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

/**
 * SIGTERM to each process, then SIGKILL to those still alive after `graceMs`
 * (a bounded poll, so a clean exit ends the wait early). Returns the pids that
 * needed SIGKILL.
 */
export async function stopProcesses(
  processes: readonly LeftoverProcess[],
  graceMs: number,
): Promise<number[]> {
  for (const { pid } of processes) signal(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  let alive = processes.map(({ pid }) => pid).filter(isAlive);
  while (alive.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    alive = alive.filter(isAlive);
  }
  for (const pid of alive) signal(pid, 'SIGKILL');
  return alive;
}

/** One line per process, for a report a person reads. */
export function describeProcesses(processes: readonly LeftoverProcess[]): string {
  return processes
    .map(({ pid, parentPid, command }) => `  pid ${pid} (parent ${parentPid}): ${command}`)
    .join('\n');
}

// Runs a short-lived program to its end within a bound, and when it overstays,
// says where it was stuck before killing it: the state of each of its threads,
// the kernel function and system call each waits in, and a native backtrace
// where gdb is installed. Linux only for the description (it reads /proc); the
// bound holds everywhere.
import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { readProcFile, statFields } from './leftover-processes.ts';

export interface ChildOutcome {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Set when the child was still running at the bound: what it was doing then. */
  readonly overstayed?: string;
}

/**
 * Where the overstays of a run are recorded: scripts/test-watchdog.ts removes
 * it before a run, scripts/test-summary.ts prints it before the closing line,
 * so a stall that a second run got past is still seen.
 */
export const overstayLog = join(import.meta.dirname, '..', '..', '.testenv', 'overstayed-children.log');

/** A /proc file's text for the description, `-` when it cannot be read. */
function procText(pid: number, name: string): string {
  return readProcFile(pid, name)?.trim() ?? '-';
}

/** One line per thread: id, name, state, kernel wait channel, system call; then gdb's backtraces. */
export function describeProcess(pid: number): string {
  const lines = [`process ${pid}: ${procText(pid, 'cmdline').split('\0').join(' ')}`];
  let threads: string[] = [];
  try {
    threads = readdirSync(`/proc/${pid}/task`);
  } catch {
    lines.push('  (gone, or /proc cannot be read)');
  }
  for (const thread of threads) {
    const task = `task/${thread}`;
    const state = statFields(procText(pid, `${task}/stat`))[0];
    lines.push(
      `  thread ${thread} ${procText(pid, `${task}/comm`)} state=${state} wchan=${procText(pid, `${task}/wchan`)} syscall=${procText(pid, `${task}/syscall`)}`,
    );
  }
  try {
    lines.push(
      execFileSync('gdb', ['-p', String(pid), '-batch', '-ex', 'thread apply all bt 16'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
        timeout: 20_000,
      }),
    );
  } catch {
    lines.push('  (no native backtrace: gdb is missing or could not attach)');
  }
  return lines.join('\n');
}

/**
 * Runs `command` with `args` to its exit, standard input closed at once (as
 * spawnSync does). A child still running after `boundMs` is described, killed
 * with SIGKILL, recorded under `label` in `options.log` (default
 * `overstayLog`), and returned with `overstayed` set.
 */
export async function runBounded(
  command: string,
  args: readonly string[],
  options: { env: NodeJS.ProcessEnv; boundMs: number; label: string; log?: string },
): Promise<ChildOutcome> {
  const child = spawn(command, args, { env: options.env, stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.end();
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  // 'close', not 'exit': the output is complete only once both pipes ended.
  const closed = new Promise<{ status: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (status, signal) => resolve({ status, signal }));
  });
  let overstayed: string | undefined;
  const timer = setTimeout(() => {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      overstayed = `${options.label}: still running after ${options.boundMs} ms\n${describeProcess(child.pid)}`;
      const log = options.log ?? overstayLog;
      mkdirSync(dirname(log), { recursive: true });
      appendFileSync(log, `${new Date().toISOString()} ${overstayed}\n\n`);
    }
    child.kill('SIGKILL');
  }, options.boundMs);
  try {
    const { status, signal } = await closed;
    return overstayed === undefined
      ? { status, signal, stdout, stderr }
      : { status, signal, stdout, stderr, overstayed };
  } finally {
    clearTimeout(timer);
  }
}

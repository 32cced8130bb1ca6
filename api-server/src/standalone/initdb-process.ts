// The first start on a fresh data directory runs PostgreSQL's initdb (PGlite
// does it when the directory has no PG_VERSION). In the service's own process
// that costs about 400 MiB more peak and 60–85 MiB more idle memory than a start
// on an existing directory, for good: initdb runs a second, temporary Postgres
// instance, and the C heap the process grew for it is not given back
// (docs/startup.md, Memory). So, as PostgreSQL's own initdb is a program of
// its own, it runs in a short-lived child process (initdb-child.ts); the service
// then opens the directory as on any later start.
//
// Interrupted initialisation: PGlite only asks whether PG_VERSION exists, and
// writes a new directory's files one by one, PG_VERSION among them, so a
// process killed half-way can leave a directory PGlite takes for a database.
// Therefore the child builds the database in a work directory inside the data
// directory (same file system, writable whenever the data directory is, also
// when that is a mount point) and the parent moves its entries into place with
// PG_VERSION last. Until that last
// rename the data directory counts as fresh and the next start begins again;
// entries an interrupted attempt moved are replaced, as PGlite itself would
// write over them. Other files in the data directory (such as `make start`'s
// api-password) are left alone. This guards against the process being killed,
// not against a power loss: the files are not synced.
import { fork } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { InitdbChildReport } from './initdb-child.ts';

/** PGlite's sign of an initialised directory: without it, PGlite runs initdb. */
const versionFileName = 'PG_VERSION';
/**
 * The start of the name of the directory where the child builds the database;
 * the parent's process id follows. What an earlier start left is removed at
 * every start. One name per attempt: a child whose parent was killed only
 * notices at its next turn of the event loop (seconds inside initdb), and must
 * not write into the next attempt's directory meanwhile.
 */
export const initdbWorkDirectoryPrefix = '.initdb-in-progress.';
/** How much of the child's stderr an error quotes (the end, where the reason is). */
const stderrTailLength = 4000;
/**
 * How long a child that has sent its report may take to exit before it is
 * killed. Its report comes after the database was closed, so the directory is
 * complete; a first start was once seen to hang for good in the child's
 * `process.exit` (every thread waiting, the parent waiting on it).
 */
const exitAfterReportMs = 3000;

const defaultChildModule = fileURLToPath(new URL('./initdb-child.ts', import.meta.url));

export interface InitdbOptions {
  /** PGlite's start parameters, as the service will open the database with. */
  readonly startParams: readonly string[];
  /** The module the child runs (tests replace it to simulate a failing child). */
  readonly childModule?: string;
}

export interface InitdbOutcome {
  /** The child's peak resident memory (not part of the service's own peak). */
  readonly childPeakRssKiB: number | undefined;
  readonly durationMs: number;
  /** Whether the child ended by itself after its report or had to be killed (see runChild). */
  readonly childEnded: 'by itself' | 'killed after its report';
}

export function isInitialised(dataDir: string): boolean {
  return existsSync(join(dataDir, versionFileName));
}

/**
 * Initialises `dataDir` in a child process when it holds no database yet;
 * returns undefined, having started nothing, when it does. Throws when the
 * child fails, with its stderr's end; the data directory then still counts as
 * fresh. The directory must exist.
 */
export async function initialiseDataDirectory(
  dataDir: string,
  options: InitdbOptions,
): Promise<InitdbOutcome | undefined> {
  for (const entry of readdirSync(dataDir)) {
    if (entry.startsWith(initdbWorkDirectoryPrefix))
      rmSync(join(dataDir, entry), { recursive: true, force: true });
  }
  if (isInitialised(dataDir)) return undefined;
  const workDirectory = join(dataDir, `${initdbWorkDirectoryPrefix}${process.pid}`);
  const startedAt = performance.now();
  mkdirSync(workDirectory, { mode: 0o700 });
  const { report, killedAfterReport } = await runChild(options.childModule ?? defaultChildModule, [
    workDirectory,
    ...options.startParams,
  ]);
  if (!isInitialised(workDirectory)) {
    throw new Error(`initialising the data directory ${dataDir}: the child ended without writing a database`);
  }
  moveIntoPlace(workDirectory, dataDir);
  return {
    childPeakRssKiB: report?.peakRssKiB,
    durationMs: Math.round(performance.now() - startedAt),
    childEnded: killedAfterReport ? 'killed after its report' : 'by itself',
  };
}

function moveIntoPlace(workDirectory: string, dataDir: string): void {
  for (const entry of readdirSync(workDirectory)) {
    if (entry === versionFileName) continue;
    const target = join(dataDir, entry);
    rmSync(target, { recursive: true, force: true });
    renameSync(join(workDirectory, entry), target);
  }
  // The commit: from here on the directory is an initialised one.
  renameSync(join(workDirectory, versionFileName), join(dataDir, versionFileName));
  rmSync(workDirectory, { recursive: true, force: true });
}

/**
 * Forks `module` with the service's own Node flags (fork's default execArgv:
 * standalone mode's --liftoff-only, which keeps TurboFan's compiler memory out
 * of initdb too) and resolves with its report once it exits with code 0, or
 * once it is killed for not exiting within `exitAfterReportMs` of its report.
 */
function runChild(
  module: string,
  args: readonly string[],
): Promise<{ report: InitdbChildReport | undefined; killedAfterReport: boolean }> {
  return new Promise((resolve, reject) => {
    const child = fork(module, args, { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    let report: InitdbChildReport | undefined;
    let killedAfterReport = false;
    let stderrTail = '';
    // PGlite's own output would go into the service's log stream otherwise.
    child.stdout?.resume();
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderrTail = (stderrTail + chunk).slice(-stderrTailLength);
    });
    let exitDeadline: NodeJS.Timeout | undefined;
    child.on('message', (message) => {
      report = message as InitdbChildReport;
      exitDeadline ??= setTimeout(() => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        killedAfterReport = true;
        child.kill('SIGKILL');
      }, exitAfterReportMs);
    });
    child.on('error', (error) =>
      reject(new Error(`initialising the data directory: could not start ${module}`, { cause: error })),
    );
    child.on('close', (code, signal) => {
      clearTimeout(exitDeadline);
      if (code === 0 || (killedAfterReport && report)) return resolve({ report, killedAfterReport });
      const ending = signal ? `was stopped by ${signal}` : `exited with code ${code}`;
      const output = stderrTail.trim();
      reject(
        new Error(
          `initialising the data directory: its initdb process ${ending}${output ? `:\n${output}` : ''}`,
        ),
      );
    });
  });
}

// The short-lived process that initialises a fresh data directory for
// standalone mode (forked by initdb-process.ts, which says why). It only loads
// PGlite: `PGlite.create` on a directory without PG_VERSION runs initdb there,
// starts the database once and `close` shuts it down cleanly, so the parent
// opens it as it opens any existing data directory.
//
// Arguments: the directory, then PGlite's start parameters. Reports its peak
// resident memory to the parent before it exits (the parent's own peak does not
// include a child's); errors go to stderr with a non-zero exit code.
import { PGlite } from '@electric-sql/pglite';

/** What the child sends the parent over the IPC channel once the directory is ready. */
export interface InitdbChildReport {
  /** getrusage's ru_maxrss of this process: its peak resident set, in KiB on Linux. */
  readonly peakRssKiB: number;
}

// The parent went away (killed, or stopped while waiting): nobody will use the
// directory, and the parent's next start removes it. SIGKILL rather than
// `process.exit`, which can hang for good (nodejs/node#54918, docs/startup.md),
// leaving an orphan.
const orphaned = () => process.kill(process.pid, 'SIGKILL');
process.on('disconnect', orphaned);

const [directory, ...startParams] = process.argv.slice(2);
if (!directory) throw new Error('usage: initdb-child.ts <directory> [start parameters]');
const database = await PGlite.create(directory, { startParams });
await database.close();
const report: InitdbChildReport = { peakRssKiB: process.resourceUsage().maxRSS };
// Ends by itself once the report is written, by closing the IPC channel that
// would keep it alive (not as an orphan: the parent is there). Not
// `process.exit`, for the reason above; the parent kills a child still alive
// 3 s after its report all the same.
if (process.send) {
  process.send(report, () => {
    process.off('disconnect', orphaned);
    process.disconnect();
  });
}

import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { initdbWorkDirectoryPrefix, initialiseDataDirectory, isInitialised } from './initdb-process.ts';

const startParams = [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'];
/** A real initdb takes seconds of CPU (about 3 s on a calm 2-core machine): more than the unit default of 5 s on a busy one. */
const realInitdb = { timeout: 60_000 };

/** The work directories (of this or earlier attempts) in `dataDir`. */
function workDirectories(dataDir: string): string[] {
  return readdirSync(dataDir).filter((entry) => entry.startsWith(initdbWorkDirectoryPrefix));
}

/** Opens the directory as the service does and proves it holds a working database. */
async function openAndQuery(dataDir: string): Promise<number> {
  const database = await PGlite.create(dataDir, { startParams });
  try {
    const { rows } = await database.query<{ answer: number }>('SELECT 6 * 7 AS answer');
    return rows[0]?.answer ?? 0;
  } finally {
    await database.close();
  }
}

describe('initialiseDataDirectory', () => {
  let root: string;
  let dataDir: string;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'tributary-initdb-'));
    dataDir = join(root, 'data');
    mkdirSync(dataDir, { mode: 0o700 });
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  /** A child module for the failure paths, written as plain JavaScript so that it starts fast. */
  function fakeChild(name: string, source: string): string {
    const path = join(root, name);
    writeFileSync(path, source);
    return path;
  }

  it(
    'initialises a fresh directory in a child process, then the service opens it as an existing one',
    realInitdb,
    async () => {
      // `make start` writes the API password into the data directory before the first start.
      writeFileSync(join(dataDir, 'api-password'), 'secret');

      const outcome = await initialiseDataDirectory(dataDir, { startParams });

      expect(outcome?.childPeakRssKiB).toBeGreaterThan(0);
      // Not by process.exit, which can hang (docs/startup.md), nor by the parent's kill.
      expect(outcome?.childEnded).toBe('by itself');
      expect(isInitialised(dataDir)).toBe(true);
      expect(workDirectories(dataDir)).toEqual([]);
      expect(readFileSync(join(dataDir, 'api-password'), 'utf8')).toBe('secret');
      // Initialised now: no second child.
      await expect(initialiseDataDirectory(dataDir, { startParams })).resolves.toBeUndefined();
      expect(await openAndQuery(dataDir)).toBe(42);
    },
  );

  it(
    'leaves the directory fresh when the child is killed half-way, and the next start initialises it',
    realInitdb,
    async () => {
      // Killed after writing PG_VERSION and part of the database into its work directory.
      const killedChild = fakeChild(
        'killed-child.mjs',
        `import { mkdirSync, writeFileSync } from 'node:fs';
       import { join } from 'node:path';
       const directory = process.argv[2];
       writeFileSync(join(directory, 'PG_VERSION'), '17\\n');
       mkdirSync(join(directory, 'base'));
       process.kill(process.pid, 'SIGKILL');`,
      );
      // What earlier attempts left behind: a start killed with its child, one killed while moving entries into place.
      mkdirSync(join(dataDir, `${initdbWorkDirectoryPrefix}1`));
      writeFileSync(join(dataDir, `${initdbWorkDirectoryPrefix}1`, 'PG_VERSION'), '17\n');
      mkdirSync(join(dataDir, 'global'));
      writeFileSync(join(dataDir, 'global', 'half-moved'), '');

      await expect(
        initialiseDataDirectory(dataDir, { startParams, childModule: killedChild }),
      ).rejects.toThrow(/initdb process was stopped by SIGKILL/);
      expect(isInitialised(dataDir)).toBe(false);
      expect(workDirectories(dataDir)).toEqual([`${initdbWorkDirectoryPrefix}${process.pid}`]);

      await initialiseDataDirectory(dataDir, { startParams });
      expect(existsSync(join(dataDir, 'global', 'half-moved'))).toBe(false);
      expect(workDirectories(dataDir)).toEqual([]);
      expect(await openAndQuery(dataDir)).toBe(42);
    },
  );

  it("reports a failing child's exit code and the end of its stderr", async () => {
    const failingChild = fakeChild(
      'failing-child.mjs',
      `process.stderr.write('initdb: could not write file: No space left on device\\n');
       process.exit(3);`,
    );

    const initialisation = initialiseDataDirectory(dataDir, { startParams, childModule: failingChild });

    await expect(initialisation).rejects.toThrow(
      /initdb process exited with code 3:\ninitdb: could not write file: No space left on device/,
    );
    expect(isInitialised(dataDir)).toBe(false);
  });

  it('kills a child that reported but does not exit, and takes its report', { timeout: 30_000 }, async () => {
    // A complete database, then the report, then a process that never ends.
    const stuckChild = fakeChild(
      'stuck-child.mjs',
      `import { writeFileSync } from 'node:fs';
       import { join } from 'node:path';
       writeFileSync(join(process.argv[2], 'PG_VERSION'), '17\\n');
       process.send({ peakRssKiB: 1234 });
       setInterval(() => {}, 1000);`,
    );

    const outcome = await initialiseDataDirectory(dataDir, { startParams, childModule: stuckChild });

    expect(outcome?.childPeakRssKiB).toBe(1234);
    expect(outcome?.childEnded).toBe('killed after its report');
    expect(isInitialised(dataDir)).toBe(true);
    expect(workDirectories(dataDir)).toEqual([]);
  });

  it('refuses a child that exits cleanly without writing a database', async () => {
    const idleChild = fakeChild('idle-child.mjs', '');

    await expect(initialiseDataDirectory(dataDir, { startParams, childModule: idleChild })).rejects.toThrow(
      /ended without writing a database/,
    );
    expect(isInitialised(dataDir)).toBe(false);
  });
});

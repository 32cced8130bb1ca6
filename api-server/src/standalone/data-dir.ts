// The standalone data directory holds peer passwords (in its embedded
// database): only the service's own user may read it. Modes are enforced at
// every start, not only when the directory is created, because a copy, a
// restore from backup or a hand-made `mkdir` leaves it world-readable.
import { chmodSync, lstatSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export const dataDirectoryMode = 0o700;
export const dataFileMode = 0o600;

/**
 * Creates `directory` if needed and gives it and every directory below it mode
 * 0700, every file 0600. Symbolic links are neither followed nor changed (a
 * link's target may be anything). Returns how many entries were changed.
 */
export function secureDataDirectory(directory: string): number {
  mkdirSync(directory, { recursive: true, mode: dataDirectoryMode });
  let changed = 0;
  const visit = (path: string): void => {
    const stats = lstatSync(path);
    if (stats.isSymbolicLink()) return;
    const wanted = stats.isDirectory() ? dataDirectoryMode : dataFileMode;
    if ((stats.mode & 0o777) !== wanted) {
      chmodSync(path, wanted);
      changed += 1;
    }
    if (stats.isDirectory()) for (const entry of readdirSync(path)) visit(join(path, entry));
  };
  visit(directory);
  return changed;
}

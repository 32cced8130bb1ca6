// A disk that fills up: a tmpfs of a few MiB, for a PostgreSQL tablespace whose
// writes must fail with "No space left on device" (53100) and then succeed
// again once the disk is grown, as an administrator enlarging a volume would.
// Needs root (mount); the test machine's scripts run as root (see
// scripts/testenv/node.sh).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface SmallDisk {
  readonly path: string;
  grow(sizeMiB: number): Promise<void>;
  remove(): Promise<void>;
}

/** Mounts a tmpfs of `sizeMiB` owned by the OS user `owner` (e.g. `postgres`). */
export async function mountSmallDisk(sizeMiB: number, owner: string): Promise<SmallDisk> {
  if (process.getuid?.() !== 0) throw new Error('a small disk needs root to mount a tmpfs');
  const path = mkdtempSync(join(tmpdir(), 'tributary-small-disk-'));
  const uid = Number((await run('id', ['-u', owner])).stdout.trim());
  const gid = Number((await run('id', ['-g', owner])).stdout.trim());
  await run('mount', [
    '-t',
    'tmpfs',
    '-o',
    `size=${sizeMiB}m,uid=${uid},gid=${gid},mode=0700`,
    'tmpfs',
    path,
  ]);
  return {
    path,
    async grow(newSizeMiB: number) {
      await run('mount', ['-o', `remount,size=${newSizeMiB}m`, path]);
    },
    async remove() {
      await run('umount', ['-l', path]).catch(() => {});
      rmSync(path, { recursive: true, force: true });
    },
  };
}

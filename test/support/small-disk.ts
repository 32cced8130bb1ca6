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

export interface ReadOnlyDisk {
  readonly path: string;
  /** Remounts it writable, as a fixed deployment (an emptyDir) would give. */
  makeWritable(): Promise<void>;
  remove(): Promise<void>;
}

/**
 * A read-only tmpfs, as an engine container's root file system is when the pod
 * sets `readOnlyRootFilesystem`: every file created under it fails with EROFS,
 * for root too (a directory of mode 0555 would not stop root).
 */
export async function mountReadOnlyDisk(): Promise<ReadOnlyDisk> {
  if (process.getuid?.() !== 0) throw new Error('a read-only disk needs root to mount a tmpfs');
  const path = mkdtempSync(join(tmpdir(), 'tributary-read-only-'));
  await run('mount', ['-t', 'tmpfs', '-o', 'ro,size=4m,mode=0777', 'tmpfs', path]);
  return {
    path,
    async makeWritable() {
      await run('mount', ['-o', 'remount,rw', path]);
    },
    async remove() {
      await run('umount', ['-l', path]).catch(() => {});
      rmSync(path, { recursive: true, force: true });
    },
  };
}

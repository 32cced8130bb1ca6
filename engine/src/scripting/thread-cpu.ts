// CPU time of one thread of this process, read by another thread of it: the
// watchdog (script-thread.ts) reads the script thread's while that thread is
// stuck in a long call and cannot report anything itself. The kernel accounts
// it per thread in /proc/self/task/<tid>/stat (utime and stime, fields 14 and
// 15, in USER_HZ ticks: proc(5)). Where /proc cannot tell (not Linux), the
// functions answer 0 / undefined and the watchdog goes by wall-clock time alone.
import { readFileSync, readlinkSync } from 'node:fs';

/** USER_HZ: 100 on every Linux architecture Node supports (sysconf(_SC_CLK_TCK)). */
const ticksPerSecond = 100;

/** The calling thread's kernel thread id, or 0 where /proc does not say. */
export function currentThreadId(): number {
  try {
    // "/proc/thread-self" links to "<pid>/task/<tid>".
    return Number(readlinkSync('/proc/thread-self').split('/').at(-1)) || 0;
  } catch {
    return 0;
  }
}

/** CPU time (user + system) thread `threadId` of this process has used, in µs; undefined if unknown. */
export function threadCpuMicros(threadId: number): bigint | undefined {
  if (threadId <= 0) return undefined;
  let stat: string;
  try {
    stat = readFileSync(`/proc/self/task/${threadId}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces: count after its last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) return undefined;
  return BigInt(utime + stime) * BigInt(1_000_000 / ticksPerSecond);
}

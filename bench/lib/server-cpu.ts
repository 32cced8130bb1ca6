// CPU time of a PostgreSQL server's processes (Linux /proc): the postmaster,
// its live backends and workers, and the ones it has reaped. A phase's share
// is the difference of two readings, whichever processes came and went.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';

/** Kernel clock ticks per second (`getconf CLK_TCK`, 100 on Linux). */
const ticksPerSecond = 100;

/** utime, stime, cutime and cstime of a process, in ticks (proc(5): fields 14–17 of stat). */
function ticks(pid: number, withReaped: boolean): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name may hold spaces: fields are counted after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const own = Number(fields[11]) + Number(fields[12]);
  return withReaped ? own + Number(fields[13]) + Number(fields[14]) : own;
}

function children(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return text === '' ? [] : text.split(' ').map(Number);
}

export class ServerCpu {
  readonly #postmaster: number;

  private constructor(postmaster: number) {
    this.#postmaster = postmaster;
  }

  /** The server `client` is connected to; needs a superuser (data_directory). */
  static async of(client: pg.ClientBase): Promise<ServerCpu> {
    const result = await client.query<{ dir: string }>(`SELECT current_setting('data_directory') AS dir`);
    const dir = result.rows[0]?.dir;
    if (!dir) throw new Error('the server did not name its data directory');
    const pid = Number(readFileSync(join(dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return new ServerCpu(pid);
  }

  /** Seconds of CPU the server's processes have used so far. */
  seconds(): number {
    let total = ticks(this.#postmaster, true);
    for (const child of children(this.#postmaster)) {
      try {
        total += ticks(child, false);
      } catch {
        // Exited since the list was read: reaped, so counted in the postmaster's figures.
      }
    }
    return total / ticksPerSecond;
  }
}

/** Seconds of CPU one process (and the children it reaped) has used so far. */
export function processCpuSeconds(pid: number): number {
  return ticks(pid, true) / ticksPerSecond;
}

// What the figures were measured on: recorded with every figure, since the
// machine is shared and its load moves the numbers.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';

export function loadAverage(): number[] {
  return loadavg().map((value) => Math.round(value * 100) / 100);
}

export function machine() {
  return {
    cores: cpus().length,
    cpu: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    uptime: execFileSync('uptime', { encoding: 'utf8' }).trim(),
  };
}

/** The machine's CPU time so far, all cores, in kernel ticks: busy and in all (proc(5): the `cpu` line of /proc/stat). */
export function machineCpuTicks(): { readonly busy: number; readonly total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const fields = line.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((sum, value) => sum + value, 0);
  // idle and iowait
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

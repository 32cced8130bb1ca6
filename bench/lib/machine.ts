// What the figures were measured on: recorded with every figure, since the
// machine is shared and its load moves the numbers.
import { execFileSync } from 'node:child_process';
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

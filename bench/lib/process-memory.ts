// Resident memory of another process, from /proc (Linux).
import { readFileSync } from 'node:fs';

function statusField(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  if (!match?.[1]) throw new Error(`/proc/${pid}/status has no ${field}`);
  return Math.round(Number(match[1]) / 1024);
}

/** Resident memory now, MiB. */
export const rssMiB = (pid: number) => statusField(pid, 'VmRSS');
/** The most the process has been resident since it started, MiB. */
export const peakRssMiB = (pid: number) => statusField(pid, 'VmHWM');

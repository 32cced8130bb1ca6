import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { StreamWait } from './stream-wait.ts';

/** A promise and its settling functions. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((resolveWith, rejectWith) => {
    resolve = resolveWith;
    reject = rejectWith;
  });
  return { promise, resolve, reject };
}

/** Reads handed out one by one, settled by the test. */
function reads<T>() {
  const started: ReturnType<typeof deferred<T>>[] = [];
  return {
    started,
    read: () => {
      const read = deferred<T>();
      started.push(read);
      return read.promise;
    },
  };
}

describe('StreamWait', () => {
  it('returns the read that comes first, and starts the next read only once it was taken', async () => {
    const { started, read } = reads<string>();
    const wait = new StreamWait(read, new AbortController().signal);
    const first = wait.next(60_000, undefined);
    started[0]?.resolve('a');
    expect(await first).toBe('a');
    expect(started).toHaveLength(1);
    const second = wait.next(60_000, undefined);
    expect(started).toHaveLength(2);
    started[1]?.resolve('b');
    expect(await second).toBe('b');
  });

  it('keeps a read that settles after its wait timed out for the next wait', async () => {
    const { started, read } = reads<string>();
    const wait = new StreamWait(read, new AbortController().signal);
    expect(await wait.next(0, undefined)).toBe('timeout');
    started[0]?.resolve('late');
    await Promise.resolve();
    expect(await wait.next(60_000, undefined)).toBe('late');
    expect(started).toHaveLength(1);
  });

  it('wakes on the end of a write, throws a failed write at once and after, and stops on abort', async () => {
    const { started, read } = reads<string>();
    const abort = new AbortController();
    const wait = new StreamWait(read, abort.signal);
    const written = deferred<void>();
    const waiting = wait.next(60_000, written.promise);
    written.resolve();
    expect(await waiting).toBe('written');

    const failing = deferred<void>();
    const failed = wait.next(60_000, failing.promise);
    failing.reject(new Error('write failed'));
    await expect(failed).rejects.toThrow('write failed');
    await expect(wait.next(60_000, failing.promise)).rejects.toThrow('write failed');

    const healthy = new StreamWait(read, abort.signal);
    const aborted = healthy.next(60_000, undefined);
    abort.abort();
    expect(await aborted).toBe('aborted');
    expect(await healthy.next(60_000, undefined)).toBe('aborted');
    started[0]?.reject(new Error('unobserved'));
  });

  it('throws a failed read', async () => {
    const { started, read } = reads<string>();
    const wait = new StreamWait(read, new AbortController().signal);
    const waiting = wait.next(60_000, undefined);
    started[0]?.reject(new Error('stream broke'));
    await expect(waiting).rejects.toThrow('stream broke');
  });

  it('keeps no read alive while one write outlives many waits', () => {
    // In a process of its own: under the test runner the reads stayed alive whatever
    // the implementation; there only the script holds them.
    const script = fileURLToPath(new URL('../../../test/support/stream-wait-retention.ts', import.meta.url));
    const output = execFileSync(process.execPath, ['--expose-gc', script], { encoding: 'utf8' });
    const alive = JSON.parse(output) as boolean[];
    expect(alive).toHaveLength(20);
    // The newest may still sit in the script's own frame.
    expect(alive.slice(0, -1).filter(Boolean)).toHaveLength(0);
  });
});

import { describe, expect, it } from 'vitest';
import { WorkQueue } from './work-queue.ts';

function deferred() {
  let resolve = () => {};
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

describe('WorkQueue', () => {
  it('runs one reconcile per key at a time and coalesces adds into one rerun', async () => {
    const gate = deferred();
    const runs: string[] = [];
    let concurrent = 0;
    let maxConcurrent = 0;
    const queue = new WorkQueue(async (key) => {
      concurrent++;
      maxConcurrent = Math.max(maxConcurrent, concurrent);
      runs.push(key);
      if (runs.length === 1) await gate.promise;
      concurrent--;
      return undefined;
    });
    queue.add('a');
    queue.add('a');
    queue.add('a');
    gate.resolve();
    await queue.idle();
    await queue.idle();
    expect(runs).toEqual(['a', 'a']);
    expect(maxConcurrent).toBe(1);
  });

  it('retries a failing key with growing backoff until it succeeds', async () => {
    const attempts: number[] = [];
    const done = deferred();
    const errors: unknown[] = [];
    const queue = new WorkQueue(
      async () => {
        attempts.push(Date.now());
        if (attempts.length < 3) throw new Error('not yet');
        done.resolve();
        return undefined;
      },
      { baseBackoffMs: 20, onError: (_key, error) => errors.push(error) },
    );
    queue.add('k');
    await done.promise;
    expect(attempts).toHaveLength(3);
    expect(errors).toHaveLength(2);
    const [first = 0, second = 0, third = 0] = attempts;
    expect(second - first).toBeGreaterThanOrEqual(15);
    expect(third - second).toBeGreaterThanOrEqual(35);
    await queue.stop();
  });

  it('requeues after the delay a reconcile asks for, and stops cleanly', async () => {
    let runs = 0;
    const second = deferred();
    const queue = new WorkQueue(async () => {
      runs++;
      if (runs === 2) second.resolve();
      return { requeueAfterMs: 10 };
    });
    queue.add('r');
    await second.promise;
    await queue.stop();
    const after = runs;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(runs).toBe(after);
  });
});

import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { retryingTooManyRequests } from './too-many-requests.ts';

const initializing = (retryAfterSeconds?: number) =>
  new ApiException(
    429,
    'Too Many Requests',
    JSON.stringify({
      kind: 'Status',
      message: 'storage is (re)initializing',
      code: 429,
      ...(retryAfterSeconds === undefined ? {} : { details: { retryAfterSeconds } }),
    }),
    {},
  );

/** An API whose `list` answers with the given failures first, then 'listed'. */
function flakyApi(failures: unknown[]) {
  let calls = 0;
  return {
    get calls() {
      return calls;
    },
    async list(prefix: string): Promise<string> {
      calls++;
      const failure = failures.shift();
      if (failure !== undefined) throw failure;
      return `${prefix}listed`;
    },
  };
}

describe('retry on 429', () => {
  it('sends the call again after the advised pause, capped, until it is answered', async () => {
    const waits: number[] = [];
    const api = flakyApi([initializing(1), initializing(30), initializing()]);
    const retrying = retryingTooManyRequests(api, {
      maxAttempts: 5,
      maxDelayMs: 2_000,
      sleep: async (ms) => void waits.push(ms),
    });
    expect(await retrying.list('all ')).toBe('all listed');
    expect(api.calls).toBe(4);
    expect(waits).toEqual([1_000, 2_000, 1_000]);
  });

  it('gives up after its attempts with the last 429, and passes other errors at once', async () => {
    const sleep = async () => {};
    const busy = flakyApi([initializing(1), initializing(1), initializing(1)]);
    await expect(
      retryingTooManyRequests(busy, { maxAttempts: 2, maxDelayMs: 1, sleep }).list(''),
    ).rejects.toMatchObject({
      code: 429,
    });
    expect(busy.calls).toBe(2);

    const conflict = new ApiException(409, 'Conflict', '{}', {});
    const refusing = flakyApi([conflict]);
    await expect(
      retryingTooManyRequests(refusing, { maxAttempts: 5, maxDelayMs: 1, sleep }).list(''),
    ).rejects.toBe(conflict);
    expect(refusing.calls).toBe(1);
  });
});

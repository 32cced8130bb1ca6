import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { retryingThrottled } from './retry-throttled.ts';

function failing(codes: number[]) {
  let calls = 0;
  return {
    get calls() {
      return calls;
    },
    async read(name: string): Promise<string> {
      const code = codes[calls++];
      if (code !== undefined) throw new ApiException(code, 'refused', {}, { 'retry-after': '0' });
      return `object ${name}`;
    },
  };
}

describe('retryingThrottled', () => {
  it('retries a call the API server throttled (429) until it is answered', async () => {
    const api = failing([429, 429]);
    expect(await retryingThrottled(api).read('a')).toBe('object a');
    expect(api.calls).toBe(3);
  });

  it('passes other errors through at once', async () => {
    const api = failing([409]);
    await expect(retryingThrottled(api).read('a')).rejects.toMatchObject({ code: 409 });
    expect(api.calls).toBe(1);
  });

  it('gives up after a bounded number of attempts', async () => {
    const api = failing(Array.from({ length: 20 }, () => 429));
    await expect(retryingThrottled(api).read('a')).rejects.toMatchObject({ code: 429 });
    expect(api.calls).toBe(6);
  });
});

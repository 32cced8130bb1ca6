// Retries kube-apiserver calls answered 429 Too Many Requests.
//
// The apiserver answers 429 "storage is (re)initializing" while it builds a
// custom resource's storage and watch cache (after a CRD is created or its
// schema changes, e.g. during an upgrade) and when priority and fairness
// sheds load. Either way the request was not processed, so sending it again is
// safe for writes too; the answer carries `retryAfterSeconds`.
// https://kubernetes.io/docs/reference/using-api/api-concepts/#retry-after
import { ApiException } from '@kubernetes/client-node';

export interface TooManyRequestsPolicy {
  /** Attempts in all, the first included. */
  readonly maxAttempts: number;
  /** Upper bound of one wait, whatever the server asks. */
  readonly maxDelayMs: number;
  readonly sleep?: (ms: number) => Promise<void>;
}

export const defaultTooManyRequestsPolicy: TooManyRequestsPolicy = { maxAttempts: 15, maxDelayMs: 2_000 };

/** The server's `retryAfterSeconds` in ms, or 1 s when the answer gives none. */
function retryAfterMs(error: ApiException<unknown>): number {
  const body: unknown = typeof error.body === 'string' ? safeJson(error.body) : error.body;
  const seconds = (body as { details?: { retryAfterSeconds?: unknown } } | undefined)?.details
    ?.retryAfterSeconds;
  return typeof seconds === 'number' && seconds > 0 ? seconds * 1000 : 1_000;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The same API client, each method retried on 429 within `policy`; any other
 * answer, and the last 429, reach the caller unchanged.
 */
export function retryingTooManyRequests<Api extends object>(
  api: Api,
  policy: TooManyRequestsPolicy = defaultTooManyRequestsPolicy,
): Api {
  const sleep = policy.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  return new Proxy(api, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        for (let attempt = 1; ; attempt++) {
          try {
            return await value.apply(target, args);
          } catch (error) {
            if (!(error instanceof ApiException) || error.code !== 429 || attempt >= policy.maxAttempts)
              throw error;
            await sleep(Math.min(retryAfterMs(error), policy.maxDelayMs));
          }
        }
      };
    },
  });
}

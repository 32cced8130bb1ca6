// The kube-apiserver answers 429 when its priority-and-fairness queues are full
// (https://kubernetes.io/docs/concepts/cluster-administration/flow-control/): the
// request was not processed, and client-go retries it after a pause.
// @kubernetes/client-node does not, so a busy API server would turn into 500s of
// the facade and failed reconciles; this wrapper retries such calls instead.
import { setTimeout as delay } from 'node:timers/promises';
import { ApiException } from '@kubernetes/client-node';

const attempts = 6;

function isThrottled(error: unknown): boolean {
  return error instanceof ApiException && error.code === 429;
}

/** The seconds the server asked to wait (Retry-After), else a growing pause with jitter. */
function pauseMs(error: unknown, attempt: number): number {
  const header =
    error instanceof ApiException ? (error.headers as Record<string, string>)['retry-after'] : undefined;
  const seconds = header === undefined || header === '' ? Number.NaN : Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds, 5) * 1_000 + Math.random() * 50;
  return Math.min(50 * 2 ** attempt, 1_000) + Math.random() * 50;
}

/**
 * `api` with every method retried on 429, at most `attempts` times. Safe for
 * every call: a throttled request has not been processed.
 */
export function retryingThrottled<Api extends object>(api: Api): Api {
  return new Proxy(api, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        for (let attempt = 1; ; attempt++) {
          try {
            return await value.apply(target, args);
          } catch (error) {
            if (!isThrottled(error) || attempt >= attempts) throw error;
            await delay(pauseMs(error, attempt));
          }
        }
      };
    },
  });
}

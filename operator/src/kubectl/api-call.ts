// Every request the plugin makes goes through `ask`, which turns what the API
// server (or the network) said into a sentence naming the request: a refusal
// says which verb on which resource in which namespace was not allowed, as
// RBAC sees it, so the person knows what to ask their cluster admin for.
import { ApiException } from '@kubernetes/client-node';
import type { Cluster } from './cluster.ts';
import { PluginError } from './plugin-error.ts';

export interface ApiRequest {
  /** The RBAC verb: get, list, patch, … */
  readonly verb: string;
  /** The resource as RBAC names it: `mirrors.tributary.dev`, `pods`, `pods/log`, `mirrors.tributary.dev/status`. */
  readonly resource: string;
  /** Absent: every namespace. */
  readonly namespace?: string | undefined;
  readonly name?: string | undefined;
  /** What to say when the named object does not exist. */
  readonly notFound?: string | undefined;
}

/** The API server's Status of a failed call (metav1.Status), as far as the plugin reads it. */
interface ApiStatus {
  readonly message?: string;
  readonly details?: { readonly name?: string };
}

function statusOf(error: ApiException<unknown>): ApiStatus {
  const body: unknown = error.body;
  if (typeof body === 'object' && body !== null) return body as ApiStatus;
  if (typeof body !== 'string') return {};
  try {
    const parsed: unknown = JSON.parse(body);
    return typeof parsed === 'object' && parsed !== null ? (parsed as ApiStatus) : { message: body };
  } catch {
    return { message: body.trim() };
  }
}

function where(request: ApiRequest): string {
  return request.namespace === undefined ? 'in any namespace' : `in namespace ${request.namespace}`;
}

/** The sentence for a failed request (exported for its unit test). */
export function describeFailure(
  cluster: Pick<Cluster, 'server' | 'context'>,
  request: ApiRequest,
  error: unknown,
): string {
  const target = `${request.resource}${request.name === undefined ? '' : ` ${JSON.stringify(request.name)}`}`;
  if (!(error instanceof ApiException)) {
    const cause = (error as { cause?: { message?: unknown } }).cause?.message;
    const reason = typeof cause === 'string' ? cause : (error as Error).message;
    return `cannot reach the cluster at ${cluster.server} (context ${cluster.context}): ${reason}`;
  }
  const status = statusOf(error);
  const message = status.message ?? '';
  switch (error.code) {
    case 401:
      return `the cluster at ${cluster.server} refused the credentials of context ${cluster.context} (401 Unauthorized)`;
    case 403:
      return `not allowed to ${request.verb} ${target} ${where(request)}${message ? `: ${message}` : ''}`;
    case 404:
      // A named object that is missing has its name in the Status; a resource
      // type the server does not serve (CRDs not installed) has none.
      if (request.name !== undefined && status.details?.name !== undefined)
        return request.notFound ?? `no ${target} ${where(request)}`;
      return `the cluster does not serve ${request.resource.split('/')[0]} (are Tributary's CRDs installed?)${message ? `: ${message}` : ''}`;
    case 409:
      return `${target} changed while the plugin acted on it: run the command again${message ? ` (${message})` : ''}`;
    default:
      return `${request.verb} ${target} ${where(request)}: ${error.code}${message ? ` ${message}` : ''}`;
  }
}

/** Runs one call to the API server; its failure becomes a PluginError describing the request. */
export async function ask<T>(cluster: Cluster, request: ApiRequest, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw new PluginError(describeFailure(cluster, request, error));
  }
}

/** As `ask`, for a named object that may be absent: undefined when the API server says it does not exist. */
export async function askIfExists<T>(
  cluster: Cluster,
  request: ApiRequest,
  call: () => Promise<T>,
): Promise<T | undefined> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ApiException && error.code === 404 && statusOf(error).details?.name !== undefined)
      return undefined;
    throw new PluginError(describeFailure(cluster, request, error));
  }
}

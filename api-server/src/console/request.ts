// What every console route needs of a request: an API client with the
// visitor's credentials, and whether a form post came from the console itself.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Role } from '../http/roles.ts';
import { ApiClient } from './api-client.ts';

export const htmlType = 'text/html; charset=utf-8';

/** The API as the visitor may use it: their credentials, and their address for the audit trail. */
export function client(app: FastifyInstance, request: FastifyRequest): ApiClient {
  return new ApiClient(app, request.headers.authorization, request.ip);
}

/** The visitor's role, which decides what the pages offer; the API calls decide what is done. */
export function roleOf(request: FastifyRequest): Role {
  return request.principal?.role ?? 'read';
}

/**
 * A browser sends stored Basic credentials with any form post, also one a
 * foreign page makes it send: only posts from the console's own pages act.
 */
export function isSameOrigin(request: FastifyRequest): boolean {
  const fetchSite = request.headers['sec-fetch-site'];
  if (fetchSite !== undefined) return fetchSite === 'same-origin' || fetchSite === 'none';
  const origin = request.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}

// Which role each route needs, and which routes change state and so write an
// audit entry: one table for the API and the console (docs/security.md,
// "Roles"). buildApp refuses to register a route this table does not name, so
// a new route cannot go unchecked.
//
// The console's pages and forms need only `read` here: they act through the
// same /api/v1 routes in process with the visitor's credentials
// (console/api-client.ts), which decide, so a form's refusal is the API's.
import type { FastifyRequest } from 'fastify';
import type { Principal } from './auth.ts';
import { ApiError } from './errors.ts';
import { type Role, roleAllows } from './roles.ts';
import type { StateChangeRequest } from './wire.ts';

export interface RouteAccess {
  /** The least role that may make the request (a handler may ask for more, as state_change does). */
  readonly role: Role;
  /** For a route that changes state: the action its audit entries record. */
  readonly audit?: string;
}

/** Answered to anyone: probes. (`/metrics` too, unless metricsAuth asks for credentials.) */
export const openRoutes: ReadonlySet<string> = new Set(['GET /healthz']);

export const routeAccess = {
  'GET /metrics': { role: 'read' },
  'GET /api/v1/openapi.json': { role: 'read' },
  'POST /api/v1/peers/create': { role: 'admin', audit: 'peer.create' },
  'GET /api/v1/peers/list': { role: 'read' },
  'GET /api/v1/peers/info/:peer_name': { role: 'read' },
  // It connects to the host it is given, with the credentials it is given: as creating a peer.
  'POST /api/v1/peers/validate': { role: 'admin' },
  // Catalog reads of a stored source peer, for picking tables.
  'GET /api/v1/peers/schemas': { role: 'read' },
  'GET /api/v1/peers/tables': { role: 'read' },
  'GET /api/v1/peers/columns': { role: 'read' },
  'POST /api/v1/flows/cdc/create': { role: 'admin', audit: 'mirror.create' },
  // Pausing and resuming operate; editing and dropping need admin (stateChangeAccess).
  'POST /api/v1/mirrors/state_change': { role: 'operate', audit: 'mirror.state_change' },
  'POST /api/v1/mirrors/tables/resync': { role: 'operate', audit: 'mirror.resync_table' },
  'GET /api/v1/mirrors/list': { role: 'read' },
  'POST /api/v1/mirrors/status': { role: 'read' },
  'POST /api/v1/mirrors/cdc/batches': { role: 'read' },
  'POST /api/v1/mirrors/logs': { role: 'read' },
  'POST /api/v1/scripts': { role: 'admin', audit: 'script.save' },
  'GET /api/v1/scripts/:id': { role: 'read' },
  // Runs the code it is given (bounded as a mirror's script is): as saving a script.
  'POST /api/v1/scripts/test': { role: 'admin' },
  // Who did what, from where: for those who administer the service.
  'GET /api/v1/audit': { role: 'admin' },
  'GET /': { role: 'read' },
  'GET /console/assets/:asset': { role: 'read' },
  'GET /mirrors/:name': { role: 'read' },
  'GET /mirrors/:name/history.json': { role: 'read' },
  'GET /mirrors/:name/confirm': { role: 'read' },
  'POST /mirrors/:name/action': { role: 'read' },
  'POST /mirrors/:name/tables/resync': { role: 'read' },
  'GET /peers': { role: 'read' },
  'GET /peers/:name': { role: 'read' },
  'GET /new/peer': { role: 'read' },
  'POST /new/peer': { role: 'read' },
  'GET /new/mirror': { role: 'read' },
  'POST /new/mirror': { role: 'read' },
  'GET /mirrors/:name/edit': { role: 'read' },
  'POST /mirrors/:name/edit': { role: 'read' },
  'GET /scripts': { role: 'read' },
  'GET /scripts/new': { role: 'read' },
  'GET /scripts/:id': { role: 'read' },
  'POST /scripts/:id': { role: 'read' },
  'GET /audit': { role: 'read' },
} as const satisfies Record<string, RouteAccess>;

/** `METHOD /route` of a request's route (HEAD as GET, which Fastify answers HEAD for); undefined for no route. */
export function routeKey(method: string, url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  return `${method === 'HEAD' ? 'GET' : method} ${url}`;
}

/** The access rule of a route, undefined for one the table does not name. */
export function accessOf(key: string | undefined): RouteAccess | undefined {
  return key !== undefined && Object.hasOwn(routeAccess, key)
    ? routeAccess[key as keyof typeof routeAccess]
    : undefined;
}

/** The refusal of a request its credential's role may not make; names what is needed, never a secret. */
export function forbiddenFor(principal: Principal, needed: Role, what: string): ApiError {
  return new ApiError(
    'forbidden',
    `user ${principal.user} has the ${principal.role} role; ${what} needs the ${needed} role`,
  );
}

/** Throws `forbidden` unless the request's credential has `needed` (the auth hook set the principal). */
export function requireRole(request: Pick<FastifyRequest, 'principal'>, needed: Role, what: string): void {
  const principal = request.principal;
  if (!principal) throw new ApiError('unauthenticated', 'authentication required');
  if (!roleAllows(principal.role, needed)) throw forbiddenFor(principal, needed, what);
}

/** What a state_change asks for, decided on the parsed request (so an enum by name or number alike). */
export type StateChange = 'pause' | 'resume' | 'edit' | 'drop';

export function stateChangeOf(body: StateChangeRequest): StateChange {
  if (body.requestedFlowState === 'STATUS_TERMINATING') return 'drop';
  if (body.requestedFlowState === 'STATUS_PAUSED') return 'pause';
  // STATUS_RUNNING: resume (or retry), or an edit that resumes.
  return body.flowConfigUpdate?.cdcFlowConfigUpdate ? 'edit' : 'resume';
}

/** Pausing and resuming (or retrying) operate a mirror; editing and dropping it administer it. */
export const stateChangeAccess = {
  pause: { role: 'operate', doing: 'pausing a mirror' },
  resume: { role: 'operate', doing: 'resuming a mirror' },
  edit: { role: 'admin', doing: 'editing a mirror' },
  drop: { role: 'admin', doing: 'dropping a mirror' },
} as const satisfies Record<StateChange, { role: Role; doing: string }>;

declare module 'fastify' {
  interface FastifyRequest {
    /** Who sent the request, once the auth hook checked its credential; null before, or on an open route. */
    principal: Principal | null;
  }
}

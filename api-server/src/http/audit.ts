// The audit trail: every answered request to a route that changes state
// (access.ts marks them), refused ones included, is one entry in the catalog
// and one `audit` line of the service log: who (the credential's user), what
// (the action and the name acted on), when, from where (request.ip, the address
// the failed-login limit counts: behind a trusted proxy, the forwarded one),
// and the status. It is written before the answer leaves, so a client that has
// its answer finds the entry. A request without a valid credential (401, 429)
// is not recorded: nobody can be named, and anyone could fill the trail.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Catalog, NewAuditEntry } from '../../../engine/src/index.ts';
import { accessOf, routeKey } from './access.ts';

/** What an audited request acted on, as its handler learnt it from the parsed body. */
export interface AuditSubject {
  /** A more precise action than the route's (state_change: `mirror.pause`, `mirror.drop`, …). */
  readonly action?: string;
  readonly object: string;
  readonly detail?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by an audited route's handler through noteAuditSubject; null until then. */
    auditSubject: AuditSubject | null;
  }
}

/** Names in entries are the request's, validated or not: bounded all the same. */
const maxNameLength = 200;
const bounded = (text: string | undefined) => (text === undefined ? null : text.slice(0, maxNameLength));

/** Records what the request acts on, for its audit entry; call it once the body is parsed. */
export function noteAuditSubject(request: FastifyRequest, subject: AuditSubject): void {
  request.auditSubject = subject;
}

/** The entry of an answered request, or undefined when it is not audited. */
export function auditEntryOf(request: FastifyRequest, status: number): NewAuditEntry | undefined {
  const key = routeKey(request.method, request.routeOptions.url);
  const access = accessOf(key);
  const principal = request.principal;
  if (!access?.audit || !principal || key === undefined) return undefined;
  const subject = request.auditSubject;
  return {
    at: new Date(),
    user: principal.user,
    role: principal.role,
    action: subject?.action ?? access.audit,
    route: key,
    object: bounded(subject?.object),
    detail: bounded(subject?.detail),
    clientAddress: request.ip,
    status,
  };
}

export function addAuditTrail(app: FastifyInstance, catalog: Catalog): void {
  app.decorateRequest('auditSubject', null);
  app.addHook('onSend', async (request, reply, payload) => {
    const entry = auditEntryOf(request, reply.statusCode);
    if (!entry) return payload;
    request.log.info({ audit: { ...entry, at: entry.at.toISOString() } }, 'audit');
    try {
      await catalog.appendAudit(entry);
    } catch (error) {
      // The change is made (or refused) already; the log line above keeps the record.
      request.log.error(
        { err: error, audit: { action: entry.action, user: entry.user } },
        'audit entry not stored',
      );
    }
    return payload;
  });
}

// Not in the interface: the audit trail (docs/api.md, "GET /api/v1/audit"),
// newest first, a page at a time, for admin credentials only (access.ts).
import type { FastifyInstance } from 'fastify';
import type { AuditEntry } from '../../../../engine/src/index.ts';
import type { FacadeContext } from '../context.ts';
import { ApiError, describeValidation } from '../errors.ts';
import { auditQuery } from '../wire.ts';

export function auditEntryToWire(entry: AuditEntry) {
  return {
    id: entry.id.toString(),
    time: entry.at.toISOString(),
    user: entry.user,
    role: entry.role,
    action: entry.action,
    route: entry.route,
    object: entry.object ?? '',
    detail: entry.detail ?? '',
    clientAddress: entry.clientAddress,
    status: entry.status,
  };
}

export function auditRoutes(app: FastifyInstance, context: FacadeContext): void {
  app.get('/api/v1/audit', async (request) => {
    const parsed = auditQuery.safeParse(request.query ?? {});
    if (!parsed.success) throw new ApiError('invalidArgument', describeValidation(parsed.error));
    const { page = 1, num_per_page: perPage = 50, user } = parsed.data;
    const { entries, total } = await context.catalog.listAudit({
      ...(user ? { user } : {}),
      offset: (page - 1) * perPage,
      limit: perPage,
    });
    return { entries: entries.map(auditEntryToWire), total, page };
  });
}

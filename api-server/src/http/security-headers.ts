// The headers every answer of the facade carries, console pages and API alike,
// so no other site can frame the console (a POST made inside a frame comes from
// the console's own origin and would pass its same-origin check) or make a
// browser read an answer as another type than it is.
import type { FastifyInstance } from 'fastify';

/**
 * The console loads scripts and styles from /console/assets/ only (no inline
 * code), and htmx and chart.js fetch from the facade itself, so `'self'` is all
 * it needs. `frame-ancestors` is the standard form of `X-Frame-Options`; both are
 * sent for browsers that know only the older one.
 * https://developer.mozilla.org/docs/Web/HTTP/Headers/Content-Security-Policy
 */
export const contentSecurityPolicy = [
  "default-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

export const securityHeaders = {
  'content-security-policy': contentSecurityPolicy,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
} as const;

/** Adds the headers to every answer, errors, 401s and 404s included. */
export function addSecurityHeaders(app: FastifyInstance): void {
  app.addHook('onSend', async (_request, reply, payload) => {
    reply.headers(securityHeaders);
    return payload;
  });
}

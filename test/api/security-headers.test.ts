// Every answer of the facade, console page or API, carries the headers that stop
// another site from framing the console or a browser from sniffing a type, and
// the console's pages load no inline code their Content-Security-Policy would refuse.
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomSuffix } from '../support/databases.ts';
import { createFacade, type Facade } from '../support/facade.ts';

const expected = {
  'content-security-policy':
    "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

const suffix = randomSuffix();

/** One request of each kind of route and answer: public, API, console page, asset, form, error. */
const requests: readonly {
  readonly what: string;
  readonly options: InjectOptions;
  readonly status: number;
}[] = [
  { what: 'health probe', options: { method: 'GET', url: '/healthz' }, status: 200 },
  { what: 'metrics', options: { method: 'GET', url: '/metrics' }, status: 200 },
  { what: 'OpenAPI document', options: { method: 'GET', url: '/api/v1/openapi.json' }, status: 200 },
  { what: 'API read', options: { method: 'GET', url: '/api/v1/peers/list' }, status: 200 },
  {
    what: 'API error',
    options: { method: 'POST', url: '/api/v1/mirrors/status', payload: { flowJobName: `none-${suffix}` } },
    status: 404,
  },
  {
    what: 'unparseable body',
    options: {
      method: 'POST',
      url: '/api/v1/peers/create',
      payload: '{',
      headers: { 'content-type': 'application/json' },
    },
    status: 400,
  },
  {
    what: 'missing credentials',
    options: { method: 'GET', url: '/api/v1/peers/list', headers: { authorization: '' } },
    status: 401,
  },
  { what: 'unknown route', options: { method: 'GET', url: '/api/v1/nothing' }, status: 404 },
  { what: 'mirror list page', options: { method: 'GET', url: '/' }, status: 200 },
  { what: 'peers page', options: { method: 'GET', url: '/peers' }, status: 200 },
  { what: 'scripts page', options: { method: 'GET', url: '/scripts' }, status: 200 },
  { what: 'new script page', options: { method: 'GET', url: '/scripts/new' }, status: 200 },
  { what: 'audit page', options: { method: 'GET', url: '/audit' }, status: 200 },
  { what: 'API audit read', options: { method: 'GET', url: '/api/v1/audit' }, status: 200 },
  {
    what: 'confirmation of an unknown mirror',
    options: { method: 'GET', url: `/mirrors/none-${suffix}/confirm?action=drop` },
    status: 404,
  },
  { what: 'console asset', options: { method: 'GET', url: '/console/assets/htmx.min.js' }, status: 200 },
  {
    what: 'console style sheet',
    options: { method: 'GET', url: '/console/assets/console.css' },
    status: 200,
  },
  { what: 'unknown asset', options: { method: 'GET', url: '/console/assets/none.js' }, status: 404 },
  {
    what: 'form posted from another site',
    options: {
      method: 'POST',
      url: `/mirrors/none-${suffix}/action`,
      payload: 'action=drop',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site' },
    },
    status: 403,
  },
];

describe('security headers', () => {
  let facade: Facade;
  beforeAll(async () => {
    facade = await createFacade();
  });
  afterAll(async () => facade?.close());

  it.each(requests)('are sent with the $what', async ({ options, status }) => {
    const answer = await facade.request(options);
    expect(answer.statusCode).toBe(status);
    expect(answer.headers).toMatchObject(expected);
  });

  it('are not needed by the console: its pages load no inline style or script', async () => {
    const pages: LightMyRequestResponse[] = await Promise.all(
      ['/', '/peers', '/scripts', '/scripts/new', '/audit'].map((url) =>
        facade.request({ method: 'GET', url }),
      ),
    );
    for (const page of pages) {
      expect(page.body).not.toMatch(/<style|\sstyle=|\son[a-z]+=|javascript:/i);
      // Every script element has a source on the facade.
      for (const tag of page.body.match(/<script[^>]*>/g) ?? [])
        expect(tag).toMatch(/^<script src="\/console\/assets\/[^"]+" defer>$/);
      expect(page.body).toContain('<link rel="stylesheet" href="/console/assets/console.css">');
    }
  });
});

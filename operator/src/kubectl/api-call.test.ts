import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { describeFailure } from './api-call.ts';

const cluster = { server: 'https://k8s.example:6443', context: 'prod' };
const status = (code: number, body: object) => new ApiException(code, 'failed', JSON.stringify(body), {});

describe('a failed request, in a sentence', () => {
  const patch = { verb: 'patch', resource: 'mirrors.tributary.dev', namespace: 'shop', name: 'orders' };

  it('names the verb, resource and namespace RBAC refused', () => {
    const refused = status(403, {
      message: 'mirrors.tributary.dev "orders" is forbidden: User "ann" cannot patch resource "mirrors"',
    });
    expect(describeFailure(cluster, patch, refused)).toBe(
      'not allowed to patch mirrors.tributary.dev "orders" in namespace shop: mirrors.tributary.dev "orders" is forbidden: User "ann" cannot patch resource "mirrors"',
    );
    expect(describeFailure(cluster, { verb: 'list', resource: 'mirrors.tributary.dev' }, refused)).toMatch(
      /^not allowed to list mirrors.tributary.dev in any namespace: /,
    );
  });

  it('tells a missing object from a resource the cluster does not serve', () => {
    const missing = status(404, { message: 'not found', details: { name: 'orders' } });
    expect(
      describeFailure(cluster, { ...patch, notFound: 'no mirror "orders" in namespace shop' }, missing),
    ).toBe('no mirror "orders" in namespace shop');
    const unserved = new ApiException(404, 'failed', '404 page not found', {});
    expect(describeFailure(cluster, patch, unserved)).toBe(
      "the cluster does not serve mirrors.tributary.dev (are Tributary's CRDs installed?): 404 page not found",
    );
  });

  it('says which credentials and which server', () => {
    expect(describeFailure(cluster, patch, status(401, {}))).toBe(
      'the cluster at https://k8s.example:6443 refused the credentials of context prod (401 Unauthorized)',
    );
    const refusedConnection = new TypeError('fetch failed', {
      cause: new Error('connect ECONNREFUSED 10.0.0.1:6443'),
    });
    expect(describeFailure(cluster, patch, refusedConnection)).toBe(
      'cannot reach the cluster at https://k8s.example:6443 (context prod): connect ECONNREFUSED 10.0.0.1:6443',
    );
  });

  it('asks for another try after a conflicting change', () => {
    expect(describeFailure(cluster, patch, status(409, { message: 'the object has been modified' }))).toBe(
      'mirrors.tributary.dev "orders" changed while the plugin acted on it: run the command again (the object has been modified)',
    );
  });
});

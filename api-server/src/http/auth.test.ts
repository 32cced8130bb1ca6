import { describe, expect, it } from 'vitest';
import { stateChangeAccess, stateChangeOf } from './access.ts';
import { Authenticator } from './auth.ts';
import { hashSecret } from './credential-hash.ts';
import { roleAllows, roles } from './roles.ts';

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('authenticator', async () => {
  const password = 'the-api-password-0123';
  const credentials = [
    { user: 'grafana', role: 'read' as const, hash: await hashSecret('grafana-token-012345') },
    { user: 'oncall', role: 'operate' as const, hash: await hashSecret('oncall-token-0123456') },
  ];
  const withUser = new Authenticator({ mode: 'basic', password, user: 'svc', credentials });
  const withoutUser = new Authenticator({ mode: 'basic', password, credentials });

  it('takes the API password as the admin credential, with an empty user or the configured one', async () => {
    expect(await withUser.authenticate(basic('', password))).toEqual({ user: 'svc', role: 'admin' });
    expect(await withUser.authenticate(basic('svc', password))).toEqual({ user: 'svc', role: 'admin' });
    expect(await withoutUser.authenticate(basic('', password))).toEqual({
      user: 'api-password',
      role: 'admin',
    });
  });

  it('takes each credential with its own token and role', async () => {
    expect(await withUser.authenticate(basic('grafana', 'grafana-token-012345'))).toEqual({
      user: 'grafana',
      role: 'read',
    });
    expect(await withUser.authenticate(basic('oncall', 'oncall-token-0123456'))).toEqual({
      user: 'oncall',
      role: 'operate',
    });
  });

  it('refuses a wrong token, another credential’s token, an unknown user and the API password under a file user', async () => {
    for (const header of [
      basic('grafana', 'grafana-token-012346'),
      basic('grafana', 'oncall-token-0123456'),
      basic('oncall', password),
      basic('nobody', 'grafana-token-012345'),
      basic('', 'grafana-token-012345'),
      basic('svc', 'oncall-token-0123456'),
      'Bearer grafana-token-012345',
      undefined,
    ]) {
      expect(await withUser.authenticate(header), header).toBeUndefined();
    }
  });

  it('still refuses a wrong token of a user whose right token was just accepted', async () => {
    expect(await withUser.authenticate(basic('oncall', 'oncall-token-0123456'))).toBeDefined();
    expect(await withUser.authenticate(basic('oncall', 'oncall-token-0123457'))).toBeUndefined();
    expect(await withUser.authenticate(basic('oncall', 'oncall-token-0123456'))).toBeDefined();
  });

  it('names everyone anonymous admin when authentication is disabled', async () => {
    expect(await new Authenticator({ mode: 'disabled' }).authenticate(undefined)).toEqual({
      user: 'anonymous',
      role: 'admin',
    });
  });
});

describe('roles', () => {
  it('each allow what the ones before allow, and more', () => {
    const allowed = roles.map((held) => roles.filter((needed) => roleAllows(held, needed)));
    expect(allowed).toEqual([['read'], ['read', 'operate'], ['read', 'operate', 'admin']]);
  });

  it('ask for admin to drop or edit a mirror through state_change, operate to pause or resume it', () => {
    const roleOf = (body: Parameters<typeof stateChangeOf>[0]) => stateChangeAccess[stateChangeOf(body)].role;
    const edit = { cdcFlowConfigUpdate: { batch_size: 10 } };
    expect(roleOf({ flowJobName: 'm', requestedFlowState: 'STATUS_PAUSED' })).toBe('operate');
    expect(roleOf({ flowJobName: 'm', requestedFlowState: 'STATUS_RUNNING' })).toBe('operate');
    expect(roleOf({ flowJobName: 'm', requestedFlowState: 'STATUS_TERMINATING' })).toBe('admin');
    expect(roleOf({ flowJobName: 'm', requestedFlowState: 'STATUS_RUNNING', flowConfigUpdate: edit })).toBe(
      'admin',
    );
    // An edit asked with a pause is refused as invalid by the route; the role asked is the pause's.
    expect(
      stateChangeOf({ flowJobName: 'm', requestedFlowState: 'STATUS_PAUSED', flowConfigUpdate: edit }),
    ).toBe('pause');
  });
});

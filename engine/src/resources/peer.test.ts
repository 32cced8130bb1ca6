import { describe, expect, it } from 'vitest';
import {
  analyticsConfigSchema,
  analyticsHttpPort,
  joinPeerSecrets,
  maskPeerSecrets,
  type Peer,
  peerSchema,
  splitPeerSecrets,
} from './peer.ts';

const relational: Peer = peerSchema.parse({
  name: 'source',
  kind: 'relational',
  config: {
    host: 'db',
    port: 5432,
    user: 'u',
    password: 'pw',
    database: 'd',
    sshConfig: { host: 'bastion', port: 22, user: 'jump', privateKey: 'KEY' },
  },
});

describe('peer secrets', () => {
  it('split and join round-trip and keep secrets out of the config', () => {
    const split = splitPeerSecrets(relational);
    expect(split.secrets).toEqual({ password: 'pw', 'sshConfig.privateKey': 'KEY' });
    expect(JSON.stringify(split.config)).not.toMatch(/pw|KEY/);
    expect(joinPeerSecrets(split)).toEqual(relational);
  });

  it('masks every secret present and nothing else', () => {
    const masked = maskPeerSecrets(relational);
    expect(masked.config).toMatchObject({
      host: 'db',
      password: '********',
      sshConfig: { host: 'bastion', privateKey: '********' },
    });
    expect((masked.config.sshConfig as Record<string, unknown>).password).toBeUndefined();
  });

  it('takes only the kind secret fields from the secrets, never a configured field', () => {
    const split = splitPeerSecrets(relational);
    const joined = joinPeerSecrets({
      ...split,
      secrets: {
        ...split.secrets,
        host: 'attacker.example',
        'sshConfig.host': 'elsewhere',
        secretAccessKey: 'x',
      },
    });
    expect(joined.config).toMatchObject({ host: 'db', sshConfig: { host: 'bastion' } });
    expect(joined).toEqual(relational);
  });

  it('refuses to join a peer whose required secret is missing', () => {
    const split = splitPeerSecrets(relational);
    expect(() => joinPeerSecrets({ ...split, secrets: {} })).toThrow();
  });
});

describe('analyticsHttpPort', () => {
  const base = { host: 'ch', user: 'u', password: 'p', database: 'd' };
  it('maps the standard native ports and honours an explicit HTTP port', () => {
    expect(analyticsHttpPort(analyticsConfigSchema.parse({ ...base, port: 9000 }))).toBe(8123);
    expect(analyticsHttpPort(analyticsConfigSchema.parse({ ...base, port: 9440 }))).toBe(8443);
    expect(analyticsHttpPort(analyticsConfigSchema.parse({ ...base, port: 19000, httpPort: 18123 }))).toBe(
      18123,
    );
    expect(analyticsHttpPort(analyticsConfigSchema.parse({ ...base, port: 19000 }))).toBeUndefined();
  });
});

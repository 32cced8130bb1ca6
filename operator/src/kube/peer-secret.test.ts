import type { V1Secret } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  invalidPeerMessage,
  PeerSecretError,
  peerSecretLabel,
  peerSecretPeersAnnotation,
  peerSecretsFromSecret,
} from './peer-secret.ts';

const reader = { name: 'p', objectName: 'p' };

const encoded = (data: Record<string, string>) =>
  Object.fromEntries(
    Object.entries(data).map(([key, value]) => [key, Buffer.from(value).toString('base64')]),
  );

const secret = (
  data: Record<string, string>,
  labels: Record<string, string> = { [peerSecretLabel]: 'true' },
  annotations: Record<string, string> = { [peerSecretPeersAnnotation]: 'p' },
) => ({ metadata: { name: 's', labels, annotations }, data: encoded(data) }) satisfies V1Secret;

function problemOf(call: () => unknown): PeerSecretError {
  try {
    call();
  } catch (error) {
    if (error instanceof PeerSecretError) return error;
    throw error;
  }
  throw new Error('expected a PeerSecretError');
}

describe('peerSecretsFromSecret', () => {
  it('reads only the secret fields of the kind', () => {
    const secrets = peerSecretsFromSecret(
      reader,
      'relational',
      { name: 's' },
      secret({ password: 'pw', host: 'evil', user: 'other', privateKey: 'K', 'sshConfig.password': 'sp' }),
    );
    expect(secrets).toEqual({ password: 'pw', 'sshConfig.password': 'sp' });
  });

  it('follows the key mapping', () => {
    const secrets = peerSecretsFromSecret(
      reader,
      'stream',
      { name: 's', keys: { password: 'kafka-password' } },
      secret({ 'kafka-password': 'kp', password: 'not this' }),
    );
    expect(secrets).toEqual({ password: 'kp' });
  });

  it('refuses a Secret without the label, naming the Secret and the label', () => {
    const error = problemOf(() =>
      peerSecretsFromSecret(reader, 'relational', { name: 'app-db' }, secret({ password: 'pw' }, {})),
    );
    expect(error.reason).toBe('SecretNotAllowed');
    expect(error.message).toContain('app-db');
    expect(error.message).toContain(peerSecretLabel);
    expect(error.message).not.toContain('pw"');
    // A label of another value is no consent either.
    expect(
      problemOf(() =>
        peerSecretsFromSecret(
          reader,
          'relational',
          { name: 'app-db' },
          secret({ password: 'pw' }, { [peerSecretLabel]: 'false' }),
        ),
      ).reason,
    ).toBe('SecretNotAllowed');
  });

  it('refuses a Secret not bound to the Peer, naming the Secret, the Peer and the fix', () => {
    const other = { name: 'mallory-api-name', objectName: 'mallory' };
    const error = problemOf(() =>
      peerSecretsFromSecret(
        other,
        'relational',
        { name: 'app-db' },
        secret({ password: 'pw' }, undefined, { [peerSecretPeersAnnotation]: 'shop, warehouse' }),
      ),
    );
    expect(error.reason).toBe('SecretNotBound');
    expect(error.message).toContain('Secret app-db is not bound to Peer mallory');
    expect(error.message).toContain(
      `kubectl annotate secret app-db --overwrite ${peerSecretPeersAnnotation}=`,
    );
    // Neither the value nor the Peers it is bound to.
    expect(error.message).not.toContain('pw"');
    expect(error.message).not.toContain('warehouse');
    // A name in the list (spaces around commas allowed) is bound; no annotation binds nobody.
    expect(
      peerSecretsFromSecret(
        { name: 'w', objectName: 'warehouse' },
        'relational',
        { name: 'app-db' },
        secret({ password: 'pw' }, undefined, { [peerSecretPeersAnnotation]: 'shop, warehouse' }),
      ),
    ).toEqual({ password: 'pw' });
    expect(
      problemOf(() => peerSecretsFromSecret(reader, 'relational', { name: 's' }, secret({}, undefined, {})))
        .reason,
    ).toBe('SecretNotBound');
  });

  it("binds a facade's own Secret to its Peer by name, and only with the managed-by label", () => {
    const own = (labels: Record<string, string>) => ({
      metadata: { name: 'tributary-peer-shop', labels: { [peerSecretLabel]: 'true', ...labels } },
      data: encoded({ password: 'pw' }),
    });
    const shop = { name: 'shop', objectName: 'shop' };
    const managed = { 'app.kubernetes.io/managed-by': 'tributary' };
    expect(peerSecretsFromSecret(shop, 'relational', { name: 'tributary-peer-shop' }, own(managed))).toEqual({
      password: 'pw',
    });
    expect(
      problemOf(() => peerSecretsFromSecret(shop, 'relational', { name: 'tributary-peer-shop' }, own({})))
        .reason,
    ).toBe('SecretNotBound');
    expect(
      problemOf(() =>
        peerSecretsFromSecret(
          { name: 'evil', objectName: 'evil' },
          'relational',
          { name: 'tributary-peer-shop' },
          own(managed),
        ),
      ).reason,
    ).toBe('SecretNotBound');
  });

  it('refuses a mapping to a field of another kind or to a key the Secret lacks', () => {
    expect(
      problemOf(() =>
        peerSecretsFromSecret(
          reader,
          'stream',
          { name: 's', keys: { secretAccessKey: 'k' } },
          secret({ k: 'v' }),
        ),
      ).message,
    ).toContain('secretAccessKey');
    const missing = problemOf(() =>
      peerSecretsFromSecret(reader, 'relational', { name: 's', keys: { password: 'pass' } }, secret({})),
    );
    expect(missing.reason).toBe('SecretInvalid');
    expect(missing.message).toContain('no key pass');
  });
});

describe('invalidPeerMessage', () => {
  const parse = (config: unknown) => {
    const result = z
      .object({ servers: z.array(z.string()).min(1), password: z.string() })
      .strict()
      .safeParse(config);
    if (result.success) throw new Error('expected a refusal');
    return result.error;
  };

  it('names missing or invalid fields and points at the Secret', () => {
    expect(invalidPeerMessage('stream', 'kafka-creds', parse({ servers: [] }))).toBe(
      'the spec with Secret kafka-creds is not a valid stream peer: servers, password missing or invalid; a required secret field may be missing from the Secret',
    );
  });

  it('names unknown fields as written by a newer version, not as a Secret problem, and shows no value', () => {
    const message = invalidPeerMessage(
      'stream',
      'kafka-creds',
      parse({ servers: ['b:9092'], password: 'hunter2-secret', compression: 'zstd' }),
    );
    expect(message).toBe(
      'the spec with Secret kafka-creds is not a valid stream peer: unknown field(s) compression: written by a newer version of Tributary than this one?',
    );
    expect(message).not.toContain('hunter2');
    expect(message).not.toContain('zstd');
  });
});

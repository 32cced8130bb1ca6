import { describe, expect, it } from 'vitest';
import { redacted, redactObject, redactPatterns, redactSecret, scrubText, secretForms } from './redact.ts';

describe('redaction for support bundles', () => {
  it('replaces the values of fields named like secrets, and of env vars so named', () => {
    const object = {
      metadata: { labels: { 'tributary.dev/peer-secret': 'true' }, managedFields: [{ manager: 'kubectl' }] },
      spec: {
        relational: {
          host: 'db',
          user: 'replicator',
          password: 'hunter22',
          sshConfig: { privateKey: 'KEY' },
        },
        secretRef: { name: 'shop-db' },
        env: [
          { name: 'DB_PASSWORD', value: 'hunter22' },
          { name: 'TMPDIR', value: '/tmp' },
          { name: 'API_TOKEN', valueFrom: { secretKeyRef: { name: 's', key: 'token' } } },
        ],
      },
    };
    expect(redactObject(object)).toEqual({
      metadata: { labels: { 'tributary.dev/peer-secret': 'true' } },
      spec: {
        relational: {
          host: 'db',
          user: 'replicator',
          password: redacted,
          sshConfig: { privateKey: redacted },
        },
        secretRef: { name: 'shop-db' },
        env: [
          { name: 'DB_PASSWORD', value: redacted },
          { name: 'TMPDIR', value: '/tmp' },
          { name: 'API_TOKEN', valueFrom: { secretKeyRef: { name: 's', key: 'token' } } },
        ],
      },
    });
  });

  it('redacts inside a string that holds a JSON document, and passwords in URLs and text', () => {
    const config = JSON.stringify({
      catalogUrl: 'postgres://tributary:cat%40pw@db/catalog',
      peer: { password: 'p4ss' },
    });
    expect(redactObject({ config })).toEqual({
      config: JSON.stringify({
        catalogUrl: `postgres://tributary:${redacted}@db/catalog`,
        peer: { password: redacted },
      }),
    });
    expect(redactPatterns('connect to postgres://u:s3cret@h:5432/d failed; password=abc token: "x y"')).toBe(
      `connect to postgres://u:${redacted}@h:5432/d failed; password=${redacted} token: "${redacted}"`,
    );
  });

  it('keeps a Secret’s keys and sizes, never its values or last applied configuration', () => {
    const secret = {
      metadata: {
        name: 'shop-db',
        annotations: {
          'kubectl.kubernetes.io/last-applied-configuration': '{"stringData":{"password":"hunter22"}}',
          note: 'kept',
        },
      },
      data: { password: Buffer.from('hunter22').toString('base64') },
    };
    const { object, values } = redactSecret(secret);
    expect(object).toEqual({
      metadata: { name: 'shop-db', annotations: { note: 'kept' } },
      data: { password: `${redacted}: 8 bytes` },
    });
    expect(values).toContain('hunter22');
    expect(JSON.stringify(object)).not.toContain('hunter22');
  });

  it('scrubs known secret values in their encodings, and the secrets inside a config document', () => {
    const document = JSON.stringify({ catalogUrl: 'postgres://u:c%2Fpw@db/c', password: 'inner-secret' });
    const forms = secretForms(document);
    expect(forms).toEqual(expect.arrayContaining(['inner-secret', 'c%2Fpw', 'c/pw']));
    const secrets = [...forms, ...secretForms('hunter22')];
    const text = `a log line with hunter22, ${Buffer.from('hunter22').toString('base64')}, inner-secret and c/pw`;
    expect(scrubText(text, secrets)).toBe(
      `a log line with ${redacted}, ${redacted}, ${redacted} and ${redacted}`,
    );
    // Too short to scrub from free text without wrecking it.
    expect(scrubText('a b c', ['a'])).toBe('a b c');
  });
});

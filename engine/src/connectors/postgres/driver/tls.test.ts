import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseRootCa, postgresTls } from './tls.ts';

const directory = mkdtempSync(join(tmpdir(), 'tributary-tls-test-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

function selfSignedPem(name: string): string {
  const key = join(directory, `${name}.key`);
  const crt = join(directory, `${name}.crt`);
  execFileSync('openssl', ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
  execFileSync('openssl', [
    'req',
    '-x509',
    '-new',
    '-key',
    key,
    '-subj',
    `/CN=${name}`,
    '-days',
    '1',
    '-out',
    crt,
  ]);
  return readFileSync(crt, 'utf8');
}

const host = 'db.internal';

describe('postgresTls', () => {
  it('prefers TLS without verification when nothing is set, as libpq does', () => {
    const tls = postgresTls({ host });
    expect(tls.mode).toBe('prefer');
    expect(tls.ssl).toMatchObject({ rejectUnauthorized: false, servername: host });
  });

  it('never uses TLS with disable_tls', () => {
    expect(postgresTls({ host, disableTls: true })).toMatchObject({ mode: 'disable', ssl: false });
  });

  it('verifies chain and name with require_tls or root_ca', () => {
    const ca = selfSignedPem('ca-one');
    const withCa = postgresTls({ host, rootCa: ca });
    expect(withCa.mode).toBe('verify-full');
    expect(withCa.ssl).toMatchObject({ rejectUnauthorized: true, ca: [ca.trim()] });
    const publicCas = postgresTls({ host, requireTls: true });
    expect(publicCas.mode).toBe('verify-full');
    expect(publicCas.ssl).not.toHaveProperty('ca');
  });

  it('checks the certificate against tls_host, not the dialled address', () => {
    const tls = postgresTls({ host: '10.0.0.7', tlsHost: 'db.example.com', requireTls: true });
    expect(tls.serverName).toBe('db.example.com');
    const check = tls.ssl ? tls.ssl.checkServerIdentity : undefined;
    expect(check).toBeTypeOf('function');
    const certificate = { subject: { CN: 'db.example.com' }, subjectaltname: 'DNS:db.example.com' };
    // biome-ignore lint/suspicious/noExplicitAny: a minimal certificate shape is enough for the name check
    expect(check?.('127.0.0.1', certificate as any)).toBeUndefined();
    const other = { subject: { CN: 'other' }, subjectaltname: 'DNS:other.example.com' };
    // biome-ignore lint/suspicious/noExplicitAny: as above
    expect(check?.('db.example.com', other as any)).toBeInstanceOf(Error);
  });

  it('sends no SNI for an address', () => {
    expect(postgresTls({ host: '127.0.0.1', requireTls: true }).ssl).not.toHaveProperty('servername');
  });

  it('encrypts without verifying with skip_cert_verification', () => {
    const tls = postgresTls({ host, skipCertVerification: true });
    expect(tls.mode).toBe('require');
    expect(tls.ssl).toMatchObject({ rejectUnauthorized: false });
  });

  it('refuses contradictions, naming the fields', () => {
    expect(() => postgresTls({ host, disableTls: true, requireTls: true })).toThrow(
      /disable_tls with require_tls/,
    );
    expect(() => postgresTls({ host, disableTls: true, rootCa: 'x' })).toThrow(/disable_tls with root_ca/);
    expect(() => postgresTls({ host, skipCertVerification: true, rootCa: 'x' })).toThrow(
      /skip_cert_verification with root_ca/,
    );
  });
});

describe('parseRootCa', () => {
  it('reads every certificate of a bundle', () => {
    const bundle = `${selfSignedPem('ca-a')}\n${selfSignedPem('ca-b')}`;
    expect(parseRootCa(bundle)).toHaveLength(2);
  });

  it('refuses text that is not PEM certificates', () => {
    expect(() => parseRootCa('not a certificate')).toThrow(/root_ca: expected PEM certificates/);
    expect(() => parseRootCa('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----')).toThrow(
      /root_ca: certificate 1 of 1 is not valid/,
    );
  });
});

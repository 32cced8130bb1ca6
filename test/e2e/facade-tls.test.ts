// The facade over HTTPS: `tributary standalone` with a certificate and key
// from files, reached with the test CA, and a renewed certificate served once
// the files are rewritten, without a restart.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/databases.ts';
import { freePort } from '../support/standalone-process.ts';
import { repoRoot } from '../support/testenv.ts';

const password = 'facade-tls-test-password';

/** A CA and certificates it signs for 127.0.0.1, made with openssl in `dir`. */
function issue(dir: string, name: string, ca: string | undefined, subject: string): void {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', `${name}.key`);
  if (!ca) {
    openssl(
      'req',
      '-x509',
      '-new',
      '-key',
      `${name}.key`,
      '-subj',
      subject,
      '-days',
      '2',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign',
      '-out',
      `${name}.crt`,
    );
    return;
  }
  openssl('req', '-new', '-key', `${name}.key`, '-subj', subject, '-out', `${name}.csr`);
  writeFileSync(join(dir, `${name}.ext`), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  openssl(
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.crt`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.crt`,
  );
}

interface Answer {
  readonly status: number;
  readonly subject: string;
}

/** GET over a new TLS connection, trusting only `ca`; the status and the served certificate's CN. */
function get(port: number, path: string, ca: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        ca,
        agent: false,
        headers: { authorization: `Basic ${Buffer.from(`:${password}`).toString('base64')}` },
        timeout: 5_000,
      },
      (response) => {
        const certificate = (
          response.socket as unknown as { getPeerCertificate(): { subject: { CN: string } } }
        ).getPeerCertificate();
        response.resume();
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, subject: certificate.subject.CN }),
        );
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

describe('the facade over TLS', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tributary-facade-tls-'));
  let child: ChildProcess | undefined;
  let port = 0;
  let ca: Buffer;

  beforeAll(async () => {
    issue(dir, 'ca', undefined, '/CN=tributary-test-facade-ca');
    issue(dir, 'first', 'ca', '/CN=first');
    issue(dir, 'second', 'ca', '/CN=second');
    issue(dir, 'stranger-ca', undefined, '/CN=tributary-test-stranger-ca');
    ca = readFileSync(join(dir, 'ca.crt'));
    writeFileSync(join(dir, 'tls.crt'), readFileSync(join(dir, 'first.crt')));
    writeFileSync(join(dir, 'tls.key'), readFileSync(join(dir, 'first.key')));
    port = await freePort();
    child = spawn(
      process.execPath,
      [
        join(repoRoot, 'bin', 'tributary.ts'),
        'standalone',
        '--data-dir',
        'memory://',
        '--port',
        String(port),
      ],
      {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: {
          ...process.env,
          TRIBUTARY_API_PASSWORD: password,
          TRIBUTARY_TLS_CERT_FILE: join(dir, 'tls.crt'),
          TRIBUTARY_TLS_KEY_FILE: join(dir, 'tls.key'),
          TRIBUTARY_LOG_LEVEL: 'warn',
        },
      },
    );
    await waitFor(
      async () => {
        if (child?.exitCode !== null) throw new Error(`standalone exited with ${child?.exitCode}`);
        return (await get(port, '/healthz', ca).catch(() => undefined))?.status === 200;
      },
      30_000,
      'standalone to listen over TLS',
    );
  });

  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child?.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers /api/v1 over HTTPS with the certificate of its files, verified with the CA', async () => {
    expect(await get(port, '/api/v1/openapi.json', ca)).toEqual({ status: 200, subject: 'first' });
    // A client that does not trust the CA refuses the server.
    await expect(get(port, '/healthz', readFileSync(join(dir, 'stranger-ca.crt')))).rejects.toThrow(
      /certificate/,
    );
    // Plain HTTP is not served on the TLS port.
    const plain = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (response) => response.status,
      () => 'refused',
    );
    expect(plain).not.toBe(200);
  });

  it('serves a renewed certificate after its files change, without a restart', async () => {
    // As the kubelet updates a Secret volume: new files swapped in, not edited in place.
    writeFileSync(join(dir, 'tls.key.new'), readFileSync(join(dir, 'second.key')));
    writeFileSync(join(dir, 'tls.crt.new'), readFileSync(join(dir, 'second.crt')));
    renameSync(join(dir, 'tls.key.new'), join(dir, 'tls.key'));
    renameSync(join(dir, 'tls.crt.new'), join(dir, 'tls.crt'));
    await waitFor(
      async () => (await get(port, '/healthz', ca)).subject === 'second',
      30_000,
      'the renewed certificate',
    );
    expect(await get(port, '/api/v1/openapi.json', ca)).toEqual({ status: 200, subject: 'second' });
    expect(child?.exitCode).toBeNull();
  });
});

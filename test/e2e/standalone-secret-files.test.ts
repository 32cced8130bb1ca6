// Standalone mode: a peer's password from a file under --peer-secrets-dir takes
// the place of the one sent to the API, at the creation check and at every use.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, randomSuffix, type TestDatabase } from '../support/databases.ts';
import { type StandaloneProcess, startStandalone } from '../support/standalone-process.ts';

const apiPassword = 'standalone-secret-files-password';

describe('standalone peer secrets from files', () => {
  const root = mkdtempSync(join(tmpdir(), 'tributary-secret-files-'));
  const secretsDir = join(root, 'secrets');
  const suffix = randomSuffix();
  const fromFile = `from_file_${suffix}`;
  const inline = `inline_${suffix}`;
  let database: TestDatabase;
  let service: StandaloneProcess | undefined;

  const create = (name: string) => {
    const { host, port, user, database: db } = database.config;
    const relational_config = { host, port, user, password: 'not-the-password', database: db };
    return service?.call('POST', '/api/v1/peers/create', { peer: { name, type: 3, relational_config } });
  };

  beforeAll(async () => {
    database = await createTestDatabase('sa_secret_files');
    mkdirSync(join(secretsDir, fromFile), { recursive: true });
    writeFileSync(join(secretsDir, fromFile, 'password'), `${database.config.password}\n`, { mode: 0o600 });
    service = await startStandalone(join(root, 'data'), apiPassword, {
      logLevel: 'debug',
      env: { TRIBUTARY_PEER_SECRETS_DIR: secretsDir },
    });
  });

  afterAll(async () => {
    await service?.stop();
    await database?.drop();
    rmSync(root, { recursive: true, force: true });
  });

  it('connects with the file password, and without a file with the one sent', async () => {
    expect(await create(fromFile)).toEqual({
      status: 200,
      body: { status: 'CREATED', message: `peer ${fromFile} created` },
    });
    const refused = await create(inline);
    expect(refused?.status).toBe(422);
    expect(refused?.body).toMatchObject({ status: 'FAILED' });
    const info = await service?.call('GET', `/api/v1/peers/info/${fromFile}`);
    expect(info?.status).toBe(200);
    expect(JSON.stringify(info?.body)).not.toContain(database.config.password);
    // Logged at debug, and still no secret in the log.
    expect(service?.logLines.some((line) => line.includes(database.config.password))).toBe(false);
  });
});

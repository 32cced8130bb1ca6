import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { formatScryptHash, hashSecret, parseScryptHash, verifySecret } from './credential-hash.ts';
import { credentialLine, parseCredentials, readCredentialsFile } from './credentials-file.ts';

describe('credential hashes', () => {
  it('verifies the token they were made from, and no other', async () => {
    const hash = await hashSecret('a-token-of-some-length');
    expect(await verifySecret('a-token-of-some-length', hash)).toBe(true);
    expect(await verifySecret('a-token-of-some-lengtH', hash)).toBe(false);
    expect(await verifySecret('', hash)).toBe(false);
  });

  it('read back from their PHC string, with a salt of their own each', async () => {
    const [first, second] = await Promise.all([
      hashSecret('same-token-0123456'),
      hashSecret('same-token-0123456'),
    ]);
    const text = formatScryptHash(first);
    expect(text).toMatch(/^\$scrypt\$ln=14,r=8,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    expect(formatScryptHash(second)).not.toBe(text);
    expect(await verifySecret('same-token-0123456', parseScryptHash(text))).toBe(true);
  });

  it('keep their own cost, so a hash made with other parameters still verifies', async () => {
    const hash = await hashSecret('cheaper-token-0123', { logN: 10, r: 4, p: 2 });
    const text = formatScryptHash(hash);
    expect(text.startsWith('$scrypt$ln=10,r=4,p=2$')).toBe(true);
    expect(await verifySecret('cheaper-token-0123', parseScryptHash(text))).toBe(true);
  });

  it.each([
    [
      'another scheme',
      '$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA',
      /not a scrypt hash/,
    ],
    ['no key', '$scrypt$ln=14,r=8,p=1$c2FsdHNhbHRzYWx0', /not a scrypt hash/],
    [
      'a cost of more than 256 MiB',
      '$scrypt$ln=20,r=8,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA',
      /more than 256 MiB/,
    ],
    ['a zero parameter', '$scrypt$ln=14,r=0,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA', /at least 1/],
    ['a short salt', '$scrypt$ln=14,r=8,p=1$c2FsdA$aGFzaGhhc2hoYXNoaGFzaA', /salt is shorter/],
    ['a short key', '$scrypt$ln=14,r=8,p=1$c2FsdHNhbHQ$aGFzaA', /key is shorter/],
  ])('refuses %s', (_name, text, message) => {
    expect(() => parseScryptHash(text)).toThrow(message);
  });
});

describe('credentials file', () => {
  const directory = mkdtempSync(join(tmpdir(), 'tributary-credentials-'));
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  it('reads one credential a line, skipping blank lines and comments', async () => {
    const reader = formatScryptHash(await hashSecret('reader-token-0123456'));
    const operator = formatScryptHash(await hashSecret('operator-token-01234'));
    const text = [
      '# dashboards',
      credentialLine('grafana', 'read', reader),
      '',
      `  ${credentialLine('ops.team@example', 'operate', operator)}  `,
      '',
    ].join('\r\n');
    const credentials = parseCredentials(text, 'creds');
    expect(credentials.map(({ user, role }) => ({ user, role }))).toEqual([
      { user: 'grafana', role: 'read' },
      { user: 'ops.team@example', role: 'operate' },
    ]);
    expect(await verifySecret('operator-token-01234', credentials[1]?.hash ?? parseScryptHash(reader))).toBe(
      true,
    );
  });

  it.each([
    ['no role', 'alice', 'creds line 2: expected user:role:hash'],
    ['an unknown role', 'alice:root:HASH', 'creds line 2: role must be one of read, operate, admin'],
    ['an empty user', ':read:HASH', 'creds line 2: a user name is 1 to 63 letters'],
    ['a user with a space', 'al ice:read:HASH', 'creds line 2: a user name is 1 to 63 letters'],
    [
      'the API password name',
      'api-password:read:HASH',
      "creds line 2: the user name api-password is the API password's",
    ],
    [
      'the configured API user',
      'operator:read:HASH',
      "creds line 2: the user name operator is the API password's",
    ],
    ['a bad hash', 'alice:read:not-a-hash', 'creds line 2: not a scrypt hash'],
    ['the same user twice', 'bob:read:HASH', 'creds line 2: user bob is listed twice'],
  ])('refuses %s, naming the line and never the hash', async (_name, line, message) => {
    const hash = formatScryptHash(await hashSecret('some-token-01234567'));
    const text = `${credentialLine('bob', 'admin', hash)}\n${line.replace('HASH', hash)}\n`;
    const parse = () => parseCredentials(text, 'creds', ['api-password', 'operator']);
    expect(parse).toThrow(message);
    expect(parse).not.toThrow(hash);
  });

  it("refuses a file others may read in standalone mode (0600 only), and allows a Secret volume's 0440 in cluster mode", async () => {
    const path = join(directory, 'credentials');
    writeFileSync(
      path,
      `${credentialLine('alice', 'read', formatScryptHash(await hashSecret('alice-token-0123456')))}\n`,
    );
    const modes: [mode: number, standalone: boolean, cluster: boolean][] = [
      [0o600, true, true],
      [0o400, true, true],
      [0o440, false, true],
      [0o640, false, true],
      [0o660, false, false],
      [0o644, false, false],
      [0o604, false, false],
    ];
    for (const [mode, standalone, cluster] of modes) {
      chmodSync(path, mode);
      for (const [groupMayRead, accepted] of [
        [false, standalone],
        [true, cluster],
      ] as const) {
        const read = () => readCredentialsFile(path, { groupMayRead });
        if (accepted)
          expect(
            read().map((entry) => entry.user),
            mode.toString(8),
          ).toEqual(['alice']);
        else
          expect(read, mode.toString(8)).toThrow(
            `the credentials file ${path} has mode 0${mode.toString(8)}`,
          );
      }
    }
    chmodSync(path, 0o644);
    expect(() => readCredentialsFile(path, { groupMayRead: false })).toThrow(`(chmod 600 ${path})`);
  });

  it('names a file it cannot read', () => {
    const path = join(directory, 'missing');
    expect(() => readCredentialsFile(path, { groupMayRead: false })).toThrow(
      `cannot read the credentials file ${path}`,
    );
  });
});

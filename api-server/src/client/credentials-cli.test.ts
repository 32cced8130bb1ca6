import { Readable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { verifySecret } from '../http/credential-hash.ts';
import { parseCredentials } from '../http/credentials-file.ts';
import { main } from './credentials-cli.ts';

/** Runs the command; what it printed on standard output and standard error. */
async function run(argv: string[], input = '') {
  const stdout: string[] = [];
  const stderr: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((line: string) => stdout.push(line));
  vi.spyOn(console, 'error').mockImplementation((line: string) => stderr.push(line));
  const status = await main(argv, Readable.from([input]));
  return { status, stdout: stdout.join('\n'), stderr: stderr.join('\n') };
}

describe('tributary credentials hash', () => {
  afterEach(() => vi.restoreAllMocks());

  it('prints a line the credentials file takes, for a new token it shows once on standard error', async () => {
    const { status, stdout, stderr } = await run(['hash', 'alice', 'operate']);
    expect(status).toBe(0);
    const token = /: (\S+)$/.exec(stderr)?.[1] ?? '';
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(stdout).not.toContain(token);
    const [credential] = parseCredentials(stdout, 'stdout');
    expect(credential).toMatchObject({ user: 'alice', role: 'operate' });
    expect(credential && (await verifySecret(token, credential.hash))).toBe(true);
  });

  it('hashes the first line of standard input with --token-stdin, and prints nothing else', async () => {
    const token = 'a-token-from-a-vault-0123';
    const { status, stdout, stderr } = await run(
      ['hash', 'grafana', 'read', '--token-stdin'],
      `${token}\nmore\n`,
    );
    expect(status).toBe(0);
    expect(stderr).toBe('');
    const [credential] = parseCredentials(stdout, 'stdout');
    expect(credential && (await verifySecret(token, credential.hash))).toBe(true);
  });

  it.each([
    [['hash', 'alice'], 'ROLE: one of read, operate, admin'],
    [['hash', 'alice', 'root'], 'ROLE: one of read, operate, admin'],
    [['hash', 'al:ice', 'read'], 'USER: 1 to 63 letters'],
    [['hash', 'api-password', 'admin'], "USER: api-password is the API password's name"],
    [['verify', 'alice', 'read'], 'expected: hash USER ROLE'],
    [['hash', 'alice', 'read', 'extra'], 'expected: hash USER ROLE'],
    [['hash', 'alice', 'read', '--token'], "Unknown option '--token'"],
  ])('refuses %j with exit code 2', async (argv, message) => {
    const { status, stdout, stderr } = await run(argv);
    expect(status).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toContain(message);
  });

  it('refuses a token shorter than 16 characters', async () => {
    const { status, stdout, stderr } = await run(['hash', 'alice', 'read', '--token-stdin'], 'short-token\n');
    expect(status).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toContain('the token is shorter than 16 characters');
  });
});

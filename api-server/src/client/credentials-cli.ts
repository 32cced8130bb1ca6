// `tributary credentials hash USER ROLE`: one line of a credentials file
// (http/credentials-file.ts) for a new API credential. The token is made here
// (32 random bytes) and shown once on standard error, or read from standard
// input with --token-stdin; standard output gets only the line, so
// `tributary credentials hash alice operate >> credentials` adds it to a file.
import { randomBytes } from 'node:crypto';
import { text } from 'node:stream/consumers';
import { parseArgs } from 'node:util';
import { formatScryptHash, hashSecret } from '../http/credential-hash.ts';
import { apiPasswordUser, credentialLine, credentialUserPattern } from '../http/credentials-file.ts';
import { minimumApiPasswordLength } from '../http/listener.ts';
import { isRole, roles } from '../http/roles.ts';

export const credentialsUsage = `usage: tributary credentials hash USER ROLE [--token-stdin]

Prints a line of a credentials file (standalone --credentials-file, or the
chart's api.credentials.existingSecret): USER:ROLE:<scrypt hash of the token>,
ROLE one of ${roles.join(', ')}. A random token is made and shown once on
standard error; with --token-stdin the first line of standard input is the
token instead (at least ${minimumApiPasswordLength} characters). Clients send
it as Basic credentials, USER:TOKEN.

  tributary credentials hash alice operate >> credentials && chmod 600 credentials`;

/** `input`: where --token-stdin reads the token (standard input; a test gives its own). */
export async function main(
  argv: readonly string[],
  input: NodeJS.ReadableStream = process.stdin,
): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    console.error(`tributary credentials: ${(error as Error).message}\n\n${credentialsUsage}`);
    return 2;
  }
  if (parsed.values.help) {
    console.log(credentialsUsage);
    return 0;
  }
  const [command, user = '', role = '', ...extra] = parsed.positionals;
  const problem = argumentProblem(command, user, role, extra);
  if (problem !== undefined || !isRole(role)) {
    console.error(`tributary credentials: ${problem}\n\n${credentialsUsage}`);
    return 2;
  }
  let token: string;
  if (parsed.values['token-stdin']) {
    token = (await text(input)).split(/\r?\n/)[0] ?? '';
    if (token.length < minimumApiPasswordLength) {
      console.error(
        `tributary credentials: the token is shorter than ${minimumApiPasswordLength} characters; use a random one (e.g. openssl rand -base64 24)`,
      );
      return 2;
    }
  } else {
    token = randomBytes(32).toString('base64url');
    console.error(`token of ${user} (shown once; clients send it as the password of user ${user}): ${token}`);
  }
  console.log(credentialLine(user, role, formatScryptHash(await hashSecret(token))));
  return 0;
}

function argumentProblem(
  command: string | undefined,
  user: string,
  role: string,
  extra: readonly string[],
): string | undefined {
  if (command !== 'hash' || extra.length > 0) return 'expected: hash USER ROLE';
  if (!credentialUserPattern.test(user))
    return "USER: 1 to 63 letters, digits, '.', '_', '@' or '-', starting with a letter or digit";
  if (user === apiPasswordUser) return `USER: ${apiPasswordUser} is the API password's name`;
  if (!isRole(role)) return `ROLE: one of ${roles.join(', ')}`;
  return undefined;
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: { 'token-stdin': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  });
}

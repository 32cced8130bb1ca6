// API credentials with roles, beside the API password (docs/security.md,
// "Roles"): a text file, one credential a line,
//   <user>:<role>:<scrypt hash of its token>
// e.g. `alice:operate:$scrypt$ln=14,r=8,p=1$…$…`, as `tributary credentials hash`
// prints it. Blank lines and lines starting with `#` are ignored. Standalone
// mode reads it from --credentials-file, the api-server from the chart's
// Secret mounted as a file; both at start.
import { parseScryptHash, type ScryptHash } from './credential-hash.ts';
import { isRole, type Role, roles } from './roles.ts';
import { readSecretFile } from './secret-file.ts';

export interface ApiCredential {
  readonly user: string;
  readonly role: Role;
  readonly hash: ScryptHash;
}

/** What a user name may be: it is sent in Basic credentials (no `:`) and shown in the audit trail. */
export const credentialUserPattern = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,62}$/;

/**
 * The name the API password's credential has in the audit trail and in
 * messages when no `--user` is configured; a credentials file cannot use it.
 */
export const apiPasswordUser = 'api-password';

/** One credential as its line in the file. */
export function credentialLine(user: string, role: Role, hash: string): string {
  return `${user}:${role}:${hash}`;
}

/**
 * The credentials of a file's text. Throws an Error naming `source` and the
 * line of the first problem; messages never quote a hash. `reservedUsers` are
 * names taken by the API password's credential.
 */
export function parseCredentials(
  text: string,
  source: string,
  reservedUsers: readonly string[] = [apiPasswordUser],
): ApiCredential[] {
  const credentials = new Map<string, ApiCredential>();
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const at = `${source} line ${index + 1}`;
    const [user = '', role = '', ...rest] = line.split(':');
    const hashText = rest.join(':');
    if (rest.length === 0) throw new Error(`${at}: expected user:role:hash`);
    if (!credentialUserPattern.test(user)) {
      throw new Error(
        `${at}: a user name is 1 to 63 letters, digits, '.', '_', '@' or '-', starting with a letter or digit`,
      );
    }
    if (reservedUsers.includes(user))
      throw new Error(`${at}: the user name ${user} is the API password's; choose another`);
    if (credentials.has(user)) throw new Error(`${at}: user ${user} is listed twice`);
    if (!isRole(role)) throw new Error(`${at}: role must be one of ${roles.join(', ')}`);
    let hash: ScryptHash;
    try {
      hash = parseScryptHash(hashText);
    } catch (error) {
      throw new Error(`${at}: ${(error as Error).message}`);
    }
    credentials.set(user, { user, role, hash });
  });
  return [...credentials.values()];
}

export interface CredentialsFileOptions {
  /**
   * Group members may read it: a Kubernetes Secret volume gives the pod's
   * fsGroup read (mode 0440). Standalone mode wants 0600, as for the data directory.
   */
  readonly groupMayRead: boolean;
  readonly reservedUsers?: readonly string[];
}

/**
 * Reads and parses the file, refusing one that others may read or write (its
 * hashes would let them guess tokens offline). Throws an Error naming the file.
 */
export function readCredentialsFile(path: string, options: CredentialsFileOptions): ApiCredential[] {
  const text = readSecretFile(path, 'credentials file', options.groupMayRead);
  return parseCredentials(text, path, options.reservedUsers);
}

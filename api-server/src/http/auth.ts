// HTTP Basic authentication, and who a request comes from. Existing clients
// send base64 of ":<password>" (an empty user) with the API password;
// "<user>:<password>" works for the configured user. Both are the admin
// credential, as the interface has one password for everything. Credentials of
// a credentials file (credentials-file.ts) carry a user name and a role; their
// tokens are checked against scrypt hashes. Comparisons take constant time.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { hashSecret, type ScryptHash, verifySecret } from './credential-hash.ts';
import { type ApiCredential, apiPasswordUser } from './credentials-file.ts';
import type { Role } from './roles.ts';

export type AuthConfig =
  | { readonly mode: 'disabled' }
  | {
      readonly mode: 'basic';
      readonly password: string;
      readonly user?: string | undefined;
      /** Credentials with roles beside the API password (credentials-file.ts). */
      readonly credentials?: readonly ApiCredential[] | undefined;
    };

/** Who sent a request, as its credential says. */
export interface Principal {
  readonly user: string;
  readonly role: Role;
}

/** Who every request is when authentication is disabled: anyone who reaches the port. */
export const unauthenticatedPrincipal: Principal = { user: 'anonymous', role: 'admin' };

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** How long a checked token is remembered, and how many are. */
const verifiedTtlMs = 10 * 60_000;
const verifiedMax = 256;

/**
 * Checks the credentials of requests. A token's scrypt check costs tens of
 * milliseconds, and a console page makes several API calls in process with
 * the visitor's header; a token that passed is remembered for a while under
 * an HMAC of it keyed by this process's random key (never in clear). Failures
 * are not remembered: the failed-login limit bounds them.
 */
export class Authenticator {
  readonly #config: AuthConfig;
  readonly #credentials: ReadonlyMap<string, ApiCredential>;
  readonly #verified = new Map<string, { readonly principal: Principal; readonly expiresAt: number }>();
  readonly #cacheKey = randomBytes(32);
  /** Checked for an unknown user, so that its answer takes as long as a known one's. */
  #decoy: Promise<ScryptHash> | undefined;

  constructor(config: AuthConfig) {
    this.#config = config;
    this.#credentials = new Map(
      config.mode === 'basic' ? (config.credentials ?? []).map((entry) => [entry.user, entry]) : [],
    );
  }

  /** The request's principal, or undefined when its Authorization header is missing or wrong. */
  async authenticate(header: string | undefined): Promise<Principal | undefined> {
    const config = this.#config;
    if (config.mode === 'disabled') return unauthenticatedPrincipal;
    const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
    if (!match?.[1]) return undefined;
    const decoded = Buffer.from(match[1], 'base64').toString('utf8');
    const separator = decoded.indexOf(':');
    if (separator < 0) return undefined;
    const user = decoded.slice(0, separator);
    const password = decoded.slice(separator + 1);
    if (user === '' || user === config.user) {
      const passwordMatches = timingSafeEqual(digest(password), digest(config.password));
      return passwordMatches ? { user: config.user || apiPasswordUser, role: 'admin' } : undefined;
    }
    const cacheKey = createHmac('sha256', this.#cacheKey).update(decoded).digest('base64');
    const remembered = this.#verified.get(cacheKey);
    if (remembered && remembered.expiresAt > Date.now()) return remembered.principal;
    if (remembered) this.#verified.delete(cacheKey);
    const credential = this.#credentials.get(user);
    if (!credential) {
      this.#decoy ??= hashSecret(randomBytes(16).toString('base64'));
      await verifySecret(password, await this.#decoy);
      return undefined;
    }
    if (!(await verifySecret(password, credential.hash))) return undefined;
    const principal: Principal = { user: credential.user, role: credential.role };
    if (this.#verified.size >= verifiedMax) {
      const oldest = this.#verified.keys().next().value;
      if (oldest !== undefined) this.#verified.delete(oldest);
    }
    this.#verified.set(cacheKey, { principal, expiresAt: Date.now() + verifiedTtlMs });
    return principal;
  }
}

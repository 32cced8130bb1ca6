// HTTP Basic authentication. Existing clients send base64 of ":<password>" (an
// empty user); "<user>:<password>" works for the configured user. Passwords are
// compared in constant time (digests of equal length).
import { createHash, timingSafeEqual } from 'node:crypto';

export type AuthConfig =
  | { readonly mode: 'disabled' }
  | { readonly mode: 'basic'; readonly password: string; readonly user?: string | undefined };

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

export function isAuthorized(config: AuthConfig, header: string | undefined): boolean {
  if (config.mode === 'disabled') return true;
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!match?.[1]) return false;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const separator = decoded.indexOf(':');
  if (separator < 0) return false;
  const user = decoded.slice(0, separator);
  const password = decoded.slice(separator + 1);
  const passwordMatches = timingSafeEqual(digest(password), digest(config.password));
  const userMatches = user === '' || (config.user !== undefined && user === config.user);
  return passwordMatches && userMatches;
}

// The peer's key-pair login key: PKCS#8 PEM, unencrypted or encrypted with the
// peer's `password` as passphrase (https://docs.snowflake.com/en/user-guide/key-pair-auth).
// It is decrypted here, before the driver sees it: snowflake-sdk decrypts it
// during the login, and a wrong passphrase then surfaces only in the callback
// of connect() (connectAsync() even resolves), as a generic login failure. Here it
// is reported as what it is.
import { createPrivateKey } from 'node:crypto';
import { EngineError } from '../../errors.ts';

/** Adds PEM armour to a bare base64 key body (the interface accepts either). */
function armoured(key: string, encrypted: boolean): string {
  const trimmed = key.trim();
  if (trimmed.startsWith('-----BEGIN')) return trimmed;
  const label = encrypted ? 'ENCRYPTED PRIVATE KEY' : 'PRIVATE KEY';
  const body = trimmed.replace(/\s+/g, '').replace(/(.{64})/g, '$1\n');
  return `-----BEGIN ${label}-----\n${body.trimEnd()}\n-----END ${label}-----`;
}

/** The login key as unencrypted PKCS#8 PEM; EngineError `auth` or `config` when it cannot be read. */
export function loginPrivateKey(privateKey: string, passphrase: string | undefined): string {
  const encrypted = /ENCRYPTED/.test(privateKey) || Boolean(passphrase);
  const pem = armoured(privateKey, encrypted);
  if (pem.includes('ENCRYPTED PRIVATE KEY') && !passphrase) {
    throw new EngineError(
      'config',
      'the private key is encrypted and the peer has no password (its passphrase)',
    );
  }
  try {
    return createPrivateKey({ key: pem, format: 'pem', ...(passphrase ? { passphrase } : {}) })
      .export({ format: 'pem', type: 'pkcs8' })
      .toString();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (pem.includes('ENCRYPTED') && /bad decrypt|BAD_DECRYPT/i.test(`${code} ${(error as Error).message}`)) {
      throw new EngineError('auth', "the private key's passphrase (the peer's password) is wrong", {
        cause: error,
      });
    }
    throw new EngineError('config', 'the private key is not a PKCS#8 PEM key', { cause: error });
  }
}

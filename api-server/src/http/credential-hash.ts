// How an API credential's token is stored: scrypt (RFC 7914), a random salt of
// its own per credential, written in the PHC string format
// (https://github.com/P-H-C/phc-string-format/blob/master/phc-sf-spec.md):
//   $scrypt$ln=14,r=8,p=1$<salt>$<key>
// with the salt and the derived key in base64 without padding. The cost
// travels with each hash, so raising the default later leaves old hashes valid.
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

export interface ScryptHash {
  /** log2 of scrypt's CPU/memory cost N. */
  readonly logN: number;
  /** Block size. */
  readonly r: number;
  /** Parallelisation. */
  readonly p: number;
  readonly salt: Buffer;
  readonly key: Buffer;
}

/**
 * N = 2^14, r = 8: 16 MiB and some tens of milliseconds a check, Node's own
 * default. Tokens made by `tributary credentials hash` are 32 random bytes, which
 * no cost protects further; the cost is for a password a person chose.
 */
export const scryptDefaults = { logN: 14, r: 8, p: 1 } as const;

const saltBytes = 16;
const keyBytes = 32;
/** scrypt needs 128·N·r bytes; a stored hash may not ask for more than this. */
const maxMemoryBytes = 256 * 1024 * 1024;

const phcPattern = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/;

const unpadded = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');

/** The hash in PHC string form. */
export function formatScryptHash(hash: ScryptHash): string {
  return `$scrypt$ln=${hash.logN},r=${hash.r},p=${hash.p}$${unpadded(hash.salt)}$${unpadded(hash.key)}`;
}

/** Reads a PHC string; throws an Error saying what is wrong (never quoting the text). */
export function parseScryptHash(text: string): ScryptHash {
  const match = phcPattern.exec(text);
  if (!match) throw new Error('not a scrypt hash of the form $scrypt$ln=N,r=R,p=P$SALT$KEY');
  const [logN, r, p] = [match[1], match[2], match[3]].map(Number) as [number, number, number];
  if (logN < 1 || r < 1 || p < 1) throw new Error('scrypt parameters must be at least 1');
  if (128 * 2 ** logN * r > maxMemoryBytes)
    throw new Error(`scrypt parameters ask for more than ${maxMemoryBytes / 1024 / 1024} MiB`);
  const salt = Buffer.from(match[4] ?? '', 'base64');
  const key = Buffer.from(match[5] ?? '', 'base64');
  if (salt.length < 8) throw new Error('the salt is shorter than 8 bytes');
  if (key.length < 16) throw new Error('the key is shorter than 16 bytes');
  return { logN, r, p, salt, key };
}

function derive(
  secret: string,
  salt: Buffer,
  params: { logN: number; r: number; p: number },
  length: number,
) {
  const N = 2 ** params.logN;
  return new Promise<Buffer>((resolve, reject) => {
    // Runs on libuv's thread pool, so a check never holds the event loop.
    scrypt(
      secret,
      salt,
      length,
      { N, r: params.r, p: params.p, maxmem: 128 * N * params.r + 1024 * 1024 },
      (error, key) => (error ? reject(error) : resolve(key)),
    );
  });
}

/** A new hash of `secret` with a fresh random salt. */
export async function hashSecret(
  secret: string,
  params: { logN: number; r: number; p: number } = scryptDefaults,
): Promise<ScryptHash> {
  const salt = randomBytes(saltBytes);
  return { ...params, salt, key: await derive(secret, salt, params, keyBytes) };
}

/** Whether `secret` is the one `hash` was made from; the keys are compared in constant time. */
export async function verifySecret(secret: string, hash: ScryptHash): Promise<boolean> {
  const key = await derive(secret, hash.salt, hash, hash.key.length);
  return timingSafeEqual(key, hash.key);
}

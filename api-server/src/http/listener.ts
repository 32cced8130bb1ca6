// How the /api/v1 listener faces the network, in both modes: optional TLS from
// certificate and key files (reloaded when they change, as cert-manager and the
// kubelet rewrite a mounted Secret), time limits that close slow or idle
// connections, the API password's minimum length, and the bound on failed
// logins per client address. Configuration is read by main.ts and
// standalone.ts through `listenerConfigFields`, then frozen.
import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { z } from 'zod';

/** An API password shorter than this is refused at start. */
export const minimumApiPasswordLength = 16;

export const apiPasswordSchema = z
  .string()
  .min(
    minimumApiPasswordLength,
    `the API password is shorter than ${minimumApiPasswordLength} characters; use a random one (e.g. openssl rand -base64 24)`,
  );

export interface TlsFiles {
  /** PEM certificate chain, the server's certificate first. */
  readonly certFile: string;
  /** PEM private key of the certificate. */
  readonly keyFile: string;
}

export interface ListenerOptions {
  readonly tls?: TlsFiles;
  /** How often the TLS files are looked at for a change. */
  readonly tlsCheckIntervalMs?: number;
  /** Longest time to receive a whole request (headers and body) from a client. */
  readonly requestTimeoutMs?: number;
  /** A connection without any traffic for this long is closed. */
  readonly connectionTimeoutMs?: number;
  /** How long an idle keep-alive connection is kept open for the next request. */
  readonly keepAliveTimeoutMs?: number;
  /**
   * Fastify's `trustProxy`: which proxies' X-Forwarded-For to believe, so that
   * behind an ingress the client's address (not the ingress's) is the one whose
   * failed logins are counted: true (all), their addresses or CIDRs
   * (comma-separated), or a number of hops (the address that many proxies
   * back, which a client cannot choose when each proxy appends). Off by default.
   */
  readonly trustProxy?: boolean | string | number;
  /**
   * `/metrics` asks for the API's credentials too. Off by default, as
   * Prometheus expects; its series name mirrors and tables (docs/security.md).
   */
  readonly metricsAuth?: boolean;
  /** Failed logins allowed per client address within `windowMs`; then 429 until the window ends. */
  readonly authFailures?: { readonly max: number; readonly windowMs: number };
}

export const listenerDefaults = {
  tlsCheckIntervalMs: 5_000,
  requestTimeoutMs: 60_000,
  connectionTimeoutMs: 120_000,
  keepAliveTimeoutMs: 72_000,
  authFailures: { max: 10, windowMs: 60_000 },
} as const;

/** The TLS and proxy settings as main.ts and standalone.ts read them (flags, then environment). */
export const listenerConfigFields = {
  tlsCertFile: z.string().min(1).optional(),
  tlsKeyFile: z.string().min(1).optional(),
  trustProxy: z
    .string()
    .min(1)
    .transform((value) => (value === 'true' ? true : /^\d{1,2}$/.test(value) ? Number(value) : value))
    .optional(),
  metricsAuth: z.boolean().default(false),
};

/** Refinement for a schema holding `listenerConfigFields`: both TLS files or neither. */
export const tlsFilesTogether = {
  check: (config: { tlsCertFile?: string | undefined; tlsKeyFile?: string | undefined }) =>
    (config.tlsCertFile === undefined) === (config.tlsKeyFile === undefined),
  message: 'TLS needs both a certificate file and a key file (--tls-cert-file and --tls-key-file)',
};

/** The listener options of a parsed configuration. */
export function listenerOptionsOf(config: {
  tlsCertFile?: string | undefined;
  tlsKeyFile?: string | undefined;
  trustProxy?: boolean | string | number | undefined;
  metricsAuth?: boolean | undefined;
}): ListenerOptions {
  return {
    ...(config.tlsCertFile && config.tlsKeyFile
      ? { tls: { certFile: config.tlsCertFile, keyFile: config.tlsKeyFile } }
      : {}),
    ...(config.trustProxy !== undefined ? { trustProxy: config.trustProxy } : {}),
    ...(config.metricsAuth ? { metricsAuth: true } : {}),
  };
}

export interface TlsPair {
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** Reads and checks the pair (that the key belongs to the certificate); the error names the files. */
export function readTlsPair(files: TlsFiles): TlsPair {
  let pair: TlsPair;
  try {
    pair = { cert: readFileSync(files.certFile), key: readFileSync(files.keyFile) };
  } catch (error) {
    throw new Error(`cannot read the TLS certificate or key (${files.certFile}, ${files.keyFile})`, {
      cause: error,
    });
  }
  try {
    createSecureContext(pair);
  } catch (error) {
    throw new Error(`the TLS certificate ${files.certFile} and key ${files.keyFile} are not a usable pair`, {
      cause: error,
    });
  }
  return pair;
}

/**
 * Why the listener cannot start, checked before anything else starts (so a
 * wrong path is reported at once, not after connecting to the cluster); the
 * message names the files and the system's reason, never key material.
 */
export function listenerStartProblem(options: ListenerOptions): string | undefined {
  if (!options.tls) return undefined;
  try {
    readTlsPair(options.tls);
    return undefined;
  } catch (error) {
    const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : '';
    return `${error instanceof Error ? error.message : String(error)}${cause}`;
  }
}

/**
 * Calls `onChange` with the new pair whenever either file changes (by polling
 * their status: a Kubernetes Secret volume replaces files by swapping a
 * symbolic link, which file-system events on the old file do not report).
 * A pair that does not load (a half-written update) goes to `onError` and the
 * previous one stays in use. Returns the function that stops watching.
 */
export function watchTlsFiles(
  files: TlsFiles,
  intervalMs: number,
  onChange: (pair: TlsPair) => void,
  onError: (error: unknown) => void,
): () => void {
  const reload = () => {
    let pair: TlsPair;
    try {
      pair = readTlsPair(files);
    } catch (error) {
      onError(error);
      return;
    }
    onChange(pair);
  };
  const options = { interval: intervalMs, persistent: false };
  watchFile(files.certFile, options, reload);
  watchFile(files.keyFile, options, reload);
  return () => {
    unwatchFile(files.certFile, reload);
    unwatchFile(files.keyFile, reload);
  };
}

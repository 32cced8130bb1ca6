// Peer resources as the engine sees them: the full configuration with secrets.
// Secrets are stored apart from the rest (a Kubernetes Secret, the standalone
// secret table): `splitPeerSecrets` and `joinPeerSecrets` move between the two,
// `maskPeerSecrets` prepares a peer for display. The facade's wire shapes and
// the CRD schema are derived from these definitions.
import { z } from 'zod';
import { resourceNameSchema } from './names.ts';

const hostSchema = z.string().min(1).max(253);
const portSchema = z.number().int().min(1).max(65_535);

/** The SSH tunnel's fields without the rule that one credential is given. */
export const sshConfigFields = z
  .object({
    host: hostSchema,
    port: portSchema,
    user: z.string().min(1),
    password: z.string().optional(),
    privateKey: z.string().optional(),
    /**
     * The server's public host key, as a line of authorized_keys or known_hosts
     * (`ssh-ed25519 AAAA…`); the tunnel refuses a server with another key.
     */
    hostKey: z.string().min(1).optional(),
  })
  .strict();

export const sshConfigSchema = sshConfigFields.refine((ssh) => Boolean(ssh.password || ssh.privateKey), {
  message: 'ssh tunnel needs a password or a private key',
});

export const relationalConfigSchema = z
  .object({
    host: hostSchema,
    port: portSchema,
    user: z.string().min(1),
    password: z.string(),
    database: z.string().min(1),
    sshConfig: sshConfigSchema.optional(),
    // TLS, as libpq's sslmode would say it (connectors/postgres/driver/tls.ts, docs/security.md):
    // nothing set is `prefer`, disableTls `disable`, requireTls or rootCa `verify-full`
    // (against rootCa, else the public CAs), skipCertVerification `require`.
    requireTls: z.boolean().optional(),
    disableTls: z.boolean().optional(),
    /** PEM certificates of the CA(s) the server's certificate must chain to. */
    rootCa: z.string().min(1).optional(),
    /** The name the server's certificate must carry and the TLS server name (SNI); default: host. */
    tlsHost: hostSchema.optional(),
    /** TLS without certificate verification: encrypted, but open to an impostor. */
    skipCertVerification: z.boolean().optional(),
  })
  .strict();

export const analyticsConfigSchema = z
  .object({
    host: hostSchema,
    /** The server's native TCP port, as existing clients send it. */
    port: portSchema,
    /** HTTP(S) port; derived from `port` when absent (see analyticsHttpPort). */
    httpPort: portSchema.optional(),
    user: z.string().min(1),
    password: z.string(),
    database: z.string().min(1),
    disableTls: z.boolean().default(false),
    certificate: z.string().optional(),
    privateKey: z.string().optional(),
    rootCa: z.string().optional(),
    objstorePath: z
      .string()
      .regex(/^[a-z0-9]+:\/\/[^/]+(\/.*)?$/, 'expected <scheme>://<bucket>/<path>')
      .optional(),
    accessKeyId: z.string().optional(),
    secretAccessKey: z.string().optional(),
    region: z.string().optional(),
    endpoint: z.string().optional(),
  })
  .strict();

export const datawarehouseConfigSchema = z
  .object({
    accountId: z.string().min(1),
    username: z.string().min(1),
    /** PEM or PKCS#8; when encrypted, its passphrase is `password`. */
    privateKey: z.string().min(1),
    password: z.string().optional(),
    database: z.string().min(1),
    warehouse: z.string().min(1),
    /** The role to connect with (the interface declares it boolean; it is a name). */
    role: z.string().min(1),
    queryTimeout: z.number().int().positive().default(30),
    /** Service URL for private connectivity; default https://<account>.snowflakecomputing.com. */
    accessUrl: z.url({ protocol: /^https?$/ }).optional(),
  })
  .strict();

export const saslMechanisms = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'] as const;
export const partitioners = ['', 'LeastBackup', 'Manual', 'RoundRobin', 'StickyKey', 'Sticky'] as const;
/**
 * Codecs of produce requests: those the producer encodes without a native
 * package (gzip and zstd with Node's zlib, lz4 and snappy in WebAssembly).
 */
export const streamCompressions = ['none', 'gzip', 'lz4', 'snappy', 'zstd'] as const;

/**
 * A Kafka cluster. SASL is used when `username` is set; without one the
 * client authenticates with its TLS certificate alone (Strimzi's `tls`
 * authentication) or not at all.
 */
export const streamConfigFields = z
  .object({
    servers: z.array(z.string().regex(/^[^\s:]+:\d{1,5}$/, 'expected host:port')).min(1),
    username: z.string().default(''),
    password: z.string().default(''),
    /** Required with a username; empty without one. */
    sasl: z.enum(['', ...saslMechanisms]).default(''),
    disableTls: z.boolean().default(false),
    partitioner: z.enum(partitioners).default(''),
    /** How record batches are compressed on the wire and on the brokers (an addition to the interface). */
    compression: z.enum(streamCompressions).default('none'),
    /** PEM client certificate (chain) for mutual TLS; needs `privateKey`. */
    certificate: z.string().optional(),
    /** PEM private key of `certificate`. */
    privateKey: z.string().optional(),
    /** PEM CA certificates that verify the brokers, instead of the system's. */
    rootCa: z.string().optional(),
  })
  .strict();

export const streamConfigSchema = streamConfigFields
  .refine((config) => config.username === '' || config.sasl !== '', {
    message: 'a username needs a SASL mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)',
    path: ['sasl'],
  })
  .refine((config) => (config.certificate === undefined) === (config.privateKey === undefined), {
    message: 'a client certificate needs its private key, and a private key its certificate',
    path: ['certificate'],
  })
  .refine((config) => !config.disableTls || (!config.certificate && !config.rootCa), {
    message: 'certificate and root CA need TLS; remove disableTls',
    path: ['disableTls'],
  });

export const peerKinds = ['relational', 'analytics', 'datawarehouse', 'stream'] as const;
export type PeerKind = (typeof peerKinds)[number];

const peerName = resourceNameSchema;

export const peerSchema = z.discriminatedUnion('kind', [
  z.object({ name: peerName, kind: z.literal('relational'), config: relationalConfigSchema }),
  z.object({ name: peerName, kind: z.literal('analytics'), config: analyticsConfigSchema }),
  z.object({ name: peerName, kind: z.literal('datawarehouse'), config: datawarehouseConfigSchema }),
  z.object({ name: peerName, kind: z.literal('stream'), config: streamConfigSchema }),
]);

export type SshConfig = z.infer<typeof sshConfigSchema>;
export type RelationalConfig = z.infer<typeof relationalConfigSchema>;
export type AnalyticsConfig = z.infer<typeof analyticsConfigSchema>;
export type DatawarehouseConfig = z.infer<typeof datawarehouseConfigSchema>;
export type StreamConfig = z.infer<typeof streamConfigSchema>;
export type Peer = z.infer<typeof peerSchema>;
export type PeerOfKind<Kind extends PeerKind> = Extract<Peer, { kind: Kind }>;

/** Config fields (dotted paths) that are secrets, per kind. */
export const peerSecretPaths = {
  relational: ['password', 'sshConfig.password', 'sshConfig.privateKey'],
  analytics: ['password', 'privateKey', 'secretAccessKey'],
  datawarehouse: ['privateKey', 'password'],
  stream: ['password', 'privateKey'],
} as const satisfies Record<PeerKind, readonly string[]>;

/** A peer without its secrets, and the secrets by dotted path. */
export interface SplitPeer {
  readonly name: string;
  readonly kind: PeerKind;
  readonly config: Record<string, unknown>;
  readonly secrets: Readonly<Record<string, string>>;
}

type Json = Record<string, unknown>;

function getPath(object: Json, path: string): unknown {
  return path.split('.').reduce<unknown>((value, key) => (value as Json | undefined)?.[key], object);
}

function withPath(object: Json, path: string, value: unknown): Json {
  const [head = '', ...rest] = path.split('.');
  if (rest.length === 0) {
    const copy = { ...object };
    if (value === undefined) delete copy[head];
    else copy[head] = value;
    return copy;
  }
  const child = object[head];
  if (child === undefined || child === null) return object;
  return { ...object, [head]: withPath(child as Json, rest.join('.'), value) };
}

export function splitPeerSecrets(peer: Peer): SplitPeer {
  let config = peer.config as Json;
  const secrets: Record<string, string> = {};
  for (const path of peerSecretPaths[peer.kind]) {
    const value = getPath(config, path);
    if (typeof value === 'string') secrets[path] = value;
    config = withPath(config, path, undefined);
  }
  return { name: peer.name, kind: peer.kind, config, secrets };
}

/** Every secret field of any kind, for schemas that name them all (a Secret's key mapping). */
export const allPeerSecretPaths: readonly string[] = [...new Set(Object.values(peerSecretPaths).flat())];

/** Whether `path` is a secret field of peers of `kind`. */
export function isPeerSecretPath(kind: PeerKind, path: string): boolean {
  return (peerSecretPaths[kind] as readonly string[]).includes(path);
}

/**
 * Rebuilds the full peer; the result is validated, so a missing secret is
 * reported. Only the kind's secret fields are taken from `secrets`: whatever
 * else a secret store holds (a Kubernetes Secret shared with another
 * application has `host` or `uri` keys) never replaces a configured field.
 */
export function joinPeerSecrets(split: SplitPeer): Peer {
  let config: Json = split.config;
  for (const path of peerSecretPaths[split.kind]) {
    const value = split.secrets[path];
    if (value !== undefined) config = withPath(config, path, value);
  }
  return peerSchema.parse({ name: split.name, kind: split.kind, config });
}

export const secretMask = '********';

/** The peer with every secret present replaced by asterisks. */
export function maskPeerSecrets(peer: Peer): { name: string; kind: PeerKind; config: Json } {
  let config = peer.config as Json;
  for (const path of peerSecretPaths[peer.kind]) {
    if (getPath(config, path) !== undefined) config = withPath(config, path, secretMask);
  }
  return { name: peer.name, kind: peer.kind, config };
}

/**
 * The HTTP port of an analytics peer. The interface carries the native TCP
 * port; the standard native ports map to their HTTP(S) twins, anything else
 * needs `httpPort`.
 */
export function analyticsHttpPort(config: AnalyticsConfig): number | undefined {
  if (config.httpPort !== undefined) return config.httpPort;
  const standard: Record<number, number> = { 9000: 8123, 9440: 8443 };
  return standard[config.port];
}

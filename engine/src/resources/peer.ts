// Peer resources as the engine sees them: the full configuration with secrets.
// Secrets are stored apart from the rest (a Kubernetes Secret, the standalone
// secret table): `splitPeerSecrets` and `joinPeerSecrets` move between the two,
// `maskPeerSecrets` prepares a peer for display. The facade's wire shapes and
// the CRD schema are derived from these definitions, descriptions included
// (`kubectl explain peer.spec.relational`).
import { z } from 'zod';
import { resourceNameSchema } from './names.ts';

const hostSchema = z.string().min(1).max(253).describe("The server's host name or IP address.");
const portSchema = z.number().int().min(1).max(65_535).describe("The server's TCP port.");

/** The SSH tunnel's fields without the rule that one credential is given. */
export const sshConfigFields = z
  .object({
    host: hostSchema.describe("The SSH server's host name or IP address."),
    port: portSchema.describe("The SSH server's port."),
    user: z.string().min(1).describe('The SSH user.'),
    password: z.string().optional().describe("The SSH user's password (a secret field)."),
    privateKey: z.string().optional().describe("The SSH user's private key, PEM (a secret field)."),
    hostKey: z
      .string()
      .min(1)
      .optional()
      .describe(
        "The server's public host key, as a line of authorized_keys or known_hosts (`ssh-ed25519 AAAA…`); " +
          'the tunnel refuses a server with another key.',
      ),
  })
  .strict();

export const sshConfigSchema = sshConfigFields.refine((ssh) => Boolean(ssh.password || ssh.privateKey), {
  message: 'ssh tunnel needs a password or a private key',
});

export const relationalConfigSchema = z
  .object({
    host: hostSchema,
    port: portSchema,
    user: z.string().min(1).describe('The PostgreSQL user.'),
    password: z.string().describe("The user's password (a secret field)."),
    database: z.string().min(1).describe('The database.'),
    sshConfig: sshConfigSchema.optional().describe('Connect through an SSH tunnel.'),
    // TLS, as libpq's sslmode would say it (connectors/postgres/driver/tls.ts, docs/security.md):
    // nothing set is `prefer`, disableTls `disable`, requireTls or rootCa `verify-full`
    // (against rootCa, else the public CAs), skipCertVerification `require`.
    requireTls: z
      .boolean()
      .optional()
      .describe(
        "TLS with the server's certificate verified (sslmode verify-full); default: TLS when offered.",
      ),
    disableTls: z.boolean().optional().describe('Plain TCP, no TLS (sslmode disable).'),
    rootCa: z
      .string()
      .min(1)
      .optional()
      .describe(
        "PEM certificates of the CA(s) the server's certificate must chain to (sslmode verify-full).",
      ),
    tlsHost: hostSchema
      .optional()
      .describe("The name the server's certificate must carry and the TLS server name (SNI); default: host."),
    skipCertVerification: z
      .boolean()
      .optional()
      .describe(
        'TLS without certificate verification (sslmode require): encrypted, but open to an impostor.',
      ),
  })
  .strict();

export const analyticsConfigSchema = z
  .object({
    host: hostSchema,
    port: portSchema.describe(
      "The server's native TCP port, as existing clients send it (9000 maps to HTTP 8123, 9440 to 8443).",
    ),
    httpPort: portSchema
      .optional()
      .describe('The HTTP(S) port; derived from `port` when absent (9000 → 8123, 9440 → 8443).'),
    user: z.string().min(1).describe('The ClickHouse user.'),
    password: z.string().describe("The user's password (a secret field)."),
    database: z.string().min(1).describe('The database the mirror creates its tables and checkpoints in.'),
    disableTls: z.boolean().default(false).describe('Plain HTTP; otherwise HTTPS.'),
    certificate: z
      .string()
      .optional()
      .describe('PEM client certificate for mutual TLS; needs privateKey and rootCa.'),
    privateKey: z.string().optional().describe('PEM private key of `certificate` (a secret field).'),
    rootCa: z.string().optional().describe("PEM CA certificate(s) to trust instead of the system's."),
    objstorePath: z
      .string()
      .regex(/^[a-z0-9]+:\/\/[^/]+(\/.*)?$/, 'expected <scheme>://<bucket>/<path>')
      .optional()
      .describe('An object-storage stage, <scheme>://<bucket>/<path>: accepted and stored, not used yet.'),
    accessKeyId: z.string().optional().describe("The object-storage stage's access key id (not used yet)."),
    secretAccessKey: z
      .string()
      .optional()
      .describe("The object-storage stage's secret access key (a secret field; not used yet)."),
    region: z.string().optional().describe("The object-storage stage's region (not used yet)."),
    endpoint: z.string().optional().describe("The object-storage stage's endpoint URL (not used yet)."),
  })
  .strict();

export const datawarehouseConfigSchema = z
  .object({
    accountId: z.string().min(1).describe('The Snowflake account identifier (myorg-myaccount).'),
    username: z.string().min(1).describe('The user the key pair is registered for.'),
    privateKey: z
      .string()
      .min(1)
      .describe(
        "The user's private key, PEM or PKCS#8; when encrypted, its passphrase is `password` (a secret field).",
      ),
    password: z
      .string()
      .optional()
      .describe("The private key's passphrase, when it is encrypted (a secret field)."),
    database: z.string().min(1).describe("Where the target tables and the connector's own objects go."),
    warehouse: z.string().min(1).describe('The warehouse every statement runs on.'),
    role: z
      .string()
      .min(1)
      .describe('The name of the role to connect with (the interface declares it boolean; it is a name).'),
    queryTimeout: z.number().int().positive().default(30).describe('Seconds any one statement may run.'),
    accessUrl: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe(
        'The service URL, for private connectivity; default https://<account>.snowflakecomputing.com.',
      ),
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
    servers: z
      .array(z.string().regex(/^[^\s:]+:\d{1,5}$/, 'expected host:port'))
      .min(1)
      .describe('Bootstrap brokers, host:port each.'),
    username: z
      .string()
      .default('')
      .describe('The SASL user; without one no SASL is used (a client certificate, or no authentication).'),
    password: z.string().default('').describe('The SASL password (a secret field).'),
    sasl: z
      .enum(['', ...saslMechanisms])
      .default('')
      .describe('The SASL mechanism: required with a username, empty without one.'),
    disableTls: z.boolean().default(false).describe('Plain TCP to the brokers; otherwise TLS.'),
    partitioner: z
      .enum(partitioners)
      .default('')
      .describe(
        "How a message's partition is chosen, with franz-go's meanings ('' hashes the key; docs/kafka.md).",
      ),
    compression: z
      .enum(streamCompressions)
      .default('none')
      .describe(
        'How record batches are compressed on the wire and on the brokers (an addition to the interface).',
      ),
    certificate: z
      .string()
      .optional()
      .describe('PEM client certificate (chain) for mutual TLS; needs `privateKey`.'),
    privateKey: z.string().optional().describe('PEM private key of `certificate` (a secret field).'),
    rootCa: z
      .string()
      .optional()
      .describe("PEM CA certificates that verify the brokers, instead of the system's."),
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

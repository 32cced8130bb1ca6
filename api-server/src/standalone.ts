// Standalone mode (`make start`, `npm start`): the /api/v1 facade, the
// reconcilers and the mirrors' engines in one process, with embedded state in
// a data directory.
import { parseArgs } from 'node:util';
import { z } from 'zod';
import {
  auditRetentionInput,
  auditRetentionSchema,
  browseColumns,
  browseSchemas,
  browseTables,
  checkMirrorSource,
  checkPeer,
  createProcessLogger,
  findMissingTables,
  logProcessWarnings,
  logRetentionInput,
  logRetentionSchema,
  noticeIntervalMsFromEnvironment,
  slotHealthIntervalMsFromEnvironment,
  stallAfterMsFromEnvironment,
  type WebhookConfig,
  webhookConfigFromEnvironment,
} from '../../engine/src/index.ts';
import { buildApp } from './http/app.ts';
import type { AuthConfig } from './http/auth.ts';
import { sourceBrowser } from './http/context.ts';
import { type ApiCredential, apiPasswordUser, readCredentialsFile } from './http/credentials-file.ts';
import {
  apiPasswordSchema,
  listenerConfigFields,
  listenerOptionsOf,
  listenerStartProblem,
  tlsFilesTogether,
} from './http/listener.ts';
import { readSecretFile } from './http/secret-file.ts';
import { startControlPlane } from './standalone/control-plane.ts';
import { PeerSecretFiles } from './standalone/peer-secret-files.ts';

const usage = `usage: tributary standalone [options]

Serves the /api/v1 interface and runs every mirror in this process, keeping
peers, mirrors, scripts and the catalog in an embedded database.

Options (each also read from the environment variable shown):
  --data-dir DIR          TRIBUTARY_DATA_DIR        state directory (default ./.data)
  --host HOST             TRIBUTARY_HOST            listen address (default 127.0.0.1)
  --port PORT             TRIBUTARY_PORT            listen port (default 8112)
  --password-file FILE    TRIBUTARY_API_PASSWORD_FILE  file holding the API password
                          TRIBUTARY_API_PASSWORD    the API password itself
  --user NAME             TRIBUTARY_API_USER        optional user name besides the empty one
  --credentials-file FILE TRIBUTARY_API_CREDENTIALS_FILE  more credentials, each with a role (read,
                                                    operate or admin), as \`tributary credentials
                                                    hash\` prints them; mode 0600, read at start
  --tls-cert-file FILE    TRIBUTARY_TLS_CERT_FILE   serve HTTPS with this PEM certificate chain
  --tls-key-file FILE     TRIBUTARY_TLS_KEY_FILE    and this key (both reloaded when they change)
  --trust-proxy VALUE     TRIBUTARY_TRUST_PROXY     proxies whose X-Forwarded-For is believed: a number of
                                                    hops (1: one ingress), true (any), or addresses/CIDRs
  --metrics-auth          TRIBUTARY_METRICS_AUTH=true  /metrics asks for the API credentials too
  --peer-secrets-dir DIR  TRIBUTARY_PEER_SECRETS_DIR  peer secret fields from files DIR/<peer>/<field>
                                                    (e.g. DIR/shop/password), read at each use and
                                                    taking the place of the value sent to the API
  --notify-url-file FILE  TRIBUTARY_NOTIFY_URL_FILE  send notifications (mirror failed, recovered, slot in
                                                    danger, table errored) to the webhook URL this file
                                                    holds, read at each delivery
                          TRIBUTARY_NOTIFY_FORMAT   json (default) or slack: the body of each notification
                          TRIBUTARY_NOTIFY_CHECK_SECONDS  how often mirrors are looked at for news (default 10)
  --auth-disabled         TRIBUTARY_AUTH=disabled   no authentication (local use only)
  --scripts-disabled      TRIBUTARY_SCRIPTS=disabled   refuse scripts
  --log-level LEVEL       TRIBUTARY_LOG_LEVEL       pino level (default info)
  --log-format FORMAT     TRIBUTARY_LOG_FORMAT      json, pretty (coloured lines) or auto (default:
                                                    pretty on a terminal, JSON otherwise)
                          TRIBUTARY_MIRROR_LOG_MAX_ENTRIES  log entries kept per mirror (default 10000)
                          TRIBUTARY_MIRROR_LOG_MAX_AGE_DAYS  days a log entry is kept (default 30; 0: no limit)
                          TRIBUTARY_AUDIT_MAX_ENTRIES  audit entries kept (default 100000)
                          TRIBUTARY_AUDIT_MAX_AGE_DAYS  days an audit entry is kept (default 365; 0: no limit)
                          TRIBUTARY_STALL_SECONDS   a step without progress this long shows as stalled (default 300)
                          TRIBUTARY_SLOT_HEALTH_SECONDS  how often every mirror's slot is read at its source (default 30)
  -h, --help

There is no default password: without one the service refuses to start
unless authentication is disabled explicitly. A password shorter than 16
characters is refused too.`;

const configSchema = z
  .object({
    dataDir: z.string().min(1).default('./.data'),
    host: z.string().min(1).default('127.0.0.1'),
    port: z.coerce.number().int().min(0).max(65_535).default(8112),
    password: apiPasswordSchema.optional(),
    user: z.string().min(1).optional(),
    credentialsFile: z.string().min(1).optional(),
    peerSecretsDir: z.string().min(1).optional(),
    notifyUrlFile: z.string().min(1).optional(),
    authDisabled: z.boolean().default(false),
    scriptsDisabled: z.boolean().default(false),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    logRetention: logRetentionSchema,
    auditRetention: auditRetentionSchema,
    ...listenerConfigFields,
  })
  .refine((config) => config.authDisabled || config.password, {
    message:
      'no API password: set TRIBUTARY_API_PASSWORD or --password-file, or disable authentication explicitly',
  })
  .refine((config) => !(config.authDisabled && config.credentialsFile), {
    message: 'a credentials file needs authentication: drop --auth-disabled or --credentials-file',
  })
  .refine(tlsFilesTogether.check, { message: tlsFilesTogether.message });

export type StandaloneConfig = z.infer<typeof configSchema>;

function readConfig(argv: readonly string[], env: NodeJS.ProcessEnv): StandaloneConfig | 'help' {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      'data-dir': { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      'password-file': { type: 'string' },
      user: { type: 'string' },
      'credentials-file': { type: 'string' },
      'peer-secrets-dir': { type: 'string' },
      'notify-url-file': { type: 'string' },
      'auth-disabled': { type: 'boolean' },
      'scripts-disabled': { type: 'boolean' },
      'log-level': { type: 'string' },
      'tls-cert-file': { type: 'string' },
      'tls-key-file': { type: 'string' },
      'trust-proxy': { type: 'string' },
      'metrics-auth': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  const passwordFile = values['password-file'] ?? env.TRIBUTARY_API_PASSWORD_FILE;
  const password = passwordFile
    ? readSecretFile(passwordFile, 'API password file', false).trim()
    : env.TRIBUTARY_API_PASSWORD;
  return Object.freeze(
    configSchema.parse({
      dataDir: values['data-dir'] ?? env.TRIBUTARY_DATA_DIR,
      host: values.host ?? env.TRIBUTARY_HOST,
      port: values.port ?? env.TRIBUTARY_PORT,
      password: password || undefined,
      user: values.user ?? env.TRIBUTARY_API_USER,
      credentialsFile: values['credentials-file'] ?? (env.TRIBUTARY_API_CREDENTIALS_FILE || undefined),
      peerSecretsDir: values['peer-secrets-dir'] ?? (env.TRIBUTARY_PEER_SECRETS_DIR || undefined),
      notifyUrlFile: values['notify-url-file'] ?? (env.TRIBUTARY_NOTIFY_URL_FILE || undefined),
      authDisabled: values['auth-disabled'] ?? env.TRIBUTARY_AUTH === 'disabled',
      scriptsDisabled: values['scripts-disabled'] ?? env.TRIBUTARY_SCRIPTS === 'disabled',
      logLevel: values['log-level'] ?? env.TRIBUTARY_LOG_LEVEL,
      logRetention: logRetentionInput(env),
      auditRetention: auditRetentionInput(env),
      tlsCertFile: values['tls-cert-file'] ?? (env.TRIBUTARY_TLS_CERT_FILE || undefined),
      tlsKeyFile: values['tls-key-file'] ?? (env.TRIBUTARY_TLS_KEY_FILE || undefined),
      trustProxy: values['trust-proxy'] ?? (env.TRIBUTARY_TRUST_PROXY || undefined),
      metricsAuth: values['metrics-auth'] ?? env.TRIBUTARY_METRICS_AUTH === 'true',
    }),
  );
}

export async function main(argv: readonly string[]): Promise<number> {
  let config: StandaloneConfig | 'help';
  let stallAfterMs: number;
  let slotHealthIntervalMs: number;
  let webhook: WebhookConfig | undefined;
  let noticeIntervalMs: number;
  let credentials: ApiCredential[] = [];
  try {
    config = readConfig(argv, process.env);
    // Mode 0600, as the data directory's files: its hashes would let others guess tokens offline.
    if (config !== 'help' && config.credentialsFile) {
      credentials = readCredentialsFile(config.credentialsFile, {
        groupMayRead: false,
        reservedUsers: [apiPasswordUser, ...(config.user ? [config.user] : [])],
      });
    }
    // Read once, here at start-up: an invalid value stops the service with its name.
    stallAfterMs = stallAfterMsFromEnvironment(process.env);
    slotHealthIntervalMs = slotHealthIntervalMsFromEnvironment(process.env);
    noticeIntervalMs = noticeIntervalMsFromEnvironment(process.env);
    webhook = config === 'help' ? undefined : webhookConfigFromEnvironment(process.env, config.notifyUrlFile);
  } catch (error) {
    const message =
      error instanceof z.ZodError
        ? error.issues.map((issue) => issue.message).join('; ')
        : error instanceof Error
          ? error.message
          : String(error);
    console.error(`tributary standalone: ${message}\n\n${usage}`);
    return 2;
  }
  if (config === 'help') {
    console.log(usage);
    return 0;
  }
  const listener = listenerOptionsOf(config);
  const listenerProblem = listenerStartProblem(listener);
  if (listenerProblem) {
    console.error(`tributary standalone: ${listenerProblem}`);
    return 2;
  }
  const logger = createProcessLogger({ level: config.logLevel });
  logProcessWarnings(logger);
  // Files created with default modes are the service's alone. The embedded
  // database sets some modes itself (0644), so what guarantees privacy is the
  // data directory's 0700, enforced at start (standalone/data-dir.ts).
  process.umask(0o077);
  const auth: AuthConfig = config.authDisabled
    ? { mode: 'disabled' }
    : { mode: 'basic', password: config.password ?? '', user: config.user, credentials };
  if (config.authDisabled)
    logger.warn('authentication is disabled: anyone who reaches the port controls the service');

  const peerSecretFiles = config.peerSecretsDir ? new PeerSecretFiles(config.peerSecretsDir) : undefined;
  const controlPlane = await startControlPlane({
    dataDir: config.dataDir,
    logger,
    logRetention: config.logRetention,
    auditRetention: config.auditRetention,
    stallAfterMs,
    slotHealthIntervalMs,
    ...(webhook ? { notifications: { webhook, intervalMs: noticeIntervalMs } } : {}),
    ...(peerSecretFiles ? { peerSecretFiles } : {}),
  });
  const app = buildApp(
    {
      store: controlPlane.store,
      catalog: controlPlane.catalog,
      // A new peer is checked with the secrets it will run with.
      checkPeer: (peer) => checkPeer(peerSecretFiles ? peerSecretFiles.apply(peer) : peer),
      findMissingTables,
      checkMirrorSource,
      browseSource: sourceBrowser(
        { schemas: browseSchemas, tables: browseTables, columns: browseColumns },
        (peer) => (peerSecretFiles ? peerSecretFiles.apply(peer) : peer),
      ),
      scriptsEnabled: !config.scriptsDisabled,
      auth,
      logger,
      ...(controlPlane.engineMetrics ? { engineMetrics: controlPlane.engineMetrics.registry } : {}),
    },
    listener,
  );
  await app.listen({ host: config.host, port: config.port });
  await controlPlane.resumeMirrors();
  const scheme = listener.tls ? 'https' : 'http';
  logger.info(
    { url: `${scheme}://${config.host}:${config.port}/api/v1`, dataDir: config.dataDir },
    'tributary standalone ready',
  );

  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  logger.info('shutting down: stopping mirrors at their next batch boundary');
  await app.close();
  await controlPlane.close();
  return 0;
}

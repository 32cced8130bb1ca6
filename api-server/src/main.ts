// The `api-server` role (cluster mode): the /api/v1 facade over the Kubernetes
// API (Peer, Mirror, Script resources and peer Secrets in one namespace) and
// the catalog database. The operator does the reconciling.
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import pg from 'pg';
import { z } from 'zod';
import {
  auditRetentionInput,
  auditRetentionSchema,
  checkMirrorSource,
  checkPeer,
  createProcessLogger,
  findMissingTables,
  logProcessWarnings,
  PostgresCatalog,
} from '../../engine/src/index.ts';
import { KubeStore } from '../../operator/src/index.ts';
import { buildApp } from './http/app.ts';
import type { AuthConfig } from './http/auth.ts';
import { type ApiCredential, apiPasswordUser, readCredentialsFile } from './http/credentials-file.ts';
import {
  apiPasswordSchema,
  listenerConfigFields,
  listenerOptionsOf,
  listenerStartProblem,
  tlsFilesTogether,
} from './http/listener.ts';
import { readSecretFile } from './http/secret-file.ts';

const usage = `usage: tributary api-server [options]

  --namespace NS         TRIBUTARY_NAMESPACE (or POD_NAMESPACE)
  --catalog-url URL      TRIBUTARY_CATALOG_URL
  --host HOST            TRIBUTARY_HOST (default 0.0.0.0)
  --port PORT            TRIBUTARY_PORT (default 8112)
  --password-file FILE   TRIBUTARY_API_PASSWORD_FILE, or TRIBUTARY_API_PASSWORD
  --user NAME            TRIBUTARY_API_USER
  --credentials-file F   TRIBUTARY_API_CREDENTIALS_FILE  more credentials with roles (the chart
                         mounts api.credentials.existingSecret here); read at start
  --tls-cert-file FILE   TRIBUTARY_TLS_CERT_FILE  serve HTTPS with this PEM certificate chain
  --tls-key-file FILE    TRIBUTARY_TLS_KEY_FILE   and this key (both reloaded when they change)
  --trust-proxy VALUE    TRIBUTARY_TRUST_PROXY    proxies whose X-Forwarded-For is believed: a number of
                                                  hops (1: one ingress), true (any), or addresses/CIDRs
  --metrics-auth         TRIBUTARY_METRICS_AUTH=true  /metrics asks for the API credentials too
  --scripts-disabled     TRIBUTARY_SCRIPTS=disabled
  --kubeconfig FILE      KUBECONFIG (outside a cluster)`;

const configSchema = z
  .object({
    namespace: z.string().min(1),
    catalogUrl: z.string().min(1),
    host: z.string().default('0.0.0.0'),
    port: z.coerce.number().int().min(0).max(65_535).default(8112),
    password: z
      .string()
      .min(1, 'no API password: set TRIBUTARY_API_PASSWORD_FILE or TRIBUTARY_API_PASSWORD')
      .pipe(apiPasswordSchema),
    user: z.string().optional(),
    credentialsFile: z.string().min(1).optional(),
    auditRetention: auditRetentionSchema,
    scriptsDisabled: z.boolean().default(false),
    kubeconfig: z.string().optional(),
    logLevel: z.string().default('info'),
    ...listenerConfigFields,
  })
  .refine(tlsFilesTogether.check, { message: tlsFilesTogether.message });

export async function main(argv: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      namespace: { type: 'string' },
      'catalog-url': { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      'password-file': { type: 'string' },
      user: { type: 'string' },
      'credentials-file': { type: 'string' },
      'scripts-disabled': { type: 'boolean' },
      kubeconfig: { type: 'string' },
      'tls-cert-file': { type: 'string' },
      'tls-key-file': { type: 'string' },
      'trust-proxy': { type: 'string' },
      'metrics-auth': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  const env = process.env;
  const passwordFile = values['password-file'] ?? env.TRIBUTARY_API_PASSWORD_FILE;
  let filePassword: string | undefined;
  try {
    // A Secret volume's file: its group (the pod's fsGroup) may read it.
    filePassword = passwordFile ? readSecretFile(passwordFile, 'API password file', true).trim() : undefined;
  } catch (error) {
    console.error(`tributary api-server: ${(error as Error).message}`);
    return 2;
  }
  const parsed = configSchema.safeParse({
    namespace: values.namespace ?? env.TRIBUTARY_NAMESPACE ?? env.POD_NAMESPACE,
    catalogUrl: values['catalog-url'] ?? env.TRIBUTARY_CATALOG_URL,
    host: values.host ?? env.TRIBUTARY_HOST,
    port: values.port ?? env.TRIBUTARY_PORT,
    password: filePassword ?? env.TRIBUTARY_API_PASSWORD ?? '',
    user: values.user ?? env.TRIBUTARY_API_USER,
    credentialsFile: values['credentials-file'] ?? (env.TRIBUTARY_API_CREDENTIALS_FILE || undefined),
    auditRetention: auditRetentionInput(env),
    scriptsDisabled: values['scripts-disabled'] ?? env.TRIBUTARY_SCRIPTS === 'disabled',
    kubeconfig: values.kubeconfig ?? env.KUBECONFIG,
    logLevel: env.TRIBUTARY_LOG_LEVEL,
    tlsCertFile: values['tls-cert-file'] ?? (env.TRIBUTARY_TLS_CERT_FILE || undefined),
    tlsKeyFile: values['tls-key-file'] ?? (env.TRIBUTARY_TLS_KEY_FILE || undefined),
    trustProxy: values['trust-proxy'] ?? (env.TRIBUTARY_TRUST_PROXY || undefined),
    metricsAuth: values['metrics-auth'] ?? env.TRIBUTARY_METRICS_AUTH === 'true',
  });
  if (!parsed.success) {
    console.error(
      `tributary api-server: ${parsed.error.issues.map((i) => (i.path.length > 0 ? `${i.path.join('.')}: ${i.message}` : i.message)).join('; ')}\n\n${usage}`,
    );
    return 2;
  }
  const config = Object.freeze(parsed.data);
  let credentials: ApiCredential[] = [];
  if (config.credentialsFile) {
    try {
      // A Secret volume: root-owned, the pod's fsGroup may read it (the chart's mode 0440).
      credentials = readCredentialsFile(config.credentialsFile, {
        groupMayRead: true,
        reservedUsers: [apiPasswordUser, ...(config.user ? [config.user] : [])],
      });
    } catch (error) {
      console.error(`tributary api-server: ${(error as Error).message}`);
      return 2;
    }
  }
  const listener = listenerOptionsOf(config);
  const listenerProblem = listenerStartProblem(listener);
  if (listenerProblem) {
    console.error(`tributary api-server: ${listenerProblem}`);
    return 2;
  }
  const logger = createProcessLogger({ level: config.logLevel, base: { role: 'api-server' } });
  logProcessWarnings(logger);
  const kubeConfig = new KubeConfig();
  if (config.kubeconfig) kubeConfig.loadFromFile(config.kubeconfig);
  else kubeConfig.loadFromCluster();
  const pool = new pg.Pool({ connectionString: config.catalogUrl, max: 8 });
  pool.on('error', (error) => logger.warn({ err: error }, 'catalog connection error'));
  const catalog = new PostgresCatalog(pool, { auditRetention: config.auditRetention });
  await catalog.migrate();
  const auth: AuthConfig = { mode: 'basic', password: config.password, user: config.user, credentials };
  const app = buildApp(
    {
      store: new KubeStore(kubeConfig, config.namespace),
      catalog,
      checkPeer: (peer) => checkPeer(peer),
      findMissingTables,
      checkMirrorSource,
      scriptsEnabled: !config.scriptsDisabled,
      auth,
      logger,
    },
    listener,
  );
  await app.listen({ host: config.host, port: config.port });
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await app.close();
  await pool.end();
  return 0;
}

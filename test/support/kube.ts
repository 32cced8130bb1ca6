// Helpers for tests against the real kube-apiserver of the test environment.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import {
  ApiException,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  loadYaml,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { customResourceDefinitions } from '../../operator/src/crds/definitions.ts';
import { waitFor } from './databases.ts';
import { kube } from './testenv.ts';

export function adminConfig(): KubeConfig {
  const config = new KubeConfig();
  config.loadFromFile(kube.adminKubeconfig);
  return config;
}

/** Creates or replaces the product's CRDs and waits until they are served. */
export async function installCrds(config = adminConfig()): Promise<void> {
  const api = config.makeApiClient(ApiextensionsV1Api);
  for (const raw of customResourceDefinitions()) {
    // client-node serialises only the typed model's fields (`_default`, not
    // `default`): plain JSON must be deserialised into the model first.
    const definition = loadYaml<V1CustomResourceDefinition>(JSON.stringify(raw));
    const name = definition.metadata?.name ?? '';
    // Suites running in parallel (and kubectl in one of them) write the same
    // definitions: a conflict means another writer won the race, so go again.
    for (let attempt = 1; ; attempt++) {
      try {
        await createOrReplace(api, name, definition);
        break;
      } catch (error) {
        if (!(error instanceof ApiException) || error.code !== 409 || attempt === 5) throw error;
      }
    }
    await waitFor(
      async () =>
        (await api.readCustomResourceDefinition({ name })).status?.conditions?.some(
          (condition) => condition.type === 'Established' && condition.status === 'True',
        ) === true,
      30_000,
      `${name} established`,
    );
    await waitUntilListed(config, definition);
  }
}

/**
 * Creates the product's CRDs where they are missing and waits until they are
 * served; a definition already installed is left as it is, for the suites
 * that run against it meanwhile.
 */
export async function ensureCrds(config = adminConfig()): Promise<void> {
  const api = config.makeApiClient(ApiextensionsV1Api);
  for (const raw of customResourceDefinitions()) {
    const definition = loadYaml<V1CustomResourceDefinition>(JSON.stringify(raw));
    const name = definition.metadata?.name ?? '';
    const installed = await api.readCustomResourceDefinition({ name }).then(
      () => true,
      (error: unknown) => {
        if (error instanceof ApiException && error.code === 404) return false;
        throw error;
      },
    );
    if (!installed) {
      // A conflict: another suite created it first.
      await api.createCustomResourceDefinition({ body: definition }).catch((error: unknown) => {
        if (!(error instanceof ApiException) || error.code !== 409) throw error;
      });
    }
    await waitFor(
      async () =>
        (await api.readCustomResourceDefinition({ name })).status?.conditions?.some(
          (condition) => condition.type === 'Established' && condition.status === 'True',
        ) === true,
      30_000,
      `${name} established`,
    );
    await waitUntilListed(config, definition);
  }
}

/** Waits until every product CRD is served (listing works), after kubectl installed them. */
export async function waitUntilCrdsServed(config = adminConfig()): Promise<void> {
  for (const raw of customResourceDefinitions()) {
    await waitUntilListed(config, loadYaml<V1CustomResourceDefinition>(JSON.stringify(raw)));
  }
}

/**
 * Established is not yet served: the apiserver builds a new (or changed) CRD's
 * storage and watch cache after that, and answers 429 "storage is
 * (re)initializing" meanwhile, longer on a busy machine. A list that succeeds
 * is the condition tests need.
 */
async function waitUntilListed(config: KubeConfig, definition: V1CustomResourceDefinition): Promise<void> {
  const objects = config.makeApiClient(CustomObjectsApi);
  const group = definition.spec.group;
  const plural = definition.spec.names.plural;
  for (const { name: version } of definition.spec.versions.filter((candidate) => candidate.served)) {
    await waitFor(
      async () => {
        await objects.listClusterCustomObject({ group, version, plural, limit: 1 });
        return true;
      },
      60_000,
      `${plural}.${group}/${version} to be listed`,
    );
  }
}

async function createOrReplace(
  api: ApiextensionsV1Api,
  name: string,
  definition: V1CustomResourceDefinition,
): Promise<void> {
  try {
    const current = await api.readCustomResourceDefinition({ name });
    const resourceVersion = current.metadata?.resourceVersion;
    const body = {
      ...definition,
      metadata: { ...definition.metadata, ...(resourceVersion ? { resourceVersion } : {}) },
    };
    await api.replaceCustomResourceDefinition({ name, body });
  } catch (error) {
    if (!(error instanceof ApiException) || error.code !== 404) throw error;
    await api.createCustomResourceDefinition({ body: definition });
  }
}

/** A namespace of its own per suite (namespaces are never deleted: nothing would finalize them). */
export async function createNamespace(prefix: string, config = adminConfig()): Promise<string> {
  const name = `${prefix}-${randomBytes(4).toString('hex')}`;
  await config.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  return name;
}

/** The HTTP status of a call: 200 on success, the API error's code otherwise. */
export async function statusOf(call: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await call;
    return { code: 200, message: '' };
  } catch (error) {
    if (!(error instanceof ApiException)) throw error;
    const body: unknown = typeof error.body === 'string' ? JSON.parse(error.body) : error.body;
    const message = (body as { message?: unknown } | undefined)?.message;
    return { code: error.code, message: typeof message === 'string' ? message : '' };
  }
}

const execFileAsync = promisify(execFile);

/**
 * Runs the real kubectl as the admin identity, with `input` on its standard
 * input (for `-f -`); rejects with its stderr when it fails.
 */
export async function kubectl(args: readonly string[], input?: string): Promise<string> {
  try {
    const run = execFileAsync(kube.kubectl, ['--kubeconfig', kube.adminKubeconfig, ...args], {
      maxBuffer: 16 * 1024 * 1024,
    });
    run.child.stdin?.end(input ?? '');
    const { stdout } = await run;
    return stdout;
  } catch (error) {
    const stderr = (error as { stderr?: unknown }).stderr;
    throw new Error(
      `kubectl ${args.join(' ')} failed: ${typeof stderr === 'string' ? stderr.trim() : error}`,
    );
  }
}

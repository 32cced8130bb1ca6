// The cluster the plugin talks to, as kubectl would pick it: the kubeconfig
// from --kubeconfig, else the files KUBECONFIG lists, else ~/.kube/config,
// else the pod's service account inside a cluster; the context from
// --context, else the current one; the namespace from -n, else the context's,
// else `default`.
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { PluginError } from './plugin-error.ts';

export interface Cluster {
  readonly kubeConfig: KubeConfig;
  /** The context's name, for messages. */
  readonly context: string;
  /** The API server's URL, for messages. */
  readonly server: string;
  /** The namespace the command works in (all of them for `list -A`: see the command). */
  readonly namespace: string;
}

export interface ClusterChoice {
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  readonly namespace: string | undefined;
}

function kubeconfigFiles(choice: ClusterChoice, env: NodeJS.ProcessEnv): string[] {
  if (choice.kubeconfig !== undefined) return [choice.kubeconfig];
  const listed = (env.KUBECONFIG ?? '').split(delimiter).filter((file) => file !== '');
  if (listed.length > 0) return listed;
  const home = env.HOME ?? env.USERPROFILE;
  const file = home ? join(home, '.kube', 'config') : undefined;
  return file && existsSync(file) ? [file] : [];
}

/**
 * The files merged as kubectl merges them: the first file that sets a
 * current context wins, and so does the first cluster, user or context of a
 * name (client-node's own merge refuses a name twice).
 */
function loadFiles(files: readonly string[]): KubeConfig {
  const config = new KubeConfig();
  for (const file of files) {
    const loaded = new KubeConfig();
    try {
      loaded.loadFromFile(file);
    } catch (error) {
      throw new PluginError(`cannot read the kubeconfig ${file}: ${(error as Error).message}`);
    }
    if (!config.currentContext) config.setCurrentContext(loaded.currentContext);
    for (const cluster of loaded.clusters) if (!config.getCluster(cluster.name)) config.addCluster(cluster);
    for (const user of loaded.users) if (!config.getUser(user.name)) config.addUser(user);
    for (const context of loaded.contexts)
      if (!config.getContextObject(context.name)) config.addContext(context);
  }
  return config;
}

export function connectToCluster(choice: ClusterChoice, env: NodeJS.ProcessEnv): Cluster {
  const files = kubeconfigFiles(choice, env);
  let kubeConfig: KubeConfig;
  if (files.length > 0) {
    kubeConfig = loadFiles(files);
  } else if (env.KUBERNETES_SERVICE_HOST) {
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromCluster();
  } else {
    throw new PluginError('no kubeconfig: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config');
  }
  if (choice.context !== undefined) {
    if (!kubeConfig.getContextObject(choice.context)) {
      const known = kubeConfig.getContexts().map((context) => context.name);
      throw new PluginError(
        `no context ${JSON.stringify(choice.context)} in the kubeconfig (it has: ${known.join(', ') || 'none'})`,
      );
    }
    kubeConfig.setCurrentContext(choice.context);
  }
  const context = kubeConfig.getCurrentContext();
  const contextObject = kubeConfig.getContextObject(context);
  if (!contextObject) throw new PluginError('the kubeconfig has no current context: pass --context');
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new PluginError(`context ${context} names no cluster the kubeconfig defines`);
  return {
    kubeConfig,
    context,
    server: cluster.server,
    namespace: choice.namespace ?? (contextObject.namespace || 'default'),
  };
}

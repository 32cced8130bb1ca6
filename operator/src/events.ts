// Kubernetes Events on our resources, so `kubectl describe` tells a mirror's story.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { group, version } from './crds/schemas.ts';
import { kubeObjectName } from './kube/object-names.ts';

export interface EventTarget {
  readonly kind: 'Mirror' | 'Peer' | 'Script';
  readonly name: string;
  readonly uid?: string | undefined;
}

export class EventRecorder {
  readonly #core: CoreV1Api;
  readonly #namespace: string;
  readonly #logger: Logger;

  constructor(kubeConfig: KubeConfig, namespace: string, logger: Logger) {
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
    this.#namespace = namespace;
    this.#logger = logger;
  }

  async record(
    target: EventTarget,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> {
    const now = new Date();
    // `target.name` is the API name; the event names the object (kube/object-names.ts).
    const objectName = kubeObjectName(target.name);
    try {
      await this.#core.createNamespacedEvent({
        namespace: this.#namespace,
        body: {
          metadata: { generateName: `${objectName}.`, namespace: this.#namespace },
          involvedObject: {
            apiVersion: `${group}/${version}`,
            kind: target.kind,
            name: objectName,
            namespace: this.#namespace,
            ...(target.uid ? { uid: target.uid } : {}),
          },
          type,
          reason,
          // Event messages are capped by the API server; keep them to one line.
          message: message.slice(0, 1000),
          source: { component: 'tributary-operator' },
          reportingComponent: 'tributary.dev/operator',
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
    } catch (error) {
      this.#logger.warn({ err: error, reason }, 'could not record an event');
    }
  }
}

// Kubernetes Events on our resources, so `kubectl describe` tells a mirror's story.
//
// An Event that repeats (same object, type, reason and message) within
// `repeatWindowMs` of its last occurrence is not written again: the existing
// Event's `count` and `lastTimestamp` move, as client-go's recorder does, so a
// fault that keeps recurring is one line with its count, not a flood.
import {
  ApiException,
  CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { group, version } from './crds/api-group.ts';
import { kubeObjectName } from './kube/object-names.ts';

export interface EventTarget {
  readonly kind: 'Mirror' | 'Peer' | 'Script';
  readonly name: string;
  readonly uid?: string | undefined;
}

/** client-go's: a repeat within 10 minutes of the last one is counted on the same Event. */
const repeatWindowMs = 10 * 60_000;
/** The most recent Events remembered for counting repeats (the oldest is forgotten first). */
const rememberedEvents = 4096;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface Recorded {
  readonly name: string;
  count: number;
  lastAt: number;
}

export class EventRecorder {
  readonly #core: CoreV1Api;
  readonly #namespace: string;
  readonly #logger: Logger;
  /** By object, type, reason and message; in order of last use. */
  readonly #recent = new Map<string, Recorded>();

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
    // Event messages are capped by the API server; keep them to one line.
    const shown = message.slice(0, 1000);
    const key = JSON.stringify([target.kind, objectName, target.uid ?? '', type, reason, shown]);
    const recorded = this.#recent.get(key);
    if (recorded && now.getTime() - recorded.lastAt <= repeatWindowMs) {
      if (await this.#counted(recorded, now, key)) return;
    }
    try {
      const created = await this.#core.createNamespacedEvent({
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
          message: shown,
          source: { component: 'tributary-operator' },
          reportingComponent: 'tributary.dev/operator',
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
      const name = created.metadata?.name;
      if (name) this.#remember(key, { name, count: 1, lastAt: now.getTime() });
    } catch (error) {
      this.#logger.warn({ err: error, reason }, 'could not record an event');
    }
  }

  /** Counts a repeat on its Event; false when that Event is gone (expired, deleted) and a new one is due. */
  async #counted(recorded: Recorded, now: Date, key: string): Promise<boolean> {
    try {
      await this.#core.patchNamespacedEvent(
        {
          name: recorded.name,
          namespace: this.#namespace,
          body: { count: recorded.count + 1, lastTimestamp: now },
        },
        mergePatch,
      );
      recorded.count++;
      recorded.lastAt = now.getTime();
      this.#remember(key, recorded);
      return true;
    } catch (error) {
      this.#recent.delete(key);
      if (error instanceof ApiException && error.code === 404) return false;
      this.#logger.warn({ err: error }, 'could not count a repeated event');
      return true;
    }
  }

  #remember(key: string, recorded: Recorded): void {
    this.#recent.delete(key);
    this.#recent.set(key, recorded);
    if (this.#recent.size > rememberedEvents) {
      const oldest = this.#recent.keys().next().value;
      if (oldest !== undefined) this.#recent.delete(oldest);
    }
  }
}

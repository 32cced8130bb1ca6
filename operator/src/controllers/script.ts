// The Script controller: a Script applied with kubectl gets its numeric id
// (the API's handle) here; one created through the facade has it already.
import { ResourceNotFoundError } from '../../../engine/src/index.ts';
import type { ReconcileStore, ScriptSnapshot } from '../kube/reconcile-store.ts';
import type { Controller, Requeue } from './controller.ts';

export interface ScriptControllerOptions {
  readonly objects: ReconcileStore;
}

export class ScriptController implements Controller<ScriptSnapshot, void> {
  readonly #objects: ReconcileStore;

  constructor(options: ScriptControllerOptions) {
    this.#objects = options.objects;
  }

  fetch(name: string): Promise<ScriptSnapshot | undefined> {
    return this.#objects.readScript(name);
  }

  // Nothing is kept for a script; no finalizer.
  async notFound(): Promise<void> {}

  /** An id, once held, is the script's for good: nothing to do at any later generation. */
  upToDate(object: ScriptSnapshot): boolean {
    return object.id !== undefined;
  }

  // The id is the script's whole status: drawing it and writing it (guarded by
  // the object's resourceVersion) is one step, done here.
  async act(object: ScriptSnapshot): Promise<void> {
    await this.#objects.giveScriptId(object).catch((error: unknown) => {
      // Deleted meanwhile: not found, at the next reconcile.
      if (!(error instanceof ResourceNotFoundError)) throw error;
    });
  }

  async conditions(): Promise<void> {}

  // Woken by the informer on a change; nothing to look at in between.
  requeue(): Requeue {
    return undefined;
  }
}

// The Script controller: a Script applied with kubectl gets its numeric id
// (the API's handle) here, as one created through the facade has it already,
// and a Ready condition saying whether its source compiles, so a Lua syntax
// error shows on the Script (`kubectl get scripts`) when it is applied, not
// only when a mirror's engine first runs it. Compiling runs none of the
// script's code (engine/src/scripting/syntax-check.ts).
import { luaSyntaxError, ResourceNotFoundError } from '../../../engine/src/index.ts';
import { type Condition, setCondition } from '../conditions.ts';
import type { EventRecorder } from '../events.ts';
import type { ReconcileStore, ScriptSnapshot } from '../kube/reconcile-store.ts';
import type { Controller, Requeue } from './controller.ts';

export interface ScriptControllerOptions {
  readonly objects: ReconcileStore;
  /** Where a Script that stops (or starts) compiling is told; none in tests that do not look. */
  readonly events?: EventRecorder | undefined;
}

/** What compiling the script's source found: undefined when it compiles, else Lua's message. */
export type ScriptCheck = { readonly syntaxError: string | undefined };

export class ScriptController implements Controller<ScriptSnapshot, ScriptCheck> {
  readonly #options: ScriptControllerOptions;

  constructor(options: ScriptControllerOptions) {
    this.#options = options;
  }

  fetch(name: string): Promise<ScriptSnapshot | undefined> {
    return this.#options.objects.readScript(name);
  }

  // Nothing is kept for a script; no finalizer.
  async notFound(): Promise<void> {}

  /** An id, once held, is the script's for good; the source is compiled once per generation. */
  upToDate(object: ScriptSnapshot): boolean {
    return object.id !== undefined && object.status?.observedGeneration === object.generation;
  }

  async act(object: ScriptSnapshot): Promise<ScriptCheck> {
    // The id's draw and write (guarded by the object's resourceVersion) is one step.
    await this.#options.objects.giveScriptId(object).catch((error: unknown) => {
      // Deleted meanwhile: not found, at the next reconcile.
      if (!(error instanceof ResourceNotFoundError)) throw error;
    });
    return { syntaxError: await luaSyntaxError(object.source, object.name) };
  }

  async conditions(object: ScriptSnapshot, { syntaxError }: ScriptCheck): Promise<void> {
    const conditionsOf = (status: unknown): Condition[] =>
      (status as { conditions?: Condition[] } | undefined)?.conditions ?? [];
    // The id's write moved the resourceVersion: the guarded write is redone from a
    // fresh read (kube/namespace-objects.ts). A spec changed meanwhile has another
    // generation than the one recorded here, so it is compiled at its own reconcile.
    const written = await this.#options.objects.writeScriptStatus(object, (status) => ({
      observedGeneration: object.generation,
      conditions: setCondition(conditionsOf(status), {
        type: 'Ready',
        status: syntaxError === undefined ? 'True' : 'False',
        reason: syntaxError === undefined ? 'Compiled' : 'SyntaxError',
        message: syntaxError ?? 'the source compiles',
        observedGeneration: object.generation,
      }),
    }));
    const events = this.#options.events;
    if (!written || !events) return;
    const was = conditionsOf(object.status).find((condition) => condition.type === 'Ready');
    const target = { kind: 'Script', name: object.name, uid: object.uid } as const;
    if (syntaxError !== undefined && (was?.status !== 'False' || was.message !== syntaxError)) {
      await events.record(target, 'Warning', 'SyntaxError', syntaxError);
    } else if (syntaxError === undefined && was?.status === 'False') {
      await events.record(target, 'Normal', 'Compiled', 'the source compiles');
    }
  }

  // Woken by the informer on a change; nothing to look at in between.
  requeue(): Requeue {
    return undefined;
  }
}

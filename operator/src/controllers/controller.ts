// The one shape of the operator's controllers (after cloudnative-pg's
// internal/controller/*_controller.go): for one key at a time (the work queue
// guarantees it),
//
//   fetch once → not found → finalizer → generation → act → conditions → requeue
//
// `fetch` is the only read of the object in a reconcile: every later step gets
// what it read, and the status write is guarded by that read's resourceVersion
// (kube/reconcile-store.ts, through kube/namespace-objects.ts `writeStatus`), so a write based on a stale read is
// refused by the API server and redone from a fresh read instead of lost.
import type { ObjectSnapshot } from '../kube/reconcile-store.ts';

/** What the work queue does next with a key: look again after a while, or wait for a change. */
export type Requeue = { readonly requeueAfterMs: number } | undefined;

export interface Controller<Snapshot extends ObjectSnapshot, Outcome> {
  /** Reads the object once; undefined when it does not exist. */
  fetch(name: string): Promise<Snapshot | undefined>;
  /** The object is gone: release what was kept for it. Not called again until it reappears. */
  notFound(name: string): Promise<void>;
  /**
   * Runs the finalizer of an object being deleted (and returns 'finalized'),
   * or makes sure a live object carries it and returns the object as it now
   * stands (undefined: it went meanwhile). Absent for kinds without a finalizer.
   */
  finalizer?(object: Snapshot): Promise<Snapshot | 'finalized' | undefined>;
  /** True when the object's generation needs nothing more (then no act, no status, no requeue). */
  upToDate?(object: Snapshot): boolean;
  /** Moves the world towards the object's spec. */
  act(object: Snapshot): Promise<Outcome>;
  /** Writes the status (conditions through `setCondition`) and records Events, from what `act` found. */
  conditions(object: Snapshot, outcome: Outcome): Promise<void>;
  /** When to look again although nothing changed. */
  requeue(object: Snapshot, outcome: Outcome): Requeue;
}

/** One reconcile of `name` in the shape above; the work queue's handler. */
export async function reconcile<Snapshot extends ObjectSnapshot, Outcome>(
  controller: Controller<Snapshot, Outcome>,
  name: string,
): Promise<Requeue> {
  const fetched = await controller.fetch(name);
  if (!fetched) {
    await controller.notFound(name);
    return undefined;
  }
  let object: Snapshot = fetched;
  if (controller.finalizer) {
    const standing = await controller.finalizer(object);
    if (standing === 'finalized') return undefined;
    if (!standing) {
      await controller.notFound(name);
      return undefined;
    }
    object = standing;
  }
  if (controller.upToDate?.(object)) return undefined;
  const outcome = await controller.act(object);
  await controller.conditions(object, outcome);
  return controller.requeue(object, outcome);
}

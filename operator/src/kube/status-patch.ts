// A status write names only the fields it changes. It is sent as a JSON merge
// patch (RFC 7386) carrying the resourceVersion the writer read, so the
// kube-apiserver applies it only to that version of the object and answers 409
// otherwise (https://kubernetes.io/docs/reference/using-api/api-concepts/#patch-and-apply):
// a writer that computed a list (conditions) from a stale read can never put it
// over a concurrent write, and fields it does not own are never sent at all.
import { isDeepStrictEqual } from 'node:util';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

/** Request options that send a patch as a JSON merge patch. */
export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/**
 * The merge patch of a status turning `previous` into `previous` with `desired`
 * set: the top-level fields of `desired` whose value differs, `null` for a
 * field `desired` sets to undefined that `previous` holds (merge patch removes
 * it); undefined when nothing changes. A field's value is replaced whole when
 * it is a list, merged key by key when it is an object (RFC 7386).
 */
export function statusMergePatch(
  previous: Readonly<Record<string, unknown>> | undefined,
  desired: Readonly<Record<string, unknown>>,
): Record<string, unknown> | undefined {
  const patch: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(desired)) {
    const held = previous?.[field];
    if (value === undefined || value === null) {
      if (held !== undefined && held !== null) patch[field] = null;
    } else if (!isDeepStrictEqual(held, value)) {
      patch[field] = value;
    }
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}

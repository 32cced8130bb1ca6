// What `pause` and `resume` change on a Mirror, decided from the object as
// read, by the rules of the /api/v1 interface's state_change
// (api-server/src/http/routes/mirrors.ts): the desired state is spec.state,
// and a failed mirror is retried by removing its failure mark.
import type { FlowState } from '../../../engine/src/index.ts';
import type { MirrorObject } from './mirror-view.ts';
import { PluginError } from './plugin-error.ts';

export type StateChange =
  | { readonly kind: 'spec'; readonly state: 'Running' | 'Paused'; readonly said: string }
  | { readonly kind: 'retry'; readonly said: string }
  | { readonly kind: 'none'; readonly said: string };

/** Phases with nothing left to pause. */
const unpausable: readonly FlowState[] = ['STATUS_COMPLETED', 'STATUS_TERMINATING', 'STATUS_TERMINATED'];
const completed: FlowState = 'STATUS_COMPLETED';
const failed: FlowState = 'STATUS_FAILED';

/** The change `action` asks of the mirror; a PluginError when the mirror cannot take it. */
export function plannedStateChange(mirror: MirrorObject, action: 'pause' | 'resume'): StateChange {
  const name = mirror.metadata.name ?? '';
  const phase = mirror.status?.phase;
  if (mirror.metadata.deletionTimestamp !== undefined)
    throw new PluginError(`mirror ${name} is being deleted and cannot be ${action}d`);
  if (action === 'pause') {
    if (phase !== undefined && (unpausable as readonly string[]).includes(phase))
      throw new PluginError(`mirror ${name} is ${phase} and cannot be paused`);
    if (mirror.spec.state === 'Paused')
      return {
        kind: 'none',
        said: `mirror ${name} is already paused (phase ${phase ?? 'not reported yet'})`,
      };
    return {
      kind: 'spec',
      state: 'Paused',
      said: `mirror ${name}: pause requested (spec.state Paused); the engine stops at its next batch boundary`,
    };
  }
  if (phase === completed)
    throw new PluginError(`mirror ${name} completed its initial load and cannot be resumed`);
  if (mirror.spec.state === 'Paused')
    return { kind: 'spec', state: 'Running', said: `mirror ${name}: resume requested (spec.state Running)` };
  if (phase === failed)
    return { kind: 'retry', said: `mirror ${name}: retry requested; the operator starts its engine again` };
  return {
    kind: 'none',
    said: `mirror ${name} is not paused (phase ${phase ?? 'not reported yet'}): nothing to resume`,
  };
}

import { describe, expect, it } from 'vitest';
import type { MirrorObject } from './mirror-view.ts';
import { PluginError } from './plugin-error.ts';
import { plannedStateChange } from './state-change.ts';

function mirror(
  state: 'Running' | 'Paused',
  phase?: string,
  extra: Partial<MirrorObject['metadata']> = {},
): MirrorObject {
  return {
    metadata: { name: 'orders', ...extra },
    spec: { sourcePeer: 'shop', destinationPeer: 'analytics', state },
    ...(phase === undefined ? {} : { status: { phase } }),
  };
}

function refusal(object: MirrorObject, action: 'pause' | 'resume'): string {
  try {
    plannedStateChange(object, action);
  } catch (error) {
    expect(error).toBeInstanceOf(PluginError);
    return (error as PluginError).message;
  }
  throw new Error('not refused');
}

describe('pause and resume, as spec.state and the failure mark', () => {
  it('pauses a running mirror through its spec, once', () => {
    expect(plannedStateChange(mirror('Running', 'STATUS_RUNNING'), 'pause')).toMatchObject({
      kind: 'spec',
      state: 'Paused',
    });
    expect(plannedStateChange(mirror('Paused', 'STATUS_PAUSED'), 'pause')).toMatchObject({ kind: 'none' });
  });

  it('resumes a paused mirror through its spec, and retries a failed one through its status', () => {
    expect(plannedStateChange(mirror('Paused', 'STATUS_PAUSED'), 'resume')).toMatchObject({
      kind: 'spec',
      state: 'Running',
    });
    expect(plannedStateChange(mirror('Running', 'STATUS_FAILED'), 'resume')).toMatchObject({ kind: 'retry' });
    expect(plannedStateChange(mirror('Running', 'STATUS_RUNNING'), 'resume')).toMatchObject({ kind: 'none' });
  });

  it('refuses as the /api/v1 interface does', () => {
    expect(refusal(mirror('Running', 'STATUS_COMPLETED'), 'pause')).toBe(
      'mirror orders is STATUS_COMPLETED and cannot be paused',
    );
    expect(refusal(mirror('Paused', 'STATUS_COMPLETED'), 'resume')).toBe(
      'mirror orders completed its initial load and cannot be resumed',
    );
    expect(
      refusal(mirror('Running', 'STATUS_RUNNING', { deletionTimestamp: '2024-05-01T10:00:00Z' }), 'pause'),
    ).toBe('mirror orders is being deleted and cannot be paused');
  });
});

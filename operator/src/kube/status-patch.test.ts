import { describe, expect, it } from 'vitest';
import { statusMergePatch } from './status-patch.ts';

describe('statusMergePatch', () => {
  it('names only the fields that change', () => {
    const previous = { phase: 'STATUS_RUNNING', rowsSynced: '10', failedGeneration: 3 };
    expect(statusMergePatch(previous, { phase: 'STATUS_RUNNING', rowsSynced: '12' })).toEqual({
      rowsSynced: '12',
    });
  });

  it('is undefined when nothing changes, whatever the key order of objects', () => {
    const condition = { type: 'Ready', status: 'True', reason: 'Running' };
    const previous = { conditions: [condition], snapshot: { tables: [] } };
    const reordered = { reason: 'Running', status: 'True', type: 'Ready' };
    expect(statusMergePatch(previous, { conditions: [reordered], snapshot: { tables: [] } })).toBeUndefined();
  });

  it('removes a field set to undefined or null that the status holds, and only then', () => {
    expect(statusMergePatch({ lastBatchId: '4' }, { lastBatchId: undefined })).toEqual({ lastBatchId: null });
    expect(statusMergePatch({}, { lastBatchId: undefined, failedGeneration: null })).toBeUndefined();
  });

  it('sends every field of a status not written yet', () => {
    expect(statusMergePatch(undefined, { id: 7 })).toEqual({ id: 7 });
  });

  it('sends a changed list whole', () => {
    const previous = { conditions: [{ type: 'Ready', status: 'False' }] };
    const desired = { conditions: [{ type: 'Ready', status: 'True' }] };
    expect(statusMergePatch(previous, desired)).toEqual(desired);
  });
});

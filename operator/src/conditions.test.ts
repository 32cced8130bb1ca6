import { describe, expect, it } from 'vitest';
import { type Condition, setCondition } from './conditions.ts';

const held: Condition[] = [
  {
    type: 'Ready',
    status: 'True',
    reason: 'Running',
    message: '',
    lastTransitionTime: 't0',
    observedGeneration: 1,
  },
  {
    type: 'Failed',
    status: 'False',
    reason: 'NoFailure',
    message: '',
    lastTransitionTime: 't0',
    observedGeneration: 1,
  },
];

describe('setCondition', () => {
  it('leaves a list it does not change equal, time and place included', () => {
    const { lastTransitionTime: _time, ...ready } = held[0] as Condition;
    expect(setCondition(held, ready)).toEqual(held);
  });

  it('replaces a condition in its place, with a new transition time only when its status changes', () => {
    const message = setCondition(held, { ...(held[0] as Condition), message: 'still streaming' });
    expect(message.map((condition) => condition.type)).toEqual(['Ready', 'Failed']);
    expect(message[0]).toMatchObject({ message: 'still streaming', lastTransitionTime: 't0' });
    const status = setCondition(held, { ...(held[0] as Condition), status: 'False', reason: 'Paused' });
    expect(status.map((condition) => condition.type)).toEqual(['Ready', 'Failed']);
    expect(status[0]?.lastTransitionTime).not.toBe('t0');
  });

  it('appends a condition of a new type', () => {
    const added = setCondition(held, {
      type: 'Degraded',
      status: 'False',
      reason: 'NoFault',
      message: '',
      observedGeneration: 1,
    });
    expect(added.map((condition) => condition.type)).toEqual(['Ready', 'Failed', 'Degraded']);
  });
});

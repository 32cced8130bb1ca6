import { describe, expect, it } from 'vitest';
import { engineHeapMegabytes, enginePodDefaultsSchema, memoryBytes, mergePodSettings } from './engine-pod.ts';

describe('engine pod settings', () => {
  it('reads memory quantities and sizes the heap to three quarters of the limit', () => {
    expect(memoryBytes('1Gi')).toBe(2 ** 30);
    expect(memoryBytes('512Mi')).toBe(512 * 2 ** 20);
    expect(memoryBytes('2G')).toBe(2e9);
    expect(memoryBytes('1073741824')).toBe(2 ** 30);
    expect(memoryBytes('lots')).toBeUndefined();
    expect(engineHeapMegabytes('1Gi')).toBe(768);
    expect(engineHeapMegabytes('4Gi')).toBe(3072);
    expect(engineHeapMegabytes(undefined)).toBe(768);
  });

  it("lays a Mirror's settings over the operator's, merging labels and annotations", () => {
    expect(
      mergePodSettings(
        { nodeSelector: { disk: 'ssd' }, labels: { team: 'data' }, priorityClassName: 'low' },
        { priorityClassName: 'high', labels: { tier: 'gold' } },
      ),
    ).toEqual({
      nodeSelector: { disk: 'ssd' },
      priorityClassName: 'high',
      labels: { team: 'data', tier: 'gold' },
    });
  });

  it('takes numeric quantities from chart values as strings, and refuses a bad one naming it', () => {
    expect(enginePodDefaultsSchema.parse({ resources: { limits: { cpu: 2, memory: '1Gi' } } })).toEqual({
      resources: { limits: { cpu: '2', memory: '1Gi' } },
    });
    const result = enginePodDefaultsSchema.safeParse({ resources: { limits: { memory: 'lots' } } });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(['resources', 'limits', 'memory']);
  });
});

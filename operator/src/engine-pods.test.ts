import type { V1Pod, V1PodStatus } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { enginePodProblem } from './engine-pods.ts';

const pod = (status: V1PodStatus): V1Pod => ({ metadata: { name: 'tributary-engine-m-0' }, status });

describe('enginePodProblem', () => {
  it('says nothing of a running or starting pod', () => {
    expect(
      enginePodProblem(
        pod({
          phase: 'Running',
          containerStatuses: [
            { name: 'engine', image: 'i', imageID: '', ready: true, restartCount: 0, state: { running: {} } },
          ],
        }),
      ),
    ).toBeUndefined();
    expect(
      enginePodProblem(
        pod({
          phase: 'Pending',
          containerStatuses: [
            {
              name: 'engine',
              image: 'i',
              imageID: '',
              ready: false,
              restartCount: 0,
              state: { waiting: { reason: 'ContainerCreating' } },
            },
          ],
        }),
      ),
    ).toBeUndefined();
  });

  it('names an OOM-killed crash loop with the last termination message', () => {
    const problem = enginePodProblem(
      pod({
        phase: 'Running',
        containerStatuses: [
          {
            name: 'engine',
            image: 'i',
            imageID: '',
            ready: false,
            restartCount: 4,
            state: {
              waiting: { reason: 'CrashLoopBackOff', message: 'back-off 1m20s restarting failed container' },
            },
            lastState: { terminated: { exitCode: 137, reason: 'OOMKilled', message: 'heap out of memory' } },
          },
        ],
      }),
    );
    expect(problem?.reason).toBe('OOMKilled');
    expect(problem?.message).toContain('CrashLoopBackOff');
    expect(problem?.message).toContain('OOMKilled (exit code 137): heap out of memory');
    expect(problem?.message).toContain('restarts: 4');
  });

  it('reports images that cannot be pulled, config errors and unschedulable pods', () => {
    const waiting = (reason: string, message: string) =>
      enginePodProblem(
        pod({
          phase: 'Pending',
          containerStatuses: [
            {
              name: 'engine',
              image: 'i',
              imageID: '',
              ready: false,
              restartCount: 0,
              state: { waiting: { reason, message } },
            },
          ],
        }),
      );
    expect(waiting('ErrImageNeverPull', 'image not present with pull policy of Never')?.reason).toBe(
      'ErrImageNeverPull',
    );
    expect(waiting('CreateContainerConfigError', 'secret "x" not found')?.message).toContain(
      'secret "x" not found',
    );
    expect(waiting('ContainerCreating', '')).toBeUndefined();
    expect(
      enginePodProblem(
        pod({
          phase: 'Pending',
          conditions: [
            {
              type: 'PodScheduled',
              status: 'False',
              reason: 'Unschedulable',
              message: '0/1 nodes are available',
            },
          ],
        }),
      )?.reason,
    ).toBe('Unschedulable');
    expect(
      enginePodProblem(pod({ phase: 'Failed', reason: 'Evicted', message: 'low on memory' }))?.message,
    ).toContain('low on memory');
  });
});

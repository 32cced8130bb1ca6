// The control plane's resources: what users declare (through the API, kubectl or
// GitOps) as opposed to what the engine records in the catalog. Kubernetes
// stores them as custom resources; standalone mode in its embedded database.
import { z } from 'zod';
import {
  initialSnapshotOnlyMessage,
  mirrorSpecFields,
  retainedWalLimitProblem,
} from '../resources/mirror.ts';
import type { Peer } from '../resources/peer.ts';

export const mirrorDesiredStates = ['Running', 'Paused'] as const;
export type MirrorDesiredState = (typeof mirrorDesiredStates)[number];

export const mirrorResourceSpecSchema = mirrorSpecFields
  .extend({ state: z.enum(mirrorDesiredStates).default('Running') })
  .refine((spec) => !spec.initialSnapshotOnly || spec.doInitialSnapshot, {
    message: initialSnapshotOnlyMessage,
    path: ['initialSnapshotOnly'],
  })
  .superRefine((spec, context) => {
    const problem = retainedWalLimitProblem(spec);
    if (problem) context.addIssue({ code: 'custom', message: problem, path: ['retainedWalLimitAction'] });
  });
export type MirrorResourceSpec = z.infer<typeof mirrorResourceSpecSchema>;

export interface MirrorResource {
  readonly name: string;
  /** Stable for the life of the mirror: the interface's workflow id derives from it. */
  readonly uid: string;
  /** The stored object's own id where it has one (Kubernetes `metadata.uid`): owner references name it. */
  readonly objectUid?: string;
  readonly spec: MirrorResourceSpec;
  /** Increases with every change of the spec (and with a retry request). */
  readonly generation: number;
  /** A drop was requested; the mirror is torn down, then removed. */
  readonly deleting: boolean;
  /** The generation at which the mirror last failed for good, if it did. */
  readonly failedGeneration: number | null;
  readonly createdAt: Date;
}

export interface PeerResource {
  readonly peer: Peer;
  /** Server version recorded by the last successful check. */
  readonly version: string | null;
  readonly createdAt: Date;
}

export const scriptLanguages = ['lua'] as const;

export interface ScriptResource {
  readonly id: number;
  readonly name: string;
  readonly lang: (typeof scriptLanguages)[number];
  readonly source: string;
}

export function workflowId(mirror: Pick<MirrorResource, 'name' | 'uid'>): string {
  return `${mirror.name}-${mirror.uid}`;
}

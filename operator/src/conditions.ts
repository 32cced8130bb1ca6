// Status conditions as Kubernetes conventions define them.

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration: number;
}

/** Sets a condition, keeping lastTransitionTime when its status did not change. */
export function setCondition(
  conditions: readonly Condition[],
  next: Omit<Condition, 'lastTransitionTime'>,
): Condition[] {
  const previous = conditions.find((condition) => condition.type === next.type);
  const lastTransitionTime =
    previous && previous.status === next.status ? previous.lastTransitionTime : new Date().toISOString();
  return [...conditions.filter((condition) => condition.type !== next.type), { ...next, lastTransitionTime }];
}

// Status conditions as Kubernetes conventions define them.

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration: number;
}

/**
 * Sets a condition, keeping lastTransitionTime when its status did not change,
 * and its place in the list, so that a status write sees an unchanged list as
 * unchanged (kube/status-patch.ts).
 */
export function setCondition(
  conditions: readonly Condition[],
  next: Omit<Condition, 'lastTransitionTime'>,
): Condition[] {
  const previous = conditions.find((condition) => condition.type === next.type);
  const lastTransitionTime =
    previous && previous.status === next.status ? previous.lastTransitionTime : new Date().toISOString();
  const condition = { ...next, lastTransitionTime };
  return previous
    ? conditions.map((held) => (held === previous ? condition : held))
    : [...conditions, condition];
}

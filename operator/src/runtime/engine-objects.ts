// The names by which a mirror's engine objects are found: the StatefulSet, its
// Secret and its pods. Apart from the runtime that creates them, because the
// kubectl plugin (operator/src/kubectl/) looks them up without loading the
// engine the runtime imports.
import { kubeObjectName } from '../kube/object-names.ts';

/** On the StatefulSet and its pods: the Mirror's object name. */
export const mirrorLabel = 'tributary.dev/mirror';
/** The engine's container in the pod. */
export const engineContainerName = 'engine';
/** Where an engine pod serves Prometheus metrics (the chart's PodMonitor scrapes it by name). */
export const engineMetricsPort = 9090;

/** The StatefulSet and the Secret; named after the Mirror's object name: a mirror's API name may hold `_` (kube/object-names.ts). */
export function engineObjectName(mirror: string): string {
  return `tributary-engine-${kubeObjectName(mirror)}`;
}

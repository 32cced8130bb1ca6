// The operator's front door: what other packages (the api-server's cluster
// mode), tests of other packages and scripts/ may use of the operator. The
// role itself is started by bin/tributary.ts from `main.ts`, by path.
// `scripts/front-doors.test.ts` fails on an import that goes around this file.

export { group, version } from './crds/api-group.ts';
export { customResourceDefinitions } from './crds/definitions.ts';
export { KubeStore } from './kube/kube-store.ts';
export { apiNameAnnotation, kubeObjectName } from './kube/object-names.ts';
export { OperatorMetrics } from './operator-metrics.ts';
export { engineObjectName } from './runtime/engine-objects.ts';

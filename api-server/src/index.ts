// The api-server's front door: what other packages, tests of other packages and
// scripts/ may use of the facade and of standalone mode. The roles themselves
// are not imported: bin/tributary.ts starts `main.ts`, `standalone.ts` and the
// `mirrors` client (`client/mirrors-cli.ts`) by path, as a process's entry.
// `scripts/front-doors.test.ts` fails on an import that goes around this file.
export { buildApp } from './http/app.ts';
export type { FacadeContext } from './http/context.ts';
export { mirrorMetricsRegistry } from './http/metrics.ts';
export {
  type ControlPlane,
  type ControlPlaneOptions,
  startControlPlane,
} from './standalone/control-plane.ts';
export { EmbeddedStore } from './standalone/embedded-store.ts';

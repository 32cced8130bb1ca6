import type { EngineRunConfig } from '../../../engine/src/control/engine-runtime.ts';
import type { EngineConfig } from '../../../engine/src/engine-config.ts';

/** The engine config file's content for a mirror (holds secrets: store it as one). */
export function engineConfigDocument(config: EngineRunConfig, catalogUrl: string): EngineConfig {
  return {
    mirror: config.spec,
    source: config.source,
    destination: config.destination,
    catalog: { url: catalogUrl },
    ...(config.script ? { script: config.script } : {}),
  };
}

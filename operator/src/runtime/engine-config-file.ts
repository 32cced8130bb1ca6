import type { EngineConfig, EngineRunConfig } from '../../../engine/src/index.ts';

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

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { withEngineDescriptions } from './generate-crds.ts';

const valuesSchemaFile = join(import.meta.dirname, '..', 'charts', 'tributary', 'values.schema.json');

describe("the chart's values schema", () => {
  it('describes the engine values as the Mirror spec.engine describes them (run `make crds`)', () => {
    const committed = JSON.parse(readFileSync(valuesSchemaFile, 'utf8'));
    expect(committed).toEqual(withEngineDescriptions(committed));
    const engine = committed.properties.engine.properties;
    expect(engine.podLabels.description).toMatch(/labels of the engine pod/);
    expect(engine.temporaryStorage.properties.sizeLimit.description).toBeTruthy();
  });
});

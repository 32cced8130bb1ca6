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

  it('describes every value, for editors and `helm show values` readers', () => {
    type Node = { description?: string; properties?: Record<string, Node>; items?: Node };
    const undescribed = (node: Node, path: string): string[] =>
      Object.entries(node.properties ?? {}).flatMap(([key, child]) => [
        ...(child.description?.trim() ? [] : [`${path}${key}`]),
        ...undescribed(child, `${path}${key}.`),
      ]);
    const committed = JSON.parse(readFileSync(valuesSchemaFile, 'utf8')) as Node;
    expect(undescribed(committed, '')).toEqual([]);
  });
});

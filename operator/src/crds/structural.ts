// Turns the JSON Schema that zod emits into a Kubernetes structural schema
// (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema):
// OpenAPI v3.0 keywords only, no `$schema`, no `const`, boolean exclusive bounds,
// `allOf` of objects merged, `additionalProperties: false` dropped (the API
// server prunes unknown fields instead), free-form objects marked
// `x-kubernetes-preserve-unknown-fields` without a schema for their values.
type Schema = Record<string, unknown>;

const jsSafeInteger = 9_007_199_254_740_991;

export function toStructural(input: Schema): Schema {
  const schema: Schema = { ...input };
  delete schema.$schema;
  if (schema.additionalProperties === false) delete schema.additionalProperties;
  // zod's records say their keys are strings; Kubernetes map keys always are, and
  // the CRD schema has no such keyword (server-side apply refuses it).
  delete schema.propertyNames;
  // A free-form object (e.g. a pod's affinity) is kept as written, not described.
  if (schema['x-kubernetes-preserve-unknown-fields'] === true) delete schema.additionalProperties;
  if ('const' in schema) {
    schema.enum = [schema.const];
    delete schema.const;
  }
  for (const bound of ['exclusiveMinimum', 'exclusiveMaximum'] as const) {
    if (typeof schema[bound] === 'number') {
      schema[bound === 'exclusiveMinimum' ? 'minimum' : 'maximum'] = schema[bound];
      schema[bound] = true;
    }
  }
  if (schema.maximum === jsSafeInteger) delete schema.maximum;
  if (schema.minimum === -jsSafeInteger) delete schema.minimum;
  if (Array.isArray(schema.allOf)) {
    const parts = (schema.allOf as Schema[]).map(toStructural);
    delete schema.allOf;
    schema.type = 'object';
    schema.properties = Object.assign({}, ...parts.map((part) => part.properties ?? {}));
    const required = parts.flatMap((part) => (part.required as string[] | undefined) ?? []);
    if (required.length > 0) schema.required = [...new Set(required)];
  }
  if (schema.properties) {
    schema.properties = Object.fromEntries(
      Object.entries(schema.properties as Record<string, Schema>).map(([key, value]) => [
        key,
        toStructural(value),
      ]),
    );
  }
  if (schema.items && typeof schema.items === 'object') schema.items = toStructural(schema.items as Schema);
  if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
    schema.additionalProperties = toStructural(schema.additionalProperties as Schema);
  }
  return schema;
}

// Request bodies the way different clients of a grpc-gateway service write the
// same request (protojson's input rules): field names as proto names or their
// lowerCamel JSON names or a mix, integers as numbers or decimal strings, enums
// by name or number, optional fields sent as null or as their zero value, and
// fields the service does not know. The API tests send every combination and
// expect the canonical request's effect and answer.

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface RequestVariant {
  readonly casing: 'snake' | 'camel' | 'mixed';
  readonly integers: 'numbers' | 'strings';
  readonly enums: 'names' | 'numbers';
  readonly unset: 'absent' | 'nullOrZero';
  readonly unknownFields: boolean;
}

/** Every combination of the variant dimensions (48). */
export const requestVariants: readonly RequestVariant[] = (['snake', 'camel', 'mixed'] as const).flatMap(
  (casing) =>
    (['numbers', 'strings'] as const).flatMap((integers) =>
      (['names', 'numbers'] as const).flatMap((enums) =>
        (['absent', 'nullOrZero'] as const).flatMap((unset) =>
          [false, true].map((unknownFields) => ({ casing, integers, enums, unset, unknownFields })),
        ),
      ),
    ),
);

export function describeVariant(variant: RequestVariant): string {
  return [
    variant.casing,
    `integers as ${variant.integers}`,
    `enums as ${variant.enums}`,
    variant.unset === 'nullOrZero' ? 'null/zero optionals' : 'optionals absent',
    variant.unknownFields ? 'unknown fields' : 'no unknown fields',
  ].join(', ');
}

/** What a variant needs to know about one request: written in proto names (snake_case). */
export interface RequestShape {
  /** Enum fields (by proto name) and their numbers. */
  readonly enums?: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Optional fields (dotted proto-name paths) to send as null or zero, with that value. */
  readonly unset?: Readonly<Record<string, Json>>;
}

const camel = (key: string) => key.replace(/_([a-z0-9])/g, (_, next: string) => next.toUpperCase());

function isObject(value: Json): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function mapObjects(value: Json, change: (object: JsonObject, depth: number) => JsonObject, depth = 0): Json {
  if (Array.isArray(value)) return value.map((item) => mapObjects(item, change, depth + 1));
  if (!isObject(value)) return value;
  const children = Object.fromEntries(
    Object.entries(value).map(([key, child]) => [key, mapObjects(child, change, depth + 1)]),
  );
  return change(children, depth);
}

function withPath(object: JsonObject, path: readonly string[], value: Json): JsonObject {
  const [head, ...rest] = path;
  if (head === undefined) return object;
  if (rest.length === 0) return head in object ? object : { ...object, [head]: value };
  const child = object[head] ?? null;
  return isObject(child) ? { ...object, [head]: withPath(child, rest, value) } : object;
}

/** The canonical body (proto names, numbers, enum names) as `variant` writes it. */
export function variantBody(canonical: JsonObject, shape: RequestShape, variant: RequestVariant): JsonObject {
  let body: Json = canonical;
  if (variant.unset === 'nullOrZero') {
    for (const [path, value] of Object.entries(shape.unset ?? {})) {
      body = withPath(body as JsonObject, path.split('.'), value);
    }
  }
  const enums = shape.enums ?? {};
  body = mapObjects(body, (object) =>
    Object.fromEntries(
      Object.entries(object).map(([key, value]) => {
        const numbers = enums[key];
        if (numbers && typeof value === 'string' && variant.enums === 'numbers' && value in numbers) {
          return [key, numbers[value] as number];
        }
        if (
          !numbers &&
          variant.integers === 'strings' &&
          typeof value === 'number' &&
          Number.isInteger(value)
        ) {
          return [key, String(value)];
        }
        if (!numbers && variant.integers === 'strings' && Array.isArray(value)) {
          return [key, value.map((item) => (typeof item === 'number' ? String(item) : item))];
        }
        return [key, value];
      }),
    ),
  );
  if (variant.unknownFields) {
    body = mapObjects(body, (object, depth) => ({
      ...object,
      future_field: { added_in: 'a later version', depth },
      legacyFlag: true,
    }));
  }
  if (variant.casing !== 'snake') {
    body = mapObjects(body, (object) =>
      Object.fromEntries(
        Object.entries(object).map(([key, value], index) => [
          variant.casing === 'camel' || index % 2 === 1 ? camel(key) : key,
          value,
        ]),
      ),
    );
  }
  return body as JsonObject;
}

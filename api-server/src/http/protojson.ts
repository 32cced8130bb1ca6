// Request bodies read the way the original grpc-gateway service reads them:
// protobuf's JSON mapping as Go's protojson.Unmarshal applies it with
// DiscardUnknown (grpc-gateway v2's default marshaler), see
// https://protobuf.dev/programming-guides/json/. One generic pass, driven by the
// route's zod schema, turns what a client sent into the schema's canonical
// shape; zod then validates as before. The pass:
//
// - takes each field under its proto name (`flow_job_name`) or its lowerCamel
//   JSON name (`flowJobName`), at every level; both at once is a 400;
// - takes integers as JSON numbers or decimal strings;
// - takes enums declared with `protoEnum` by name or by number;
// - drops `null` (unset), and the proto3 zero value (`""`, `0`, `false`, `[]`,
//   an object whose fields are all unset) of an optional field, so the field's
//   documented default applies, as it does for the original service, which
//   cannot tell a zero from an unset field;
// - drops fields the schema does not know and reports them, so a client of an
//   older or newer interface keeps working.
//
// Responses are not touched: they keep their lowerCamel keys, 64-bit values as
// strings and enums as names.
import { z } from 'zod';
import { ApiError, formatPath } from './errors.ts';

const protoEnums = new WeakMap<object, Readonly<Record<string, number>>>();

/** An enum field taken by name or by its proto number; `message` is the error for anything else. */
export function protoEnum<const Name extends string>(
  numbers: Readonly<Record<Name, number>>,
  message: string,
) {
  const names = Object.keys(numbers) as [Name, ...Name[]];
  const schema = z.enum(names, { error: message });
  protoEnums.set(schema, numbers);
  return schema;
}

export function snakeCase(key: string): string {
  return key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** protoc's JSON name of a field: underscores dropped, the next letter upper case. */
export function lowerCamelCase(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, next: string) => next.toUpperCase());
}

export interface NormalizedBody {
  /** The body in the schema's own spelling, ready for validation. */
  readonly value: unknown;
  /** Fields dropped because the schema does not know them, as the client spelled their paths. */
  readonly ignoredFields: readonly string[];
  /** The client's spelling of a path of the schema (for error messages). */
  clientPath(path: readonly PropertyKey[]): PropertyKey[];
}

interface ZodInternals {
  _zod: { def: Record<string, unknown> & { type: string }; optin?: string };
}

const wrapperTypes = new Set([
  'optional',
  'nullable',
  'default',
  'prefault',
  'readonly',
  'catch',
  'nonoptional',
]);

/** The schema under optional/default/nullable wrappers and transforms, and whether the field may be left out. */
function unwrap(schema: z.ZodType): { base: ZodInternals; optional: boolean } {
  let current = schema as unknown as ZodInternals;
  const optional = current._zod.optin !== undefined;
  for (;;) {
    const def = current._zod.def;
    if (wrapperTypes.has(def.type)) current = def.innerType as ZodInternals;
    else if (def.type === 'pipe') current = def.in as ZodInternals;
    else return { base: current, optional };
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isZeroValue(value: unknown): boolean {
  return (
    value === '' ||
    value === 0 ||
    value === false ||
    (Array.isArray(value) && value.length === 0) ||
    (isPlainObject(value) && Object.keys(value).length === 0)
  );
}

const decimalInteger = /^-?\d+$/;

export function normalizeBody(schema: z.ZodType, body: unknown): NormalizedBody {
  const ignoredFields: string[] = [];
  // JSON of a schema path → the key the client used for its last part.
  const spellings = new Map<string, string>();

  const clientPath = (path: readonly PropertyKey[]): PropertyKey[] =>
    path.map((part, index) =>
      typeof part === 'string' ? (spellings.get(JSON.stringify(path.slice(0, index + 1))) ?? part) : part,
    );

  const walk = (fieldSchema: z.ZodType, value: unknown, path: PropertyKey[]): unknown => {
    const { base } = unwrap(fieldSchema);
    const def = base._zod.def;
    switch (def.type) {
      case 'object':
        return isPlainObject(value) ? walkObject(def.shape as Record<string, z.ZodType>, value, path) : value;
      case 'array':
        return Array.isArray(value)
          ? value.map((item, index) => walk(def.element as z.ZodType, item, [...path, index]))
          : value;
      case 'number':
        return typeof value === 'string' && decimalInteger.test(value) ? Number(value) : value;
      case 'enum': {
        const numbers = protoEnums.get(base);
        if (
          !numbers ||
          !(typeof value === 'number' || (typeof value === 'string' && decimalInteger.test(value)))
        )
          return value;
        const name = Object.entries(numbers).find(([, number]) => number === Number(value))?.[0];
        return name ?? value;
      }
      case 'union': {
        const options = (def.options as z.ZodType[]).map((option) => ({
          option,
          def: unwrap(option).base._zod.def,
        }));
        const pick = (type: string) => {
          const matching = options.filter((candidate) => candidate.def.type === type);
          return matching.length === 1 ? matching[0]?.option : undefined;
        };
        const target = isPlainObject(value)
          ? pick('object')
          : Array.isArray(value)
            ? pick('array')
            : typeof value === 'string' && !pick('string')
              ? pick('number')
              : undefined;
        return target ? walk(target, value, path) : value;
      }
      default:
        return value;
    }
  };

  const walkObject = (
    shape: Record<string, z.ZodType>,
    input: Record<string, unknown>,
    path: PropertyKey[],
  ): Record<string, unknown> => {
    const byClientKey = new Map<string, string>();
    for (const key of Object.keys(shape)) {
      for (const spelling of [key, snakeCase(key), lowerCamelCase(key)]) byClientKey.set(spelling, key);
    }
    const output: Record<string, unknown> = {};
    const given = new Map<string, string>();
    for (const [clientKey, raw] of Object.entries(input)) {
      const key = byClientKey.get(clientKey);
      if (key === undefined) {
        ignoredFields.push(formatPath([...clientPath(path), clientKey]));
        continue;
      }
      const earlier = given.get(key);
      if (earlier !== undefined) {
        throw new ApiError(
          'invalidArgument',
          `${formatPath([...clientPath(path), clientKey])}: the same field is given twice, as ${earlier} and ${clientKey}`,
        );
      }
      given.set(key, clientKey);
      const fieldPath = [...path, key];
      spellings.set(JSON.stringify(fieldPath), clientKey);
      if (raw === null) continue;
      const fieldSchema = shape[key] as z.ZodType;
      const value = walk(fieldSchema, raw, fieldPath);
      if (unwrap(fieldSchema).optional && isZeroValue(value)) continue;
      output[key] = value;
    }
    return output;
  };

  const value = walk(schema, body, []);
  return { value, ignoredFields, clientPath };
}

// Properties of the API's request mapping over generated JSON bodies
// (docs/security.md, "Fuzzing"): protojson's reading (protojson.ts), the wire
// schemas (wire.ts) and the mapping to resources (convert.ts). Any body gives
// the request or an ApiError (a 400), never another exception; a secret sent
// in a body never appears in the error; and a body reads the same in either
// spelling protojson accepts.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { fuzzParameters } from '../../../test/support/fuzz.ts';
import { mirrorSpecFromWire, parseRequest, peerFromWire } from './convert.ts';
import { ApiError } from './errors.ts';
import { lowerCamelCase, snakeCase } from './protojson.ts';
import {
  batchesRequest,
  createMirrorRequest,
  createPeerRequest,
  logsRequest,
  mirrorStatusRequest,
  resyncTableRequest,
  stateChangeRequest,
  upsertScriptRequest,
} from './wire.ts';

/** The request schemas of /api/v1's POST routes, and what the route maps the body to. */
const routes: Readonly<
  Record<
    string,
    { schema: z.ZodType; map?: (body: never, field: (path: readonly PropertyKey[]) => string) => unknown }
  >
> = {
  'flows/cdc/create': {
    schema: createMirrorRequest,
    map: (body: z.infer<typeof createMirrorRequest>, field) =>
      mirrorSpecFromWire(body.connection_configs, field),
  },
  'peers/create': {
    schema: createPeerRequest,
    map: (body: z.infer<typeof createPeerRequest>, field) => peerFromWire(body.peer, field),
  },
  'mirrors/state_change': { schema: stateChangeRequest },
  'mirrors/tables/resync': { schema: resyncTableRequest },
  'mirrors/status': { schema: mirrorStatusRequest },
  'mirrors/cdc/batches': { schema: batchesRequest },
  'mirrors/logs': { schema: logsRequest },
  scripts: { schema: upsertScriptRequest },
};
const routeNames = Object.keys(routes);

/** What parseRequest needs of a Fastify request. */
function requestOf(body: unknown): Parameters<typeof parseRequest>[1] {
  return {
    body,
    log: { warn: () => {} },
    routeOptions: { url: '/api/v1/fuzz' },
  } as unknown as Parameters<typeof parseRequest>[1];
}

type Outcome = { readonly value: unknown } | { readonly error: ApiError };

/** The route's reading of `body`: its mapped value, or the ApiError it answers with. Anything else fails the property. */
function outcome(route: string, body: unknown): Outcome {
  const { schema, map } = routes[route] as (typeof routes)[string];
  try {
    const { body: parsed, field } = parseRequest(schema, requestOf(body));
    return { value: map ? map(parsed as never, field) : parsed };
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    expect(error.kind).toBe('invalidArgument');
    return { error };
  }
}

interface ZodDef {
  readonly type: string;
  readonly shape?: Record<string, z.ZodType>;
  readonly element?: z.ZodType;
  readonly options?: readonly z.ZodType[];
  readonly innerType?: z.ZodType;
  readonly in?: z.ZodType;
  readonly entries?: Record<string, string>;
}
const defOf = (schema: z.ZodType) => (schema as unknown as { _zod: { def: ZodDef } })._zod.def;
/** Whether a field may be left out, as protojson.ts tells it. */
const isOptional = (schema: z.ZodType) =>
  (schema as unknown as { _zod: { optin?: string } })._zod.optin !== undefined;

/** A body and the same body as another client may spell it: keys in the other spelling, integers as strings. */
interface Spelled {
  readonly canonical: unknown;
  readonly variant: unknown;
}

const same = (value: fc.Arbitrary<unknown>): fc.Arbitrary<Spelled> =>
  value.map((item) => ({ canonical: item, variant: item }));
const noise = same(fc.jsonValue({ maxDepth: 2 }));
/** Strings a field may plausibly hold (names, tables, hosts, lists), and any. */
const plausibleText = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'm1',
      'src',
      'dst',
      'public.t',
      'public.u',
      't',
      'localhost',
      'a,b',
      '1',
      'RELATIONAL',
      'lua',
      'x'.repeat(70),
    ),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 8 }) },
);
/** Values a secret field holds in the bodies: marked, so an error message holding one is seen. */
const secretText = fc.string({ minLength: 4, maxLength: 8 }).map((text) => `secret-Ω-${text}`);
const secretField = /^(password|private_?key|privateKey|secret_?access_?key|secretAccessKey)$/;

/** Bodies shaped by `schema` (zod 4's definitions), now and then with any JSON in a field's place. */
function shaped(schema: z.ZodType, depth: number): fc.Arbitrary<Spelled> {
  const def = defOf(schema);
  switch (def.type) {
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'readonly':
      return shaped(def.innerType as z.ZodType, depth);
    case 'pipe':
      return shaped(def.in as z.ZodType, depth);
  }
  const value = ((): fc.Arbitrary<Spelled> => {
    switch (def.type) {
      case 'object': {
        const shape = def.shape ?? {};
        const fields = Object.entries(shape).map(([key, field]) => {
          const entry = fc.tuple(
            fc.constantFrom(key, snakeCase(key), lowerCamelCase(key)),
            secretField.test(key) ? same(secretText) : shaped(field, depth + 1),
          );
          // A required field is nearly always there, an optional one half the time.
          return isOptional(field) ? fc.option(entry, { freq: 2 }) : fc.option(entry, { freq: 30 });
        });
        return fc
          .tuple(
            fc.tuple(...fields),
            fc.option(fc.tuple(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }))),
          )
          .map(([given, unknown]) => {
            const canonical: Record<string, unknown> = {};
            const variant: Record<string, unknown> = {};
            const keys = Object.keys(shape);
            given.forEach((entry, index) => {
              if (entry === null) return;
              const [spelling, spelled] = entry;
              canonical[keys[index] as string] = spelled.canonical;
              variant[spelling] = spelled.variant;
            });
            // A field the schema does not know is dropped, in either body alike.
            if (
              unknown &&
              !keys.some((key) => [key, snakeCase(key), lowerCamelCase(key)].includes(unknown[0]))
            ) {
              canonical[unknown[0]] = unknown[1];
              variant[unknown[0]] = unknown[1];
            }
            return { canonical, variant };
          });
      }
      case 'array':
        return depth > 6
          ? same(fc.constant([]))
          : fc.array(shaped(def.element as z.ZodType, depth + 1), { maxLength: 3 }).map((items) => ({
              canonical: items.map((item) => item.canonical),
              variant: items.map((item) => item.variant),
            }));
      case 'number':
        return fc
          .tuple(
            fc.oneof(
              { weight: 6, arbitrary: fc.integer({ min: 1, max: 100 }) },
              { weight: 1, arbitrary: fc.integer({ min: -5, max: 2_000_000 }) },
              { weight: 1, arbitrary: fc.integer() },
            ),
            fc.boolean(),
          )
          .map(([number, asText]) => ({ canonical: number, variant: asText ? String(number) : number }));
      case 'string':
        return same(plausibleText);
      case 'boolean':
        return same(fc.boolean());
      case 'enum':
        return same(fc.constantFrom(...Object.values(def.entries ?? { none: 'none' })));
      case 'union':
        return fc.oneof(...(def.options ?? []).map((option) => shaped(option, depth + 1)));
      default:
        return noise;
    }
  })();
  return fc.oneof({ weight: 40, arbitrary: value }, { weight: 1, arbitrary: noise });
}

const routeAndBody = fc
  .constantFrom(...routeNames)
  .chain((route) =>
    fc.tuple(
      fc.constant(route),
      fc.oneof(
        { weight: 3, arbitrary: shaped((routes[route] as (typeof routes)[string]).schema, 0) },
        { weight: 1, arbitrary: same(fc.jsonValue({ maxDepth: 4 })) },
      ),
    ),
  );

/** Every string under a secret field's name in `body`. */
function secretsIn(body: unknown): string[] {
  if (Array.isArray(body)) return body.flatMap(secretsIn);
  if (typeof body !== 'object' || body === null) return [];
  return Object.entries(body).flatMap(([key, value]) =>
    secretField.test(key) && typeof value === 'string' ? [value] : secretsIn(value),
  );
}

describe('API request bodies, generated JSON', () => {
  it('reads any body as the request or a 400, and never repeats a secret it was sent (3000 cases)', () => {
    fc.assert(
      fc.property(routeAndBody, ([route, { variant }]) => {
        const result = outcome(route, variant);
        if ('error' in result)
          for (const secret of secretsIn(variant)) expect(result.error.message).not.toContain(secret);
      }),
      fuzzParameters(3000),
    );
  });

  it('reads a body the same whichever spelling of its fields and integers it uses (2000 cases)', () => {
    fc.assert(
      fc.property(routeAndBody, ([route, { canonical, variant }]) => {
        const canonicalResult = outcome(route, canonical);
        const variantResult = outcome(route, variant);
        if ('value' in canonicalResult) expect(variantResult).toEqual(canonicalResult);
        else expect('error' in variantResult).toBe(true);
      }),
      fuzzParameters(2000),
    );
  });

  it('reads a body that is not an object as a 400, and one nested deep like any other (500 cases)', () => {
    const notObject = fc
      .jsonValue()
      .filter((body) => body !== null && (typeof body !== 'object' || Array.isArray(body)));
    const deep = fc.integer({ min: 50, max: 5_000 }).map((depth) => {
      let body: unknown = { flow_job_name: 'm' };
      for (let level = 0; level < depth; level++)
        body = { connection_configs: body, table_mappings: [body], flowJobName: 'm' };
      return body;
    });
    fc.assert(
      fc.property(fc.constantFrom(...routeNames), notObject, deep, (route, flat, nested) => {
        expect(outcome(route, flat)).toHaveProperty('error');
        outcome(route, nested);
      }),
      fuzzParameters(500),
    );
  });
});

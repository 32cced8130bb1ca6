// Every error the API returns, with its HTTP status and the body shape the
// interface uses on that endpoint. docs/api.md lists the same table; a test
// keeps the two in sync.
import type { z } from 'zod';

/**
 * `code` follows the gRPC status codes the interface's `{code, message, details}`
 * shape comes from; the interface itself names code 2 for an unknown mirror and
 * for a duplicate mirror name.
 */
export const apiErrors = {
  invalidArgument: { status: 400, code: 3 },
  unauthenticated: { status: 401, code: 16 },
  forbidden: { status: 403, code: 7 },
  notFound: { status: 404, code: 5 },
  mirrorNotFound: { status: 404, code: 2 },
  mirrorExists: { status: 409, code: 2 },
  conflict: { status: 409, code: 6 },
  failedPrecondition: { status: 409, code: 9 },
  peerUnreachable: { status: 422, code: 9 },
  payloadTooLarge: { status: 413, code: 3 },
  tooManyRequests: { status: 429, code: 8 },
  internal: { status: 500, code: 13 },
} as const;

export type ApiErrorName = keyof typeof apiErrors;

export class ApiError extends Error {
  readonly kind: ApiErrorName;

  constructor(kind: ApiErrorName, message: string) {
    super(message);
    this.name = 'ApiError';
    this.kind = kind;
  }

  get status(): number {
    return apiErrors[this.kind].status;
  }

  get code(): number {
    return apiErrors[this.kind].code;
  }
}

/** A field path as messages show it: `connection_configs.table_mappings[0].exclude`. */
export function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map((part, index) =>
      typeof part === 'number' ? `[${part}]` : `${index === 0 ? '' : '.'}${String(part)}`,
    )
    .join('');
}

/**
 * Names each invalid field and the rule it broke; never echoes values.
 * `wirePath` renames a path of the validated object to the request's own field
 * path, when the schema is not the wire schema.
 */
export function describeValidation(
  error: z.ZodError,
  wirePath: (path: readonly PropertyKey[]) => readonly PropertyKey[] = (path) => path,
): string {
  return error.issues
    .map((issue) => {
      const path = formatPath(wirePath(issue.path));
      const rule =
        issue.code === 'unrecognized_keys' ? `unknown field(s) ${issue.keys.join(', ')}` : issue.message;
      return path ? `${path}: ${rule}` : rule;
    })
    .join('; ');
}

/** The `{code, message, details}` body. */
export function grpcStyleBody(error: ApiError): { code: number; message: string; details: unknown[] } {
  return { code: error.code, message: error.message, details: [] };
}

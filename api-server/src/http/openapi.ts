// The OpenAPI document, generated from the same zod schemas the routes validate
// with, so it cannot drift from what the service accepts.
import { z } from 'zod';
import {
  auditResponse,
  batchesRequest,
  batchesResponse,
  createMirrorRequest,
  createPeerRequest,
  createPeerResponse,
  grpcErrorBody,
  logsRequest,
  logsResponse,
  mirrorListResponse,
  mirrorStatusRequest,
  mirrorStatusResponse,
  peerInfoResponse,
  peerListResponse,
  peerSchemasQuery,
  peerSchemasResponse,
  resyncTableRequest,
  resyncTableResponse,
  schemaTablesQuery,
  schemaTablesResponse,
  scriptsResponse,
  stateChangeRequest,
  stateChangeResponse,
  tableColumnsQuery,
  tableColumnsResponse,
  testScriptRequest,
  testScriptResponse,
  upsertScriptRequest,
  upsertScriptResponse,
  validatePeerResponse,
} from './wire.ts';

const json = (schema: z.ZodType, io: 'input' | 'output') => ({
  'application/json': { schema: z.toJSONSchema(schema, { io, unrepresentable: 'any' }) },
});

function operation(
  summary: string,
  request: z.ZodType | undefined,
  response: z.ZodType,
  errors: Record<string, z.ZodType>,
) {
  return {
    summary,
    ...(request ? { requestBody: { required: true, content: json(request, 'input') } } : {}),
    responses: {
      200: { description: 'success', content: json(response, 'output') },
      ...Object.fromEntries(
        Object.entries(errors).map(([status, body]) => [
          status,
          { description: 'error', content: json(body, 'output') },
        ]),
      ),
      401: { description: 'missing or wrong credentials' },
    },
  };
}

/** A GET's query parameters, from the schema the route validates them with. */
function queryParameters(schema: z.ZodObject<z.ZodRawShape>) {
  return Object.entries(schema.shape).map(([name, field]) => ({
    name,
    in: 'query',
    required: !(field as z.ZodType).safeParse(undefined).success,
    schema: z.toJSONSchema(field as z.ZodType, { io: 'input' }),
  }));
}

export function openApiDocument(): Record<string, unknown> {
  const grpc = { 400: grpcErrorBody, 404: grpcErrorBody, 409: grpcErrorBody, 500: grpcErrorBody };
  const browseErrors = { 400: grpcErrorBody, 404: grpcErrorBody, 422: grpcErrorBody };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tributary',
      version: 'v1',
      // The schemas show each request field once; protojson.ts reads more (docs/api.md, Requests).
      description:
        'Request bodies are read as protobuf JSON (grpc-gateway): each field under its proto name or its ' +
        'lowerCamel name, integers also as decimal strings, enums also by number, null and the zero value ' +
        'of an optional field as unset, unknown fields ignored. The schemas below show one spelling.',
    },
    components: { securitySchemes: { basic: { type: 'http', scheme: 'basic' } } },
    security: [{ basic: [] }],
    paths: {
      '/api/v1/peers/create': {
        post: operation('Create or update a peer (admin role)', createPeerRequest, createPeerResponse, {
          400: createPeerResponse,
          403: createPeerResponse,
          409: createPeerResponse,
          422: createPeerResponse,
        }),
      },
      '/api/v1/peers/validate': {
        post: operation(
          'Check a peer as peers/create does, storing nothing (an addition)',
          createPeerRequest,
          validatePeerResponse,
          { 400: validatePeerResponse, 422: validatePeerResponse },
        ),
      },
      '/api/v1/peers/list': {
        get: operation('List peers (name and kind)', undefined, peerListResponse, {}),
      },
      '/api/v1/peers/info/{peer_name}': {
        get: {
          ...operation('Read a peer', undefined, peerInfoResponse, { 404: grpcErrorBody }),
          parameters: [{ name: 'peer_name', in: 'path', required: true, schema: { type: 'string' } }],
        },
      },
      '/api/v1/peers/schemas': {
        get: {
          ...operation('A source peer’s schemas (an addition)', undefined, peerSchemasResponse, browseErrors),
          parameters: queryParameters(peerSchemasQuery),
        },
      },
      '/api/v1/peers/tables': {
        get: {
          ...operation(
            'The tables of a source peer’s schema (an addition)',
            undefined,
            schemaTablesResponse,
            browseErrors,
          ),
          parameters: queryParameters(schemaTablesQuery),
        },
      },
      '/api/v1/peers/columns': {
        get: {
          ...operation(
            'The columns of a source peer’s table (an addition)',
            undefined,
            tableColumnsResponse,
            browseErrors,
          ),
          parameters: queryParameters(tableColumnsQuery),
        },
      },
      '/api/v1/flows/cdc/create': {
        post: operation('Create a CDC mirror', createMirrorRequest, z.object({ workflowId: z.string() }), {
          ...grpc,
          403: grpcErrorBody,
          422: grpcErrorBody,
        }),
      },
      '/api/v1/mirrors/state_change': {
        post: operation(
          'Pause, resume, edit or drop a mirror (pause and resume need the operate role, edit and drop admin)',
          stateChangeRequest,
          stateChangeResponse,
          { ...grpc, 403: grpcErrorBody },
        ),
      },
      '/api/v1/mirrors/tables/resync': {
        post: operation(
          'Load a table of a mirror again (an addition: today a table stopped on a fault of its own)',
          resyncTableRequest,
          resyncTableResponse,
          { ...grpc, 403: grpcErrorBody },
        ),
      },
      '/api/v1/mirrors/list': {
        get: operation('List mirrors (name, peers, creation time)', undefined, mirrorListResponse, {}),
      },
      '/api/v1/mirrors/status': {
        post: operation('Read a mirror status', mirrorStatusRequest, mirrorStatusResponse, {
          400: mirrorStatusResponse,
          404: mirrorStatusResponse,
        }),
      },
      '/api/v1/mirrors/cdc/batches': {
        post: operation('List CDC batches', batchesRequest, batchesResponse, grpc),
      },
      '/api/v1/mirrors/logs': {
        post: operation('List mirror logs', logsRequest, logsResponse, grpc),
      },
      '/api/v1/scripts': {
        post: operation('Create or update a script', upsertScriptRequest, upsertScriptResponse, {
          ...grpc,
          403: grpcErrorBody,
        }),
      },
      '/api/v1/audit': {
        get: {
          ...operation(
            'Read the audit trail, newest first (an addition; admin credentials only)',
            undefined,
            auditResponse,
            { 400: grpcErrorBody, 403: grpcErrorBody },
          ),
          parameters: [
            { name: 'page', in: 'query', required: false, schema: { type: 'integer', minimum: 1 } },
            {
              name: 'num_per_page',
              in: 'query',
              required: false,
              schema: { type: 'integer', minimum: 0, maximum: 1000, default: 50 },
            },
            { name: 'user', in: 'query', required: false, schema: { type: 'string' } },
          ],
        },
      },
      '/api/v1/scripts/test': {
        post: operation(
          'Run a script once on a sample record, saving nothing (an addition)',
          testScriptRequest,
          testScriptResponse,
          { ...grpc, 403: grpcErrorBody },
        ),
      },
      '/api/v1/scripts/{id}': {
        get: {
          ...operation('Read one script, or all with id -1', undefined, scriptsResponse, grpc),
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'integer' } }],
        },
      },
    },
  };
}

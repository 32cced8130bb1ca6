// Additions to the interface for picking a mirror's tables (docs/api.md,
// "Source browsing"), at the paths and in the shapes of the system behind the
// interface (PeerDB's GetSchemas, GetTablesInSchema, GetColumns), with more
// per table. Read-only, against a PostgreSQL peer; the console's mirror form
// uses them.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { browseColumns, browseSchemas, browseTables, type Peer } from '../../../../engine/src/index.ts';
import { type FacadeContext, sourceBrowser } from '../context.ts';
import { parseRequest } from '../convert.ts';
import { ApiError } from '../errors.ts';
import { peerSchemasQuery, schemaTablesQuery, tableColumnsQuery } from '../wire.ts';

/** The query read as a request body is (both field spellings), then validated. */
function parseQuery<Schema extends z.ZodType>(schema: Schema, request: FastifyRequest): z.infer<Schema> {
  return parseRequest(schema, { body: request.query, log: request.log, routeOptions: request.routeOptions })
    .body;
}

async function relationalPeer(context: FacadeContext, name: string): Promise<Peer & { kind: 'relational' }> {
  const found = await context.store.getPeer(name);
  if (!found) throw new ApiError('notFound', `peer ${name} does not exist`);
  const peer: Peer = found.peer;
  if (peer.kind !== 'relational') {
    throw new ApiError(
      'invalidArgument',
      `peer ${name} is not a PostgreSQL peer: only a source can be browsed`,
    );
  }
  return peer;
}

/** A source that cannot be read is the peer's problem, said without the driver's words (which may name hosts). */
async function fromSource<T>(name: string, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch {
    throw new ApiError(
      'peerUnreachable',
      `cannot read the catalog of peer ${name}: check it with peers/create`,
    );
  }
}

const replicaIdentities = {
  default: 'REPLICA_IDENTITY_DEFAULT',
  nothing: 'REPLICA_IDENTITY_NOTHING',
  full: 'REPLICA_IDENTITY_FULL',
  index: 'REPLICA_IDENTITY_INDEX',
} as const;

export function sourceBrowsingRoutes(app: FastifyInstance, context: FacadeContext): void {
  const browser =
    context.browseSource ??
    sourceBrowser({ schemas: browseSchemas, tables: browseTables, columns: browseColumns });

  app.get('/api/v1/peers/schemas', async (request) => {
    const query = parseQuery(peerSchemasQuery, request);
    const peer = await relationalPeer(context, query.peer_name);
    return { schemas: await fromSource(query.peer_name, () => browser.schemas(peer)) };
  });

  app.get('/api/v1/peers/tables', async (request) => {
    const query = parseQuery(schemaTablesQuery, request);
    const peer = await relationalPeer(context, query.peer_name);
    const tables = await fromSource(query.peer_name, () => browser.tables(peer, query.schema_name));
    return {
      tables: tables.map((table) => ({
        tableName: table.name,
        canMirror: table.canMirror,
        tableSize: String(table.sizeBytes),
        hasPrimaryKey: table.hasPrimaryKey,
        replicaIdentity: replicaIdentities[table.replicaIdentity],
        partitioned: table.partitioned,
        partition: table.partition,
      })),
    };
  });

  app.get('/api/v1/peers/columns', async (request) => {
    const query = parseQuery(tableColumnsQuery, request);
    const peer = await relationalPeer(context, query.peer_name);
    return {
      columns: await fromSource(query.peer_name, () =>
        browser.columns(peer, query.schema_name, query.table_name),
      ),
    };
  });
}

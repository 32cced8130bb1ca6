import { isDeepStrictEqual } from 'node:util';
import type { FastifyInstance } from 'fastify';
import {
  describeCheckFailure,
  splitPeerSecrets,
  warnUnverifiedHostKey,
} from '../../../../engine/src/index.ts';
import { noteAuditSubject } from '../audit.ts';
import type { FacadeContext } from '../context.ts';
import { parseRequest, peerFromWire, peerToWire } from '../convert.ts';
import { ApiError } from '../errors.ts';
import { createPeerRequest } from '../wire.ts';

export function peerRoutes(app: FastifyInstance, context: FacadeContext): void {
  app.post('/api/v1/peers/create', { config: { errorShape: 'peer' } }, async (request, reply) => {
    const { body, field } = parseRequest(createPeerRequest, request);
    noteAuditSubject(request, { object: body.peer.name });
    const peer = peerFromWire(body.peer, field);
    const existing = await context.store.getPeer(peer.name);
    if (existing && !body.allow_update) {
      // Secrets are left out of the comparison: an answer that differed with the
      // stored password would let any API caller test guesses of it.
      const withoutSecrets = (candidate: typeof peer) => ({
        kind: candidate.kind,
        config: splitPeerSecrets(candidate).config,
      });
      if (isDeepStrictEqual(withoutSecrets(existing.peer), withoutSecrets(peer))) {
        return {
          status: 'CREATED',
          message: `peer ${peer.name} already exists with this configuration (secrets are not compared; set allow_update to replace them)`,
        };
      }
      throw new ApiError(
        'conflict',
        `peer ${peer.name} already exists with a different configuration; set allow_update to replace it`,
      );
    }
    let version: string | undefined;
    try {
      ({ version } = await context.checkPeer(peer));
    } catch (error) {
      const secrets = Object.values(splitPeerSecrets(peer).secrets);
      context.logger.info({ peer: peer.name, kind: peer.kind }, 'peer check failed');
      reply.code(422);
      return {
        status: 'FAILED',
        message: `failed to validate peer ${peer.name}: ${describeCheckFailure(error, secrets)}`,
      };
    }
    if (peer.kind === 'relational') {
      warnUnverifiedHostKey(peer.name, peer.config.sshConfig, (message) => context.logger.warn(message));
    }
    await context.store.putPeer(peer, version ?? null);
    return { status: 'CREATED', message: `peer ${peer.name} ${existing ? 'updated' : 'created'}` };
  });

  // Not in the interface: the check peers/create runs, without storing anything
  // (the console's "Test connection"), at the path and in the shape of PeerDB's
  // ValidatePeer. The answer's message never holds a secret of the request.
  app.post('/api/v1/peers/validate', { config: { errorShape: 'validate' } }, async (request, reply) => {
    const { body, field } = parseRequest(createPeerRequest, request);
    const peer = peerFromWire(body.peer, field);
    try {
      const { version } = await context.checkPeer(peer);
      return {
        status: 'VALID',
        message: `peer ${peer.name} can be reached${version ? ` (version ${version})` : ''}`,
      };
    } catch (error) {
      const secrets = Object.values(splitPeerSecrets(peer).secrets);
      reply.code(422);
      return {
        status: 'INVALID',
        message: `failed to validate peer ${peer.name}: ${describeCheckFailure(error, secrets)}`,
      };
    }
  });

  // Not in the interface: the list its clients have no call for (the console's peer
  // page reads it), at the path and in the shape of PeerDB's ListPeers. A peer
  // whose secrets cannot be read (cluster mode) is listed with `problem`.
  app.get('/api/v1/peers/list', async () => ({
    items: (await context.store.listPeerEntries())
      .map(({ name, kind, problem }) => ({ name, type: kind.toUpperCase(), ...(problem ? { problem } : {}) }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
  }));

  app.get<{ Params: { peer_name: string } }>('/api/v1/peers/info/:peer_name', async (request) => {
    const found = await context.store.getPeer(request.params.peer_name);
    if (!found) throw new ApiError('notFound', `peer ${request.params.peer_name} does not exist`);
    const reportsVersion = found.peer.kind === 'relational' || found.peer.kind === 'analytics';
    return {
      peer: peerToWire(found.peer),
      ...(reportsVersion ? { version: found.version ?? '' } : {}),
    };
  });
}

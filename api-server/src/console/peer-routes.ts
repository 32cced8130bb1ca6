// The console's peer pages beyond the list: a peer's own page (kind, version,
// masked configuration, the mirrors that use it) and the form that creates
// one, checked first by the API (peers/validate, peers/create).
import type { FastifyInstance } from 'fastify';
import type { ApiErrorBody, PeerInfo } from './api-client.ts';
import { html } from './html.ts';
import { messagePage, page } from './pages.ts';
import { isPeerKind, peerFormPage, peerRequestOf, withoutSecrets } from './peer-form.ts';
import { client, htmlType, isSameOrigin } from './request.ts';

export const peerPath = (name: string) => `/peers/${encodeURIComponent(name)}`;

interface MirrorList {
  readonly mirrors: readonly { name: string; sourceName: string; destinationName: string }[];
}

export function peerRoutes(scope: FastifyInstance, app: FastifyInstance): void {
  scope.get<{ Querystring: { kind?: string } }>('/new/peer', async (request, reply) => {
    const kind = isPeerKind(request.query.kind) ? request.query.kind : 'relational';
    return reply.type(htmlType).send(peerFormPage({ kind, values: {} }));
  });

  // A PEM key or certificate makes a long form: the body limit is the API's peer limit's order.
  scope.post<{ Body: Record<string, string> | undefined }>(
    '/new/peer',
    { bodyLimit: 256 * 1024 },
    async (request, reply) => {
      const values = request.body ?? {};
      const kind = isPeerKind(values.kind) ? values.kind : 'relational';
      if (!isSameOrigin(request)) {
        return reply
          .code(403)
          .type(htmlType)
          .send(messagePage('Refused', 'this form was posted from another site', '/peers'));
      }
      const api = client(app, request);
      const body = peerRequestOf(kind, values);
      const shown = withoutSecrets(kind, values);
      if (values.intent === 'test') {
        const answer = await api.post<{ status: string; message: string }>('/api/v1/peers/validate', body);
        const valid = answer.status === 200 && answer.body.status === 'VALID';
        return reply
          .code(valid ? 200 : answer.status === 200 ? 422 : answer.status)
          .type(htmlType)
          .send(
            peerFormPage({
              kind,
              values: shown,
              ...(valid ? { checked: answer.body.message } : { error: answer.body.message }),
            }),
          );
      }
      const answer = await api.post<{ status: string; message: string }>('/api/v1/peers/create', body);
      if (answer.status !== 200 || answer.body.status !== 'CREATED') {
        return reply
          .code(answer.status === 200 ? 422 : answer.status)
          .type(htmlType)
          .send(peerFormPage({ kind, values: shown, error: answer.body.message }));
      }
      return reply.redirect(peerPath(String((body.peer as { name: string }).name)), 303);
    },
  );

  scope.get<{ Params: { name: string } }>('/peers/:name', async (request, reply) => {
    const api = client(app, request);
    const { name } = request.params;
    const info = await api.get<PeerInfo & ApiErrorBody>(`/api/v1/peers/info/${encodeURIComponent(name)}`);
    if (info.status !== 200) {
      return reply
        .code(info.status)
        .type(htmlType)
        .send(messagePage('Peer not found', info.body.message ?? `no peer ${name}`, '/peers'));
    }
    const mirrors = await api.get<MirrorList>('/api/v1/mirrors/list');
    const using = (mirrors.status === 200 ? mirrors.body.mirrors : []).filter(
      (mirror) => mirror.sourceName === name || mirror.destinationName === name,
    );
    const { name: _name, type, ...config } = info.body.peer ?? { name, type: '' };
    const body = html`<h1>Peer ${name}</h1>
<dl>
<dt>Kind</dt><dd>${String(type).toLowerCase()}</dd>
<dt>Version (last check)</dt><dd>${info.body.version || '–'}</dd>
<dt>Configuration (secrets masked)</dt><dd><code>${JSON.stringify(config)}</code></dd>
</dl>
<h2>Mirrors using it</h2>
${
  using.length === 0
    ? html`<p>None.</p>`
    : html`<ul>${using.map(
        (mirror) =>
          html`<li><a href="/mirrors/${encodeURIComponent(mirror.name)}">${mirror.name}</a> (${mirror.sourceName === name ? 'source' : 'destination'})</li>`,
      )}</ul>`
}
<p><a href="/new/peer?kind=${String(type).toLowerCase()}">New peer</a> · <a href="/peers">Back to the peers</a></p>`;
    return reply.type(htmlType).send(page(`Peer ${name}`, body));
  });
}

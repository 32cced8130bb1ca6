// The console's pages of peers, scripts and the audit trail: read through
// /api/v1 like the mirror pages, scripts edited through the same POST
// /api/v1/scripts (which refuses a source that does not compile, with Lua's
// message and line).
import type { AuditPage, PeerInfo, ScriptEntry } from './api-client.ts';
import { type Html, html } from './html.ts';
import { page } from './pages.ts';

export const scriptPath = (id: number) => `/scripts/${id}`;

export interface PeerRow {
  readonly name: string;
  readonly type: string;
  readonly info: PeerInfo | undefined;
  /** Why the peer's secrets cannot be read, for a peer shown broken. */
  readonly problem?: string | undefined;
}

export function peerListPage(peers: readonly PeerRow[]): string {
  const body = html`<h1>Peers</h1>
<p><a href="/new/peer">New peer</a></p>
${
  peers.length === 0
    ? html`<p>No peers yet: create one with the form, or with <code>POST /api/v1/peers/create</code> (see the README).</p>`
    : html`<table>
<caption class="visually-hidden">Every peer, with its configuration as the API shows it (secrets masked)</caption>
<thead><tr><th scope="col">peer</th><th scope="col">kind</th><th scope="col">version</th><th scope="col">configuration (secrets masked)</th></tr></thead>
<tbody>
${peers.map(({ name, type, info, problem }) => {
  if (problem) {
    return html`<tr><td>${name}</td><td>${type.toLowerCase()}</td><td>–</td><td class="error">broken: ${problem}</td></tr>`;
  }
  const { name: _name, type: _type, ...config } = info?.peer ?? { name, type };
  return html`<tr><td><a href="/peers/${encodeURIComponent(name)}">${name}</a></td><td>${type.toLowerCase()}</td><td>${info?.version || '–'}</td><td><code>${JSON.stringify(config)}</code></td></tr>`;
})}
</tbody>
</table>`
}`;
  return page('Peers', body);
}

export function scriptListPage(
  scripts: readonly ScriptEntry[],
  options: { readonly canEdit: boolean; readonly disabledMessage?: string | undefined },
): string {
  const { canEdit, disabledMessage } = options;
  const body = html`<h1>Scripts</h1>
${
  disabledMessage !== undefined
    ? html`<p>${disabledMessage}.</p>`
    : html`${canEdit ? html`<p><a href="/scripts/new">New script</a></p>` : html`<p>Read-only: saving scripts needs the admin role.</p>`}
${
  scripts.length === 0
    ? html`<p>No scripts yet.</p>`
    : html`<table>
<caption class="visually-hidden">Every script</caption>
<thead><tr><th scope="col">script</th><th scope="col">id</th><th scope="col">language</th><th scope="col">lines</th></tr></thead>
<tbody>
${scripts.map(
  (script) =>
    html`<tr><td><a href="${scriptPath(script.id)}">${script.name}</a></td><td>${script.id}</td><td>${script.lang}</td><td>${script.source.split('\n').length}</td></tr>`,
)}
</tbody>
</table>`
}`
}`;
  return page('Scripts', body);
}

export interface ScriptForm {
  /** -1 for a new script, as in the API. */
  readonly id: number;
  readonly name: string;
  readonly source: string;
  /** The API's refusal of the last save, shown above the form with what was typed. */
  readonly error?: string | undefined;
  readonly saved?: boolean | undefined;
  /** The visitor may save (admin): otherwise the form is read-only, without a Save button. */
  readonly canEdit: boolean;
  /** The sample record tried (JSON text), what it is read as, and the run's outcome. */
  readonly sample?: string | undefined;
  readonly sampleForm?: 'rows' | 'messages' | undefined;
  readonly trial?: ScriptTrialView | undefined;
}

/** A run on the sample as scripts/test answers it. */
export interface ScriptTrialView {
  readonly ok: boolean;
  readonly row?: { readonly drop: boolean; readonly values?: Readonly<Record<string, string | null>> };
  readonly messages?: readonly Readonly<Record<string, unknown>>[];
  readonly error?: string;
  readonly printed: readonly string[];
}

/** A record a person can start from: an insert into a table, row values as PostgreSQL's text. */
export const sampleRecord = JSON.stringify(
  {
    kind: 'insert',
    new: { id: '1', item: 'bread', price: '2.50' },
    row: { id: '1', item: 'bread', price: '2.50' },
    source: { schema: 'public', table: 'orders' },
    target: 'public.orders',
  },
  null,
  2,
);

function trialSection(form: ScriptForm): Html | string {
  const trial = form.trial;
  if (!trial) return '';
  const outcome = !trial.ok
    ? html`<p class="error" role="alert">${trial.error ?? 'the script failed'}</p>`
    : trial.row
      ? trial.row.drop
        ? html`<p role="status">The row is dropped (onRecord returned nil).</p>`
        : html`<p role="status">The row after the script (only the columns it changed differ):</p>
<pre>${JSON.stringify({ ...(JSON.parse(form.sample ?? '{}') as { row?: object }).row, ...trial.row.values }, null, 2)}</pre>`
      : html`<p role="status">${String(trial.messages?.length ?? 0)} message(s); a field left out takes its default (topic, key, value):</p>
<pre>${JSON.stringify(trial.messages ?? [], null, 2)}</pre>`;
  return html`<section aria-labelledby="trial-heading"><h2 id="trial-heading">On the sample</h2>
${outcome}
${trial.printed.length > 0 ? html`<p>Printed:</p><pre>${trial.printed.join('\n')}</pre>` : ''}
</section>`;
}

export function scriptPage(form: ScriptForm): string {
  const isNew = form.id === -1;
  const title = isNew ? 'New script' : `Script ${form.name}`;
  const readonly = form.canEdit ? '' : html` readonly`;
  const body = html`<h1>${title}</h1>
${form.saved ? html`<p role="status">Saved.</p>` : ''}
${form.error ? html`<p class="error" role="alert">${form.error}</p>` : ''}
<form method="post" action="${isNew ? '/scripts/new' : scriptPath(form.id)}">
<p><label for="script-name">Name</label><br>
<input id="script-name" name="name" value="${form.name}" required maxlength="63" pattern="[a-z0-9_][a-z0-9_\\-]*" size="40"${readonly}></p>
<p><label for="script-source">Lua source</label><br>
<textarea id="script-source" name="source" rows="24" cols="100" spellcheck="false"${readonly}>${form.source}</textarea></p>
<p>${form.canEdit ? html`<button type="submit" name="intent" value="save">Save</button>` : html`<em>Read-only: saving scripts needs the admin role.</em>`} <a href="/scripts">Back to the scripts</a></p>
<h2>Try it</h2>
<p><label for="script-sample">A sample record (JSON, as onRecord gets it: docs/scripts.md)</label><br>
<textarea id="script-sample" name="sample" rows="10" cols="100" spellcheck="false">${form.sample ?? sampleRecord}</textarea></p>
<p><label for="script-sample-form">Read the result as</label>
<select id="script-sample-form" name="sample_form">
<option value="rows"${form.sampleForm !== 'messages' ? html` selected` : ''}>a row (a table destination)</option>
<option value="messages"${form.sampleForm === 'messages' ? html` selected` : ''}>messages (Kafka)</option>
</select>
${form.canEdit ? html`<button type="submit" name="intent" value="try">Run on the sample</button>` : ''}</p>
</form>
${trialSection(form)}
<p>Saving compiles the script first and refuses it, with the line, when it does not compile.
A running mirror that uses it restarts its engine with the new source at its next reconcile, at a batch boundary.</p>`;
  return page(title, body);
}

export const auditPerPage = 50;

/** The audit trail, newest first, a page at a time (GET /api/v1/audit). */
export function auditListPage(audit: AuditPage): string {
  const pages = Math.max(1, Math.ceil(audit.total / auditPerPage));
  const link = (target: number) => `/audit?page=${target}`;
  const body = html`<h1>Audit trail</h1>
<p>Every state-changing request, refused ones included: ${audit.total} entries, newest first.</p>
<table>
<caption class="visually-hidden">Audit entries, newest first</caption>
<thead><tr><th scope="col">time</th><th scope="col">user</th><th scope="col">role</th><th scope="col">action</th><th scope="col">object</th><th scope="col">from</th><th scope="col">status</th></tr></thead>
<tbody>
${audit.entries.map(
  (entry) =>
    html`<tr><td>${entry.time}</td><td>${entry.user}</td><td>${entry.role}</td><td>${entry.action}</td><td>${entry.object}${entry.detail ? ` (${entry.detail})` : ''}</td><td>${entry.clientAddress}</td><td${entry.status >= 400 ? html` class="error"` : ''}>${entry.status}</td></tr>`,
)}
</tbody>
</table>
<nav aria-label="Audit pages"><p>Page ${audit.page} of ${pages}
${audit.page > 1 ? html` · <a href="${link(audit.page - 1)}">newer</a>` : ''}
${audit.page < pages ? html` · <a href="${link(audit.page + 1)}">older</a>` : ''}</p></nav>`;
  return page('Audit trail', body);
}

// The console's edit form of a paused mirror, as the interface edits one: its
// tables to remove, tables of a source schema to add (the mirror form's
// picker), batch size and idle timeout; saved through `POST
// /api/v1/mirrors/state_change` (STATUS_RUNNING with a cdcFlowConfigUpdate),
// which applies the edit and resumes the mirror.
import type { MirrorStatus } from './api-client.ts';
import { html } from './html.ts';
import { type MirrorFormValues, pickedMappings, type TableChoice, tablePicker } from './mirror-form.ts';
import { page } from './pages.ts';

export const editPath = (name: string) => `/mirrors/${encodeURIComponent(name)}/edit`;

export interface MirrorEditPage {
  readonly name: string;
  readonly status: MirrorStatus;
  readonly values: MirrorFormValues;
  readonly schemas: readonly string[];
  readonly tables: readonly TableChoice[];
  readonly browseError?: string | undefined;
  readonly error?: string | undefined;
}

type Config = NonNullable<MirrorStatus['cdcStatus']>['config'];

/** The state_change request of the form: the edit, and the resume it comes with. */
export function editRequestOf(name: string, values: MirrorFormValues): Record<string, unknown> {
  const removed: Record<string, unknown>[] = [];
  for (let index = 0; values[`remove.${index}.source`] !== undefined; index++) {
    if (values[`remove.${index}.pick`] !== 'on') continue;
    removed.push({
      source_table_identifier: values[`remove.${index}.source`],
      destination_table_identifier: values[`remove.${index}.destination`],
    });
  }
  const added = pickedMappings(values);
  const number = (key: string) => {
    const raw = (values[key] ?? '').trim();
    return raw === '' ? {} : { [key]: /^\d+$/.test(raw) ? Number(raw) : raw };
  };
  return {
    flowJobName: name,
    requestedFlowState: 'STATUS_RUNNING',
    flowConfigUpdate: {
      cdcFlowConfigUpdate: {
        ...(added.length > 0 ? { additional_tables: added } : {}),
        ...(removed.length > 0 ? { removed_tables: removed } : {}),
        ...number('batch_size'),
        ...number('idle_timeout'),
      },
    },
  };
}

export function mirrorEditPage(form: MirrorEditPage): string {
  const { name, values } = form;
  const config = form.status.cdcStatus?.config as
    | (Config & { maxBatchSize?: number; idleTimeoutSeconds?: string })
    | undefined;
  const mappings = config?.tableMappings ?? [];
  const mapped = new Set(mappings.map((mapping) => mapping.sourceTableIdentifier));
  const title = `Edit ${name}`;
  const body = html`<h1>${title}</h1>
<p>Saving applies the edit and resumes the mirror: added tables load while the others stream, removed ones stop (their destination tables stay).</p>
${form.error ? html`<p class="error" role="alert">${form.error}</p>` : ''}
<form method="get" action="${editPath(name)}">
${
  form.schemas.length > 0
    ? html`<p><label for="edit-schema">Schema to add tables from</label><br><select id="edit-schema" name="schema">
${form.schemas.map((schema) => html`<option${schema === values.schema ? html` selected` : ''}>${schema}</option>`)}
</select> <label for="edit-filter">tables containing</label> <input id="edit-filter" name="filter" value="${values.filter ?? ''}" size="20"> <button type="submit">Show the tables</button></p>`
    : ''
}
</form>
${form.browseError ? html`<p class="error" role="alert">${form.browseError}</p>` : ''}
<form method="post" action="${editPath(name)}">
<input type="hidden" name="schema" value="${values.schema ?? ''}">
<input type="hidden" name="filter" value="${values.filter ?? ''}">
<h2>Tables</h2>
<table>
<caption>The mirror's tables: check the ones to remove</caption>
<thead><tr><th scope="col">remove</th><th scope="col">source table</th><th scope="col">destination table</th></tr></thead>
<tbody>
${mappings.map(
  (mapping, index) => html`<tr>
<td><input type="hidden" name="remove.${index}.source" value="${mapping.sourceTableIdentifier}"><input type="hidden" name="remove.${index}.destination" value="${mapping.destinationTableIdentifier}"><input type="checkbox" id="remove-${index}" name="remove.${index}.pick" aria-label="remove ${mapping.sourceTableIdentifier}"${values[`remove.${index}.pick`] === 'on' ? html` checked` : ''}></td>
<td><label for="remove-${index}">${mapping.sourceTableIdentifier}</label></td><td>${mapping.destinationTableIdentifier}</td>
</tr>`,
)}
</tbody>
</table>
<h2>Tables to add</h2>
${values.schema ? tablePicker({ values, tables: form.tables }, form.status.cdcStatus?.destinationType, mapped) : html`<p>The source cannot be browsed.</p>`}
<h2>Options</h2>
<p><label for="edit-batch-size">batch_size</label><br><input type="number" id="edit-batch-size" name="batch_size" value="${values.batch_size ?? String(config?.maxBatchSize ?? '')}" size="20"></p>
<p><label for="edit-idle-timeout">idle_timeout (seconds)</label><br><input type="number" id="edit-idle-timeout" name="idle_timeout" value="${values.idle_timeout ?? String(config?.idleTimeoutSeconds ?? '')}" size="20"></p>
<p><button type="submit">Save and resume</button> <a href="/mirrors/${encodeURIComponent(name)}">Back to the mirror</a></p>
</form>`;
  return page(title, body);
}

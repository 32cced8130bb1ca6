// The console's mirror form: source and destination, the tables of one of the
// source's schemas to pick from (the source browsing additions: which can be
// mirrored, their keys), per table its destination name, excluded columns and
// (ClickHouse) ordering columns, and the options with their defaults and the
// engine's own explanations (the spec schema's descriptions). It posts what
// `POST /api/v1/flows/cdc/create` takes, and shows the API's refusal next to
// the field it names.
import { z } from 'zod';
import { mirrorSpecFields } from '../../../engine/src/index.ts';
import { type Html, html } from './html.ts';
import { page } from './pages.ts';

/** A peer as the form offers it. */
export interface PeerChoice {
  readonly name: string;
  /** RELATIONAL, ANALYTICS, DATAWAREHOUSE or STREAM. */
  readonly type: string;
}

/** A table of the chosen schema as the form offers it. */
export interface TableChoice {
  readonly tableName: string;
  readonly canMirror: boolean;
  readonly hasPrimaryKey: boolean;
  readonly replicaIdentity: string;
  readonly partitioned: boolean;
  readonly partition: boolean;
}

/** An option of the form: its wire name, the spec field it is, and how it is typed. */
interface OptionField {
  readonly wire: string;
  readonly spec: keyof typeof mirrorSpecFields.shape;
  readonly input: 'number' | 'checkbox' | 'text' | 'select';
  readonly options?: readonly string[];
}

const optionFields: readonly OptionField[] = [
  { wire: 'do_initial_snapshot', spec: 'doInitialSnapshot', input: 'checkbox' },
  { wire: 'max_batch_size', spec: 'maxBatchSize', input: 'number' },
  { wire: 'idle_timeout_seconds', spec: 'idleTimeoutSeconds', input: 'number' },
  { wire: 'streaming', spec: 'streaming', input: 'checkbox' },
  { wire: 'snapshot_num_rows_per_partition', spec: 'snapshotNumRowsPerPartition', input: 'number' },
  { wire: 'snapshot_max_parallel_workers', spec: 'snapshotMaxParallelWorkers', input: 'number' },
  { wire: 'snapshot_num_tables_in_parallel', spec: 'snapshotNumTablesInParallel', input: 'number' },
  { wire: 'soft_delete_col_name', spec: 'softDeleteColName', input: 'text' },
  { wire: 'synced_at_col_name', spec: 'syncedAtColName', input: 'text' },
  { wire: 'schema_changes', spec: 'schemaChanges', input: 'select', options: ['apply', 'hold', 'ignore'] },
];

const schemaChangesWire = {
  apply: 'SCHEMA_CHANGES_APPLY',
  hold: 'SCHEMA_CHANGES_HOLD',
  ignore: 'SCHEMA_CHANGES_IGNORE',
};

interface SpecJsonField {
  readonly description?: string;
  readonly default?: unknown;
}

let specFacts: ReadonlyMap<string, SpecJsonField> | undefined;

/** Each option's description and default, from the engine's spec schema (drawn once: it is fixed). */
function optionFacts(): ReadonlyMap<string, SpecJsonField> {
  if (!specFacts) {
    const schema = z.toJSONSchema(mirrorSpecFields, { io: 'input', unrepresentable: 'any' }) as {
      properties?: Record<string, SpecJsonField>;
    };
    specFacts = new Map(Object.entries(schema.properties ?? {}));
  }
  return specFacts;
}

/** What the form posts, and what a refused form shows again. */
export type MirrorFormValues = Readonly<Record<string, string>>;

export interface MirrorFormPage {
  readonly values: MirrorFormValues;
  readonly peers: readonly PeerChoice[];
  readonly scripts: readonly string[];
  /** The chosen source's schemas, and the chosen schema's tables (after `filter`). */
  readonly schemas: readonly string[];
  readonly tables: readonly TableChoice[];
  /** Why the source could not be browsed. */
  readonly browseError?: string | undefined;
  /** The API's refusal of the last post. */
  readonly error?: string | undefined;
}

/** The part of a refusal that names a field: `connection_configs.<field>` or a table mapping. */
export function errorFor(error: string | undefined, field: string): string | undefined {
  if (!error) return undefined;
  const named = error.split('; ').filter((part) => part.includes(`connection_configs.${field}`));
  return named.length > 0 ? named.join('; ') : undefined;
}

/** The table mappings of the tables picked in the form (`table.<n>.*`). */
export function pickedMappings(values: MirrorFormValues): Record<string, unknown>[] {
  const mappings: Record<string, unknown>[] = [];
  for (let index = 0; values[`table.${index}.source`] !== undefined; index++) {
    if (values[`table.${index}.pick`] !== 'on') continue;
    const list = (key: string) =>
      (values[`table.${index}.${key}`] ?? '')
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean);
    const ordering = list('ordering');
    mappings.push({
      source_table_identifier: values[`table.${index}.source`],
      destination_table_identifier:
        (values[`table.${index}.destination`] ?? '').trim() || values[`table.${index}.source`],
      ...(list('exclude').length > 0 ? { exclude: list('exclude') } : {}),
      ...(ordering.length > 0
        ? { columns: ordering.map((column, rank) => ({ source_name: column, ordering: rank + 1 })) }
        : {}),
    });
  }
  return mappings;
}

/** The create request from the form's values. */
export function mirrorRequestOf(values: MirrorFormValues): Record<string, unknown> {
  const mappings = pickedMappings(values);
  const config: Record<string, unknown> = {
    flow_job_name: (values.name ?? '').trim(),
    source_name: values.source ?? '',
    destination_name: values.destination ?? '',
    table_mappings: mappings,
  };
  for (const option of optionFields) {
    const raw = (values[option.wire] ?? '').trim();
    if (option.input === 'checkbox') {
      // An unchecked box is not posted: false, as the box showed it.
      config[option.wire] = raw === 'on';
    } else if (raw !== '') {
      config[option.wire] =
        option.input === 'number' && /^\d+$/.test(raw)
          ? Number(raw)
          : option.wire === 'schema_changes'
            ? (schemaChangesWire[raw as keyof typeof schemaChangesWire] ?? raw)
            : raw;
    }
  }
  if ((values.script ?? '') !== '') config.script = values.script;
  return { connection_configs: config };
}

const fieldError = (message: string | undefined): Html | string =>
  message ? html` <strong class="error" role="alert">${message}</strong>` : '';

function optionInput(
  option: OptionField,
  facts: SpecJsonField | undefined,
  values: MirrorFormValues,
  error: string | undefined,
): Html {
  const id = `mirror-${option.wire}`;
  const value = values[option.wire];
  const fallback = facts?.default;
  const help = html`<br><small id="${id}-help">${facts?.description ?? ''}${fallback !== undefined ? ` Default: ${String(fallback)}.` : ''}</small>`;
  const label = html`<label for="${id}">${option.wire}</label>`;
  const problem = fieldError(errorFor(error, option.wire));
  if (option.input === 'checkbox') {
    // Shown first with the engine's default; then as the person left it.
    const checked = values[`${option.wire}.shown`] === 'on' ? value === 'on' : fallback === true;
    return html`<p><input type="hidden" name="${option.wire}.shown" value="on"><input type="checkbox" id="${id}" name="${option.wire}" aria-describedby="${id}-help"${checked ? html` checked` : ''}> ${label}${problem}${help}</p>`;
  }
  if (option.input === 'select') {
    return html`<p>${label}<br><select id="${id}" name="${option.wire}" aria-describedby="${id}-help">
${(option.options ?? []).map((choice) => html`<option${choice === (value || String(fallback ?? '')) ? html` selected` : ''}>${choice}</option>`)}
</select>${problem}${help}</p>`;
  }
  return html`<p>${label}<br><input type="${option.input}" id="${id}" name="${option.wire}" value="${value ?? ''}" placeholder="${fallback === undefined ? '' : String(fallback)}" aria-describedby="${id}-help" size="30">${problem}${help}</p>`;
}

function peerSelect(
  name: string,
  label: string,
  peers: readonly PeerChoice[],
  value: string | undefined,
): Html {
  return html`<p><label for="mirror-${name}">${label}</label><br><select id="mirror-${name}" name="${name}" required>
<option value="">(choose)</option>
${peers.map((peer) => html`<option value="${peer.name}"${peer.name === value ? html` selected` : ''}>${peer.name} (${peer.type.toLowerCase()})</option>`)}
</select></p>`;
}

/**
 * The chosen schema's tables to pick from, but those in `mapped` (source
 * tables the mirror has already, for an edit).
 */
export function tablePicker(
  form: Pick<MirrorFormPage, 'values' | 'tables'>,
  destinationType: string | undefined,
  mapped: ReadonlySet<string> = new Set(),
): Html {
  const { values } = form;
  const tables = form.tables.filter((table) => !mapped.has(`${values.schema ?? ''}.${table.tableName}`));
  const schema = values.schema ?? '';
  const analytics = destinationType === 'ANALYTICS';
  if (tables.length === 0)
    return html`<p>No tables in schema ${schema} that the source's user may read${values.filter ? html` matching “${values.filter}”` : ''}.</p>`;
  return html`<table>
<caption>Tables of schema ${schema}: pick the ones to replicate</caption>
<thead><tr><th scope="col">replicate</th><th scope="col">source table</th><th scope="col">key</th><th scope="col">destination name</th><th scope="col">excluded columns</th>${analytics ? html`<th scope="col">ordering columns</th>` : ''}</tr></thead>
<tbody>
${tables.map((table, index) => {
  const source = `${schema}.${table.tableName}`;
  const key = `table.${index}`;
  const why = !table.canMirror
    ? 'no primary key or replica identity: add one first'
    : table.partition
      ? 'a partition: replicated through its partitioned table'
      : table.hasPrimaryKey
        ? 'primary key'
        : `replica identity ${table.replicaIdentity.replace('REPLICA_IDENTITY_', '').toLowerCase()}`;
  return html`<tr>
<td><input type="hidden" name="${key}.source" value="${source}"><input type="checkbox" id="${key}-pick" name="${key}.pick" aria-label="replicate ${source}"${values[`${key}.pick`] === 'on' ? html` checked` : ''}${table.canMirror ? '' : html` disabled`}></td>
<td><label for="${key}-pick">${source}</label>${table.partitioned ? ' (partitioned)' : ''}</td>
<td>${why}</td>
<td><input name="${key}.destination" aria-label="destination of ${source}" value="${values[`${key}.destination`] ?? source}" size="30"></td>
<td><input name="${key}.exclude" aria-label="columns of ${source} not to replicate, comma-separated" value="${values[`${key}.exclude`] ?? ''}" size="20"></td>
${analytics ? html`<td><input name="${key}.ordering" aria-label="ordering columns of ${source}, comma-separated, in rank order" value="${values[`${key}.ordering`] ?? ''}" size="20"></td>` : ''}
</tr>`;
})}
</tbody>
</table>`;
}

export function mirrorFormPage(form: MirrorFormPage): string {
  const { values, peers } = form;
  const sources = peers.filter((peer) => peer.type === 'RELATIONAL');
  const destinationType = peers.find((peer) => peer.name === values.destination)?.type;
  const facts = optionFacts();
  const chosen = values.source && values.destination;
  const body = html`<h1>New mirror</h1>
${form.error ? html`<p class="error" role="alert">${form.error}</p>` : ''}
<form method="get" action="/new/mirror">
<p><label for="mirror-name-first">Name</label><br><input id="mirror-name-first" name="name" value="${values.name ?? ''}" maxlength="63" pattern="[a-z0-9_][a-z0-9_\\-]*" size="40"></p>
${peerSelect('source', 'Source (PostgreSQL)', sources, values.source)}
${peerSelect('destination', 'Destination', peers, values.destination)}
${
  form.schemas.length > 0
    ? html`<p><label for="mirror-schema">Schema</label><br><select id="mirror-schema" name="schema">
${form.schemas.map((schema) => html`<option${schema === values.schema ? html` selected` : ''}>${schema}</option>`)}
</select> <label for="mirror-filter">tables containing</label> <input id="mirror-filter" name="filter" value="${values.filter ?? ''}" size="20"></p>`
    : ''
}
<p><button type="submit">${chosen ? 'Show the tables' : 'Next: choose tables'}</button></p>
</form>
${form.browseError ? html`<p class="error" role="alert">${form.browseError}</p>` : ''}
${
  chosen && values.schema
    ? html`<form method="post" action="/new/mirror">
<input type="hidden" name="name" value="${values.name ?? ''}">
<input type="hidden" name="source" value="${values.source ?? ''}">
<input type="hidden" name="destination" value="${values.destination ?? ''}">
<input type="hidden" name="schema" value="${values.schema}">
<input type="hidden" name="filter" value="${values.filter ?? ''}">
${fieldError(errorFor(form.error, 'table_mappings'))}
${tablePicker(form, destinationType)}
<h2>Options</h2>
${optionFields.map((option) => optionInput(option, facts.get(option.spec), values, form.error))}
<p><label for="mirror-script">script</label><br><select id="mirror-script" name="script">
<option value="">(none)</option>
${form.scripts.map((script) => html`<option${script === values.script ? html` selected` : ''}>${script}</option>`)}
</select>${fieldError(errorFor(form.error, 'script'))}</p>
<p><button type="submit">Create the mirror</button> <a href="/">Back to the mirrors</a></p>
</form>`
    : ''
}`;
  return page('New mirror', body);
}

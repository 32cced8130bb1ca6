// The console's peer form: the fields of a peer kind's configuration, drawn
// from the API's own wire schema (the engine's rules, wire.ts), so the form
// asks for exactly what `POST /api/v1/peers/create` takes and explains each
// field with the schema's description. Secret fields are password inputs and
// are never written back into a page (a refused form comes back without them).
import { z } from 'zod';
import { type PeerKind, peerSecretPaths } from '../../../engine/src/index.ts';
import {
  analyticsConfigWire,
  datawarehouseConfigWire,
  peerTypes,
  relationalConfigWire,
  streamConfigWire,
} from '../http/wire.ts';
import { type Html, html } from './html.ts';
import { page } from './pages.ts';

export const peerKinds = [
  'relational',
  'analytics',
  'datawarehouse',
  'stream',
] as const satisfies readonly PeerKind[];

const kindWords: Record<PeerKind, string> = {
  relational: 'PostgreSQL',
  analytics: 'ClickHouse',
  datawarehouse: 'Snowflake',
  stream: 'Kafka',
};

const wireSchemas = {
  relational: relationalConfigWire,
  analytics: analyticsConfigWire,
  datawarehouse: datawarehouseConfigWire,
  stream: streamConfigWire,
} as const satisfies Record<PeerKind, z.ZodType>;

interface JsonSchema {
  readonly type?: string;
  readonly description?: string;
  readonly enum?: readonly string[];
  readonly anyOf?: readonly JsonSchema[];
  readonly properties?: Record<string, JsonSchema>;
  readonly required?: readonly string[];
}

/** A form field: a config field under its wire name, dotted inside a nested object (`ssh_config.host`). */
export interface PeerField {
  readonly path: string;
  readonly input: 'text' | 'number' | 'checkbox' | 'select' | 'password' | 'textarea' | 'list';
  readonly required: boolean;
  readonly description: string;
  readonly options?: readonly string[] | undefined;
  /** One of the kind's secret fields (peerSecretPaths): never written back into a page. */
  readonly secret: boolean;
}

const snake = (name: string) => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

/** PEM and other many-line values: a text area. */
const multiline = /(^|\.)(private_key|certificate|root_ca|host_key)$/;

function fieldsOf(schema: JsonSchema, secrets: ReadonlySet<string>, prefix = ''): PeerField[] {
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties ?? {}).flatMap(([name, field]): PeerField[] => {
    const path = `${prefix}${name}`;
    if (field.type === 'object') return fieldsOf(field, secrets, `${path}.`);
    const base = {
      path,
      secret: secrets.has(path),
      // Inside a nested object that is itself optional, nothing is required on its own.
      required: prefix === '' && required.has(name),
      description: field.description ?? field.anyOf?.find((option) => option.description)?.description ?? '',
    };
    if (base.secret) return [{ ...base, input: multiline.test(path) ? 'textarea' : 'password' }];
    if (field.anyOf?.some((option) => option.type === 'array')) return [{ ...base, input: 'list' }];
    if (field.enum) return [{ ...base, input: 'select', options: field.enum }];
    if (field.type === 'boolean') return [{ ...base, input: 'checkbox', required: false }];
    if (field.type === 'integer' || field.type === 'number') return [{ ...base, input: 'number' }];
    return [{ ...base, input: multiline.test(path) ? 'textarea' : 'text' }];
  });
}

const fieldsByKind = new Map<PeerKind, readonly PeerField[]>();

/** The form's fields for a kind, in the schema's order (drawn once per kind: the schemas are fixed). */
export function peerFields(kind: PeerKind): readonly PeerField[] {
  let fields = fieldsByKind.get(kind);
  if (!fields) {
    const schema = z.toJSONSchema(wireSchemas[kind], { io: 'input', unrepresentable: 'any' }) as JsonSchema;
    const secrets = new Set<string>(
      peerSecretPaths[kind].map((path) => path.split('.').map(snake).join('.')),
    );
    fields = fieldsOf(schema, secrets);
    fieldsByKind.set(kind, fields);
  }
  return fields;
}

/** The form's values without the kind's secrets: what a refused or checked form shows again. */
export function withoutSecrets(kind: PeerKind, values: PeerFormValues): PeerFormValues {
  const secret = new Set(
    peerFields(kind)
      .filter((field) => field.secret)
      .map((field) => `config.${field.path}`),
  );
  return Object.fromEntries(Object.entries(values).filter(([key]) => !secret.has(key)));
}

export function isPeerKind(value: unknown): value is PeerKind {
  return typeof value === 'string' && (peerKinds as readonly string[]).includes(value);
}

/** What a person typed, as the form posts it: `name`, `kind`, and each field under `config.<path>`. */
export type PeerFormValues = Readonly<Record<string, string>>;

/**
 * The request peers/create (and peers/validate) take, from the form: an empty
 * field is unset (the engine's default then applies), a number is a number, a
 * checked box true, a list its comma-separated items, a nested field in its
 * object.
 */
export function peerRequestOf(kind: PeerKind, values: PeerFormValues): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  for (const field of peerFields(kind)) {
    const raw = values[`config.${field.path}`];
    let value: unknown;
    if (field.input === 'checkbox') value = raw === 'on' ? true : undefined;
    else if (raw === undefined || raw.trim() === '') value = undefined;
    else if (field.input === 'number') value = /^-?\d+$/.test(raw.trim()) ? Number(raw.trim()) : raw;
    else if (field.input === 'list')
      value = raw
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean);
    else value = field.input === 'password' || field.input === 'textarea' ? raw : raw.trim();
    if (value === undefined) continue;
    const [head, tail] = field.path.split('.', 2) as [string, string | undefined];
    if (tail === undefined) config[head] = value;
    else config[head] = { ...((config[head] as Record<string, unknown> | undefined) ?? {}), [tail]: value };
  }
  return {
    peer: {
      name: (values.name ?? '').trim(),
      type: peerTypes[kind.toUpperCase() as keyof typeof peerTypes],
      [`${kind}_config`]: config,
    },
    ...(values.allow_update === 'on' ? { allow_update: true } : {}),
  };
}

export interface PeerFormPage {
  readonly kind: PeerKind;
  readonly values: PeerFormValues;
  /** The API's refusal, or a check's result. */
  readonly error?: string | undefined;
  readonly checked?: string | undefined;
}

function fieldInput(field: PeerField, value: string | undefined): Html {
  const id = `peer-${field.path.replaceAll('.', '-')}`;
  const name = `config.${field.path}`;
  const help = field.description ? html`<br><small id="${id}-help">${field.description}</small>` : '';
  const described = field.description ? `${id}-help` : '';
  const label = html`<label for="${id}">${field.path}${field.required ? ' (required)' : ''}</label>`;
  switch (field.input) {
    case 'checkbox':
      return html`<p><input type="checkbox" id="${id}" name="${name}" aria-describedby="${described}"${value === 'on' ? html` checked` : ''}> ${label}${help}</p>`;
    case 'select':
      return html`<p>${label}<br><select id="${id}" name="${name}" aria-describedby="${described}">
<option value="">(default)</option>
${(field.options ?? []).filter((option) => option !== '').map((option) => html`<option${option === value ? html` selected` : ''}>${option}</option>`)}
</select>${help}</p>`;
    case 'password':
      // Never written back: a secret is typed again after a refusal.
      return html`<p>${label}<br><input type="password" id="${id}" name="${name}" autocomplete="new-password" aria-describedby="${described}" size="40"${field.required ? html` required` : ''}>${help}</p>`;
    case 'textarea':
      return html`<p>${label}<br><textarea id="${id}" name="${name}" rows="4" cols="70" spellcheck="false" aria-describedby="${described}">${field.secret ? '' : (value ?? '')}</textarea>${help}</p>`;
    default:
      return html`<p>${label}<br><input type="${field.input === 'number' ? 'number' : 'text'}" id="${id}" name="${name}" value="${value ?? ''}" aria-describedby="${described}" size="40"${field.required ? html` required` : ''}>${help}</p>`;
  }
}

export function peerFormPage(form: PeerFormPage): string {
  const { kind, values } = form;
  const body = html`<h1>New peer</h1>
<form method="get" action="/new/peer">
<p><label for="peer-kind">Kind</label>
<select id="peer-kind" name="kind">
${peerKinds.map((candidate) => html`<option value="${candidate}"${candidate === kind ? html` selected` : ''}>${kindWords[candidate]} (${candidate})</option>`)}
</select> <button type="submit">Show its fields</button></p>
</form>
${form.error ? html`<p class="error" role="alert">${form.error}</p>` : ''}
${form.checked ? html`<p role="status">${form.checked}</p>` : ''}
<form method="post" action="/new/peer">
<input type="hidden" name="kind" value="${kind}">
<p><label for="peer-name">Name (required)</label><br>
<input id="peer-name" name="name" value="${values.name ?? ''}" required maxlength="63" pattern="[a-z0-9_][a-z0-9_\\-]*" size="40"></p>
${peerFields(kind).map((field) => fieldInput(field, values[`config.${field.path}`]))}
<p><input type="checkbox" id="peer-allow-update" name="allow_update"${values.allow_update === 'on' ? html` checked` : ''}> <label for="peer-allow-update">Replace a peer of this name</label></p>
<p><button type="submit" name="intent" value="test">Test connection</button> <button type="submit" name="intent" value="save">Save</button> <a href="/peers">Back to the peers</a></p>
</form>
<p>Both buttons run the check the API runs before it stores a peer; Save stores it when the check passes. Secrets are sent once and never shown again.</p>`;
  return page('New peer', body);
}

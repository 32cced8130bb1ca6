// The console's pages: plain server-rendered HTML that works without JavaScript.
import {
  type LogLevelFilter,
  logLevelFilters,
  type PeerKind,
  resyncsOnline,
  type TableStatusView,
} from '../../../engine/src/index.ts';
import { type Role, roleAllows } from '../http/roles.ts';
import type { Batches, Logs, MirrorStatus, PeerInfo } from './api-client.ts';
import { type Html, html } from './html.ts';
import type { MirrorGauges } from './prometheus-text.ts';

/**
 * Where the facade serves htmx (from the npm package; no CDN). Its indicator
 * styles are off: it would add them as an inline style element, which the
 * console's Content-Security-Policy refuses (security-headers.ts).
 */
export const htmxPath = '/console/assets/htmx.min.js';

export function page(title: string, body: Html): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="htmx-config" content='{"includeIndicatorStyles":false}'>
<script src="${htmxPath}" defer></script>
<link rel="stylesheet" href="/console/assets/console.css">
<title>${title} · Tributary</title>
</head>
<body>
<header><nav aria-label="Console">Tributary · <a href="/">mirrors</a> · <a href="/peers">peers</a> · <a href="/scripts">scripts</a> · <a href="/audit">audit</a></nav></header>
<main>
${body}
</main>
</body>
</html>`.text;
}

const mirrorPath = (name: string) => `/mirrors/${encodeURIComponent(name)}`;

/** A folded log entry's count and last time; nothing for an entry written once. */
function repeated(entry: Logs['errors'][number]): Html | string {
  if (entry.repeatCount <= 1) return '';
  return html` <span class="repeated">(${entry.repeatCount} times, last at ${new Date(entry.lastErrorTimestamp).toISOString()})</span>`;
}

function age(seconds: number | undefined): string {
  if (seconds === undefined) return '–';
  if (seconds < 120) return `${Math.round(seconds)} s ago`;
  if (seconds < 7_200) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3_600)} h ago`;
}

function bytes(value: number | undefined): string {
  if (value === undefined) return '–';
  if (value < 1024) return `${value} B`;
  if (value < 1024 ** 2) return `${(value / 1024).toFixed(1)} KiB`;
  if (value < 1024 ** 3) return `${(value / 1024 ** 2).toFixed(1)} MiB`;
  return `${(value / 1024 ** 3).toFixed(1)} GiB`;
}

export const stateName = (state: string) => state.replace(/^STATUS_/, '').toLowerCase();

export interface MirrorRow extends MirrorGauges {
  readonly source?: string;
  readonly destination?: string;
}

export function mirrorListPage(mirrors: readonly MirrorRow[]): string {
  // htmx swaps in the list of a fresh GET / every 10 s; without JavaScript the page is static.
  const body = html`<h1>Mirrors</h1>
<p><a href="/new/mirror">New mirror</a></p>
<div id="mirrors" hx-get="/" hx-trigger="every 10s" hx-select="#mirrors" hx-swap="outerHTML">
${
  mirrors.length === 0
    ? html`<p>No mirrors yet: create one with the form, or with <code>POST /api/v1/flows/cdc/create</code> (see the README).</p>`
    : html`<table>
<caption class="visually-hidden">Every mirror, refreshed every 10 seconds</caption>
<thead><tr><th scope="col">mirror</th><th scope="col">state</th><th scope="col">source → destination</th><th scope="col">lag</th><th scope="col">rows</th><th scope="col">last batch</th></tr></thead>
<tbody>
${mirrors.map(
  (mirror) => html`<tr>
<td><a href="${mirrorPath(mirror.mirror)}">${mirror.mirror}</a></td>
<td class="state">${stateName(mirror.state ?? 'STATUS_UNKNOWN')}</td>
<td>${mirror.source ?? '?'} → ${mirror.destination ?? '?'}</td>
<td>${bytes(mirror.lagBytes)}</td>
<td>${mirror.rowsSynced ?? 0}</td>
<td>${mirror.lastBatchId === undefined ? '–' : html`#${mirror.lastBatchId}, ${age(mirror.secondsSinceLastBatch)}`}</td>
</tr>`,
)}
</tbody>
</table>`
}
</div>`;
  return page('Mirrors', body);
}

export const logsPerPage = 20;

export interface MirrorPageData {
  readonly status: MirrorStatus;
  readonly batches: Batches;
  readonly logs: Logs;
  readonly level: LogLevelFilter;
  readonly peers: readonly { readonly role: string; readonly info: PeerInfo | undefined }[];
  /** How often the console samples /metrics, for the chart's redraw. */
  readonly sampleMs: number;
  /** The visitor's role: only what it may do is offered (the API refuses the rest anyway). */
  readonly role: Role;
}

function actionButtons(name: string, state: string, role: Role): Html {
  const actions: { action: string; label: string }[] = [];
  const operates = roleAllows(role, 'operate');
  if (operates && (state === 'STATUS_RUNNING' || state === 'STATUS_SNAPSHOT' || state === 'STATUS_SETUP'))
    actions.push({ action: 'pause', label: 'Pause' });
  if (operates && (state === 'STATUS_PAUSED' || state === 'STATUS_FAILED'))
    actions.push({ action: 'resume', label: state === 'STATUS_FAILED' ? 'Retry' : 'Resume' });
  // Edits, as drops, are the admin role's (http/access.ts).
  const edit =
    roleAllows(role, 'admin') && state === 'STATUS_PAUSED'
      ? html`<a href="${mirrorPath(name)}/edit">Edit…</a> `
      : '';
  if (roleAllows(role, 'admin') && state !== 'STATUS_TERMINATING' && state !== 'STATUS_TERMINATED')
    actions.push({ action: 'drop', label: 'Drop' });
  if (!operates)
    return html`<em>Read-only: pausing and resuming need the operate role, dropping the admin role.</em>`;
  return html`${actions.map(
    ({ action, label }) => html`<a href="${mirrorPath(name)}/confirm?action=${action}">${label}…</a> `,
  )}${edit}`;
}

/** Bytes as a person reads them: 1536 → 1.5 KiB. */
function byteSize(text: string | undefined): string {
  if (text === undefined) return '–';
  const bytes = Number(text);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** The slot at the source, as the slot health monitor last read it (every state, paused and failed too). */
function slotHealthSection(slot: MirrorStatus['slotHealth']): Html {
  if (!slot) return html``;
  const verdict = slot.status === 'True' ? 'healthy' : slot.status === 'False' ? 'unhealthy' : 'unknown';
  return html`<table class="slot-health">
<caption>Replication slot <code>${slot.slotName}</code>: <span class="${verdict === 'unhealthy' ? 'error' : verdict}">${verdict}</span> (${slot.reason})</caption>
<tbody>
<tr><th scope="row">WAL retained</th><td>${byteSize(slot.retainedWalBytes)}</td></tr>
<tr><th scope="row">not yet confirmed</th><td>${byteSize(slot.unconfirmedBytes)}</td></tr>
<tr><th scope="row">active</th><td>${slot.active === undefined ? '–' : slot.active ? 'yes' : 'no'}</td></tr>
<tr><th scope="row">wal_status</th><td>${slot.walStatus ?? '–'}</td></tr>
<tr><th scope="row">safe_wal_size</th><td>${slot.safeWalSizeBytes === undefined ? 'unbounded' : byteSize(slot.safeWalSizeBytes)}</td></tr>
${slot.invalidationReason ? html`<tr><th scope="row">invalidation_reason</th><td>${slot.invalidationReason}</td></tr>` : ''}
<tr><th scope="row">read at</th><td>${slot.checkedAt}</td></tr>
</tbody>
</table>
${slot.status === 'True' ? '' : html`<p class="${slot.status === 'False' ? 'error' : ''}">${slot.message}</p>`}`;
}

type Clone = NonNullable<MirrorStatus['cdcStatus']>['snapshotStatus']['clones'][number];

/** A table's state as the console words it: `TABLE_STATE_ERRORED` → `errored`. */
export const tableStateName = (state: string) => state.replace(/^TABLE_STATE_/, '').toLowerCase();

/**
 * One row per mapped table, then one per table the mirror no longer maps
 * (removed: its destination table stays): its state, its load, what CDC
 * applied, and the problem of a table that stopped.
 */
function tableRows(
  name: string,
  /** Whether a streaming table can be resynced online (a PostgreSQL, ClickHouse, Snowflake or Kafka destination, docs/api.md). */
  resyncsOnline: boolean,
  mappings: NonNullable<MirrorStatus['cdcStatus']>['config']['tableMappings'],
  clones: readonly Clone[],
  tables: readonly TableStatusView[],
  /** The visitor may resync (operate): otherwise no Resync button. */
  canResync: boolean,
): Html[] {
  const bySource = new Map(tables.map((table) => [table.sourceTableIdentifier, table]));
  const mapped = new Set(mappings.map((mapping) => mapping.sourceTableIdentifier));
  const rows = [
    ...mappings.map((mapping) => ({
      source: mapping.sourceTableIdentifier,
      destination: mapping.destinationTableIdentifier,
    })),
    ...tables
      .filter((table) => !mapped.has(table.sourceTableIdentifier))
      .map((table) => ({
        source: table.sourceTableIdentifier,
        destination: table.destinationTableIdentifier,
      })),
  ];
  return rows.map(({ source, destination }) => {
    const clone = clones.find((entry) => entry.sourceTable === source);
    const table = bySource.get(source);
    const state = table ? tableStateName(table.state) : '–';
    const applied = table
      ? `${table.rowsApplied.inserts} / ${table.rowsApplied.updates} / ${table.rowsApplied.deletes}`
      : '–';
    return html`<tr><td>${source}</td><td>${destination}</td>
<td class="state">${state}${
      table?.error
        ? html`<br><span class="error">${table.error.kind}: ${table.error.message} (${table.error.remedy}); behind from LSN ${table.behindLsn ?? '?'}</span>`
        : ''
    }${
      canResync &&
      (
        table?.state === 'TABLE_STATE_ERRORED' ||
          table?.state === 'TABLE_STATE_HELD' ||
          (resyncsOnline && table?.state === 'TABLE_STATE_STREAMING')
      )
        ? html`<form method="post" action="${mirrorPath(name)}/tables/resync">
<input type="hidden" name="table" value="${source}">
<button type="submit">${table?.state === 'TABLE_STATE_HELD' ? 'Accept the change and resync' : 'Resync'} ${source}</button></form>`
        : ''
    }</td>
<td>${clone ? (clone.consolidateCompleted ? 'done' : `${clone.numPartitionsCompleted}/${clone.numPartitionsTotal} partitions`) : '–'}</td>
<td>${clone?.numRowsSynced ?? '–'}</td>
<td>${applied}</td>
<td>${table?.lastCommitTime ? `${table.lastCommitTime} (LSN ${table.lastAppliedLsn})` : '–'}</td></tr>`;
  });
}

/** The mirror's state line names its stopped tables: a running mirror with one is not all moving. */
function erroredTablesNote(tables: readonly TableStatusView[]): Html | string {
  const errored = tables.filter(
    (table) => table.state === 'TABLE_STATE_ERRORED' || table.state === 'TABLE_STATE_HELD',
  );
  if (errored.length === 0) return '';
  const names = errored.map((table) => table.sourceTableIdentifier).join(', ');
  return html` · <a class="error" href="#tables">${errored.length} table${errored.length === 1 ? '' : 's'} stopped: ${names}</a>`;
}

export function mirrorPage(data: MirrorPageData): string {
  const { status, batches, logs, level } = data;
  const name = status.flowJobName;
  const cdc = status.cdcStatus;
  const pages = Math.max(1, Math.ceil(logs.total / logsPerPage));
  const logLink = (page: number) => `${mirrorPath(name)}?level=${level}&page=${page}#logs`;
  // With JavaScript, htmx swaps in these parts of a fresh GET of the page every 10 s.
  const live = (id: string) =>
    html`id="${id}" hx-get="${mirrorPath(name)}" hx-trigger="every 10s" hx-select="#${id}" hx-swap="outerHTML"`;
  const body = html`<h1>Mirror ${name}</h1>
<div ${live('mirror-state')}>
<p>State: <span class="state">${stateName(status.currentFlowState)}</span>
${status.lagSeconds === undefined ? '' : html` · lag <span class="lag">${status.lagSeconds} s</span>`}
${status.errorMessage ? html` · <span class="error">${status.errorMessage}</span>` : ''}${erroredTablesNote(status.tables ?? [])}</p>
${slotHealthSection(status.slotHealth)}
<p>${actionButtons(name, status.currentFlowState, data.role)} <a href="${mirrorPath(name)}">Refresh</a></p>
</div>
<h2>Lag and throughput, last hour</h2>
<div id="history-chart" data-history="${mirrorPath(name)}/history.json" data-refresh-ms="${data.sampleMs}">
<noscript><p>The chart needs JavaScript; the figures are on the mirror list and in /metrics.</p></noscript>
</div>
<link rel="stylesheet" href="/console/assets/uPlot.min.css">
<script src="/console/assets/uPlot.iife.min.js" defer></script>
<script src="/console/assets/chart.js" defer></script>
${
  cdc
    ? html`<h2>Configuration</h2>
<table>
<tbody>
<tr><th scope="row">source</th><td>${cdc.config.sourceName} (${cdc.sourceType.toLowerCase()})</td></tr>
<tr><th scope="row">destination</th><td>${cdc.config.destinationName} (${cdc.destinationType.toLowerCase()})</td></tr>
${Object.entries(cdc.config)
  .filter(
    ([key, value]) =>
      !['sourceName', 'destinationName', 'tableMappings', 'flowJobName'].includes(key) && value !== '',
  )
  .map(
    ([key, value]) =>
      html`<tr><th scope="row">${key}</th><td>${typeof value === 'object' ? JSON.stringify(value) : String(value)}</td></tr>`,
  )}
</tbody>
</table>
<h2 id="tables">Tables</h2>
<div ${live('mirror-tables')}>
<table>
<thead><tr><th scope="col">source</th><th scope="col">destination</th><th scope="col">state</th><th scope="col">initial load</th><th scope="col">rows loaded</th><th scope="col">applied (inserts / updates / deletes)</th><th scope="col">last applied commit</th></tr></thead>
<tbody>
${tableRows(name, resyncsOnline(cdc.destinationType.toLowerCase() as PeerKind), cdc.config.tableMappings, cdc.snapshotStatus.clones, status.tables ?? [], roleAllows(data.role, 'operate'))}
</tbody>
</table>
</div>`
    : ''
}
<h2>Peers</h2>
<table>
<thead><tr><th scope="col">role</th><th scope="col">peer</th><th scope="col">kind</th><th scope="col">version</th><th scope="col">configuration (secrets masked)</th></tr></thead>
<tbody>
${data.peers.map(({ role, info }) => {
  const { name: peerName, type, ...config } = info?.peer ?? { name: '?', type: '?' };
  return html`<tr><td>${role}</td><td>${peerName}</td><td>${String(type).toLowerCase()}</td><td>${info?.version ?? '–'}</td><td><code>${JSON.stringify(config)}</code></td></tr>`;
})}
</tbody>
</table>
<h2>Batches</h2>
<div ${live('mirror-batches')}>
<p>${batches.total} batches; the last ${batches.cdcBatches.length}:</p>
<table>
<thead><tr><th scope="col">batch</th><th scope="col">rows</th><th scope="col">started</th><th scope="col">finished</th><th scope="col">end LSN</th></tr></thead>
<tbody>
${batches.cdcBatches.map(
  (batch) =>
    html`<tr><td>#${batch.batchId}</td><td>${batch.numRows}</td><td>${batch.startTime}</td><td>${batch.endTime ?? 'running'}</td><td>${batch.endLsn}</td></tr>`,
)}
</tbody>
</table>
</div>
<h2 id="logs">Logs</h2>
<form method="get" action="${mirrorPath(name)}">
<label for="level">Level</label>
<select id="level" name="level">
${logLevelFilters.map((option) => html`<option value="${option}"${option === level ? html` selected` : ''}>${option.toLowerCase()}</option>`)}
</select>
<button type="submit">Show</button>
</form>
<table>
<thead><tr><th scope="col">time</th><th scope="col">level</th><th scope="col">message</th></tr></thead>
<tbody>
${logs.errors.map(
  (entry) =>
    html`<tr><td>${new Date(entry.errorTimestamp).toISOString()}</td><td class="${entry.errorType}">${entry.errorType}</td><td>${entry.errorMessage}${repeated(entry)}</td></tr>`,
)}
</tbody>
</table>
<nav aria-label="Log pages"><p>Page ${logs.page} of ${pages}
${logs.page > 1 ? html` · <a href="${logLink(logs.page - 1)}">newer</a>` : ''}
${logs.page < pages ? html` · <a href="${logLink(logs.page + 1)}">older</a>` : ''}</p></nav>`;
  return page(`Mirror ${name}`, body);
}

export const actions = {
  pause: {
    requestedFlowState: 'STATUS_PAUSED',
    question: 'Pause',
    effect: 'Its engine stops at the next batch boundary; changes wait in the replication slot.',
  },
  resume: {
    requestedFlowState: 'STATUS_RUNNING',
    question: 'Resume',
    effect: 'Its engine starts again from the last acknowledged position.',
  },
  drop: {
    requestedFlowState: 'STATUS_TERMINATING',
    question: 'Drop',
    effect:
      'Its replication slot and the publication it created are removed. Destination tables stay. This cannot be undone.',
  },
} as const;
export type MirrorAction = keyof typeof actions;

type MirrorConfig = NonNullable<MirrorStatus['cdcStatus']>['config'];

/** What a drop removes and what it keeps, by name, so nobody drops the wrong mirror. */
function dropEffect(config: MirrorConfig): Html {
  const slotName = typeof config.replicationSlotName === 'string' ? config.replicationSlotName : '';
  const publicationName = typeof config.publicationName === 'string' ? config.publicationName : '';
  return html`<p>Replication of these tables from ${config.sourceName} to ${config.destinationName} stops:</p>
<table>
<thead><tr><th scope="col">source table</th><th scope="col">destination table (stays)</th></tr></thead>
<tbody>
${config.tableMappings.map(
  (mapping) =>
    html`<tr><td>${mapping.sourceTableIdentifier}</td><td>${mapping.destinationTableIdentifier}</td></tr>`,
)}
</tbody>
</table>
<p>Removed at ${config.sourceName}: ${slotName ? html`the replication slot <code>${slotName}</code>, unless it was adopted` : 'the replication slot the mirror created'}${publicationName ? html`; the publication <code>${publicationName}</code> was given and stays` : ', and the publication the mirror created'}. Destination tables stay. This cannot be undone.</p>`;
}

/** The confirmation of an action; a drop's names what it removes when the mirror's configuration is known. */
export function confirmPage(name: string, action: MirrorAction, config?: MirrorConfig): string {
  const { question, effect } = actions[action];
  const body = html`<h1>${question} mirror ${name}?</h1>
${action === 'drop' && config ? dropEffect(config) : html`<p>${effect}</p>`}
<form method="post" action="${mirrorPath(name)}/action">
<input type="hidden" name="action" value="${action}">
<button type="submit"${action === 'drop' ? html` class="danger"` : ''}>${question} ${action === 'drop' ? 'mirror ' : ''}${name}</button>
<a href="${mirrorPath(name)}">Cancel</a>
</form>`;
  return page(`${question} ${name}`, body);
}

export function messagePage(title: string, message: string, back: string): string {
  return page(title, html`<h1>${title}</h1><p class="error">${message}</p><p><a href="${back}">Back</a></p>`);
}

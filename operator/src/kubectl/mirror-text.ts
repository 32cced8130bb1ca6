// The table form of `list` and `status`: what a person reads in a terminal.
// Names as the CRD spells them, with the STATUS_ and TABLE_STATE_ prefixes
// dropped; JSON and YAML keep the full names (output.ts).
import type { MirrorStatusView, MirrorSummary, TableView } from './mirror-view.ts';
import { textTable } from './output.ts';

const phaseWord = (phase: string | null) => (phase ?? 'unknown').replace(/^STATUS_/, '').toLowerCase();
const tableStateWord = (state: string) => state.replace(/^TABLE_STATE_/, '').toLowerCase();
const lagText = (seconds: number | null) => (seconds === null ? '-' : `${seconds}s`);

export function listText(summaries: readonly MirrorSummary[], withNamespace: boolean): string {
  if (summaries.length === 0) return 'No mirrors found.';
  const header = ['NAME', 'SOURCE', 'DESTINATION', 'STATE', 'PHASE', 'READY', 'LAG', 'TABLES', 'ERRORED'];
  return textTable([
    withNamespace ? ['NAMESPACE', ...header] : header,
    ...summaries.map((mirror) => {
      const row = [
        mirror.name,
        mirror.source,
        mirror.destination,
        mirror.state,
        phaseWord(mirror.phase),
        mirror.ready ?? '-',
        lagText(mirror.lagSeconds),
        String(mirror.tables),
        // A table holding a schema change waits for a person as an errored one does.
        mirror.heldTables > 0
          ? `${mirror.erroredTables} (+${mirror.heldTables} held)`
          : String(mirror.erroredTables),
      ];
      return withNamespace ? [mirror.namespace, ...row] : row;
    }),
  ]);
}

function initialLoadText(table: TableView): string {
  const load = table.initialLoad;
  return load ? `${load.rows} (${load.partitionsCompleted}/${load.partitionsTotal})` : '-';
}

function appliedText(table: TableView): string {
  const { inserts, updates, deletes } = table.rowsApplied;
  return `${inserts}/${updates}/${deletes}`;
}

function problemText(table: TableView): string {
  if (!table.problem) return '';
  const behind = table.problem.behindLsn === null ? '' : ` (behind from LSN ${table.problem.behindLsn})`;
  return `${table.problem.kind}: ${table.problem.message}${behind}; ${table.problem.remedy}`;
}

export function statusText(view: MirrorStatusView): string {
  const lines = [
    `Mirror:       ${view.namespace}/${view.name}${view.apiName === null ? '' : ` (API name ${view.apiName})`}`,
    `Peers:        ${view.source} → ${view.destination}${view.script === null ? '' : ` (script ${view.script})`}`,
    `State:        ${view.state}${view.deleting ? ', being deleted' : ''}`,
    `Phase:        ${phaseWord(view.phase)}${view.statusBehindSpec ? ' (the operator has not caught up with the latest spec)' : ''}`,
    `Ready:        ${view.ready ? `${view.ready.status} (${view.ready.reason})${view.ready.message ? `: ${view.ready.message}` : ''}` : '-'}`,
    `Lag:          ${lagText(view.lagSeconds)}`,
    `Rows synced:  ${view.rowsSynced ?? '-'}${view.lastSyncTime === null ? '' : `, last batch at ${view.lastSyncTime} (LSN ${view.lastSyncedLsn ?? '?'})`}`,
    `Slot:         ${view.slot ? `${view.slot.health} (${view.slot.reason})${view.slot.message ? `: ${view.slot.message}` : ''}` : 'not read yet'}`,
  ];
  if (view.errorMessage !== null) lines.push(`Error:        ${view.errorMessage}`);
  lines.push('', 'Tables:');
  if (view.tables.length === 0) {
    lines.push('  none reported yet');
  } else {
    const rows = textTable([
      ['SOURCE', 'DESTINATION', 'STATE', 'LOADED (RANGES)', 'APPLIED I/U/D', 'LAST COMMIT', 'PROBLEM'],
      ...view.tables.map((table) => [
        table.source,
        table.destination,
        tableStateWord(table.state),
        initialLoadText(table),
        appliedText(table),
        table.lastCommitTime ?? '-',
        problemText(table),
      ]),
    ]);
    lines.push(...rows.split('\n').map((row) => `  ${row}`));
  }
  lines.push('', 'Conditions:');
  if (view.conditions.length === 0) {
    lines.push('  none yet');
  } else {
    const rows = textTable([
      ['TYPE', 'STATUS', 'REASON', 'SINCE', 'MESSAGE'],
      ...view.conditions.map((condition) => [
        condition.type,
        condition.status,
        condition.reason,
        condition.lastTransitionTime,
        condition.message,
      ]),
    ]);
    lines.push(...rows.split('\n').map((row) => `  ${row}`));
  }
  return lines.join('\n');
}

// How a command's answer is printed: a table of padded columns (as kubectl
// prints them), or the same data as JSON or YAML for programs.
import { stringify } from 'yaml';
import type { OutputFormat } from './arguments.ts';

/** Columns padded to their widest cell and two spaces apart; the first row is the header. */
export function textTable(rows: readonly (readonly string[])[]): string {
  const widths =
    rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** JSON (two-space indent) or YAML of a value made of plain data; long strings are not folded, as kubectl does not. */
export function serialized(value: unknown, format: Exclude<OutputFormat, 'table'>): string {
  return format === 'json' ? JSON.stringify(value, null, 2) : stringify(value, { lineWidth: 0 }).trimEnd();
}

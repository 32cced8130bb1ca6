// The staged file of a batch or snapshot partition: one CSV line per row for
// the changes table (BATCH_ID, TABLE_NO, SEQ, OP, DATA, UNCHANGED). DATA is a
// JSON object `{"c<i>": value}` keyed by the column's position in the
// DestinationTable: a NULL is a missing key, so that `data:c<i>` reads back SQL
// NULL. UNCHANGED is a string of '0'/'1' by position, '1' where the source did
// not send an unchanged TOAST value and the target row keeps its own; empty
// (NULL) when every value is there.
import { EngineError } from '../../errors.ts';
import { formatTableName } from '../../resources/mirror.ts';
import { type DestinationTable, isUnchangedToast, type Row, type TupleCell } from '../records.ts';
import type { ColumnCodec } from './types.ts';

export type ChangeOp = 'U' | 'D';

/** `data:c<i>`: the VARIANT path of column i. */
export function dataKey(index: number): string {
  return `c${index}`;
}

function cellText(cell: TupleCell | undefined, table: DestinationTable): string | null {
  if (cell === null || cell === undefined || isUnchangedToast(cell)) return null;
  if (typeof cell === 'string') return cell;
  throw new EngineError(
    'decode',
    `binary tuple value in ${formatTableName(table.source)}; text format expected`,
  );
}

/** `data:f<i>`: the VARIANT path of key column i of the row an upsert takes its unchanged values from. */
export function fillKey(index: number): string {
  return `f${index}`;
}

/**
 * The JSON object of a row's values; with `keyPositions` only the key columns
 * (a delete). `fill` is the old key of a row whose key changed while some of its
 * values were unchanged: those values are read from the row under that key.
 */
export function dataObject(
  table: DestinationTable,
  codecs: readonly ColumnCodec[],
  row: Row,
  keyPositions?: readonly number[],
  fill?: { readonly key: Row; readonly positions: readonly number[] },
): string {
  const parts: string[] = [];
  const positions = keyPositions ?? table.columns.map((_, index) => index);
  const add = (name: string, index: number, cell: TupleCell) => {
    const text = cellText(cell, table);
    if (text === null) return;
    const json = codecs[index]?.encode(text);
    if (json !== undefined) parts.push(`"${name}":${json}`);
  };
  for (const index of positions) add(dataKey(index), index, row.cell(index));
  if (fill) for (const index of fill.positions) add(fillKey(index), index, fill.key.cell(index));
  return `{${parts.join(',')}}`;
}

/** '0'/'1' by position, or '' when no cell is an unchanged TOAST value. */
export function unchangedFlags(row: Row): string {
  if (!row.hasUnchangedToast()) return '';
  return row
    .cells()
    .map((cell) => (isUnchangedToast(cell) ? '1' : '0'))
    .join('');
}

/** One CSV line; DATA is always quoted, so its backslashes and commas are literal. */
export function changeLine(
  batchId: bigint,
  tableNo: number,
  seq: number,
  op: ChangeOp,
  data: string,
  unchanged: string,
): string {
  return `${batchId},${tableNo},${seq},${op},"${data.replaceAll('"', '""')}",${unchanged}\n`;
}

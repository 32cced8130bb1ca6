// The staged file of a batch or snapshot partition: one CSV line per row for
// the changes table (BATCH_ID, TABLE_NO, SEQ, OP, DATA, UNCHANGED). DATA is a
// JSON object `{"c<i>": value}` keyed by the column's position in the
// DestinationTable: a NULL is a missing key, so that `data:c<i>` reads back SQL
// NULL. UNCHANGED is a string of '0'/'1' by position, '1' where the source did
// not send an unchanged TOAST value and the target row keeps its own; empty
// (NULL) when every value is there.
import { EngineError } from '../../errors.ts';
import { formatTableName } from '../../resources/mirror.ts';
import { type DestinationTable, isUnchangedToast, type RowImage, type TupleCell } from '../records.ts';
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

/** The JSON object of a row's values; `onlyKeys` writes the key columns alone (a delete). */
export function dataObject(
  table: DestinationTable,
  codecs: readonly ColumnCodec[],
  row: RowImage,
  keyPositions?: readonly number[],
): string {
  const parts: string[] = [];
  const positions = keyPositions ?? table.columns.map((_, index) => index);
  for (const index of positions) {
    const text = cellText(row[index], table);
    if (text === null) continue;
    const json = codecs[index]?.encode(text);
    if (json !== undefined) parts.push(`"${dataKey(index)}":${json}`);
  }
  return `{${parts.join(',')}}`;
}

/** '0'/'1' by position, or '' when no cell is an unchanged TOAST value. */
export function unchangedFlags(row: RowImage): string {
  if (!row.some(isUnchangedToast)) return '';
  return row.map((cell) => (isUnchangedToast(cell) ? '1' : '0')).join('');
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

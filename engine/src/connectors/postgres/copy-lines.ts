// The COPY text the PostgreSQL destination writes for a batch: whole rows for
// a table's new rows (COPY into the table itself, copy-rows.ts), or op-tagged
// lines for the stage table the upserts and deletes are applied from. Every line of a batch
// is built here, so this is hot: strings are concatenated, not joined from arrays.
import { EngineError } from '../../errors.ts';
import { formatTableName } from '../../resources/mirror.ts';
import { copyNull, escapeCopyText, textArrayLiteral } from '../copy-text.ts';
import { type DestinationTable, isUnchangedToast, type RowImage } from '../records.ts';

/** A whole row's COPY text line, for the target table itself. */
export function rowLine(table: DestinationTable, row: RowImage): string {
  return `${rowFields(table, row)}\n`;
}

/** COPY text lines for the stage table: op, unchanged column names, then the row. */
export function* stageLines(
  table: DestinationTable,
  upserts: readonly RowImage[],
  deletes: readonly RowImage[],
): Generator<string> {
  for (const row of deletes) yield `D\t${copyNull}\t${rowFields(table, row)}\n`;
  for (const row of upserts) {
    const unchanged: string[] = [];
    for (let index = 0; index < row.length; index++) {
      if (isUnchangedToast(row[index] ?? null)) unchanged.push(table.columns[index]?.name ?? '');
    }
    const unchangedField = unchanged.length > 0 ? escapeCopyText(textArrayLiteral(unchanged)) : copyNull;
    yield `U\t${unchangedField}\t${rowFields(table, row)}\n`;
  }
}

/** A row's fields in COPY text, tab-separated (built by concatenation: this runs for every row). */
function rowFields(table: DestinationTable, row: RowImage): string {
  let line = '';
  for (let index = 0; index < table.columns.length; index++) {
    const cell = row[index];
    let field: string;
    if (typeof cell === 'string') field = escapeCopyText(cell);
    else if (cell === null || cell === undefined || isUnchangedToast(cell)) field = copyNull;
    else
      throw new EngineError(
        'decode',
        `binary tuple value in ${formatTableName(table.destination)}; text format expected`,
      );
    line = index === 0 ? field : `${line}\t${field}`;
  }
  return line;
}

// A row as COPY text, the form the PostgreSQL destination writes every row of
// a batch in: whole lines for new rows COPYed into the table itself
// (copy-rows.ts), and the row part of the stage lines upserts and deletes are
// applied from (postgres/staged-changes.ts). The ClickHouse destination holds
// new rows this way too and sends them on as TabSeparated. This is hot:
// strings are concatenated, not joined from arrays.
import { EngineError } from '../errors.ts';
import { formatTableName } from '../resources/mirror.ts';
import { copyNull, escapeCopyText } from './copy-text.ts';
import { type DestinationTable, isUnchangedToast, type RowImage } from './records.ts';

/** A whole row's COPY text line, for the target table itself. */
export function rowLine(table: DestinationTable, row: RowImage): string {
  return `${rowFields(table, row)}\n`;
}

/** A row's fields in COPY text, tab-separated (built by concatenation: this runs for every row). */
export function rowFields(table: DestinationTable, row: RowImage): string {
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

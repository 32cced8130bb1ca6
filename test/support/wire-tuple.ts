// A row over the source's bytes made from cells, for the unit tests of what
// destinations do with a row that comes undecoded: the TupleData bytes
// pgoutput would send for the cells, whose decoding gives the cells back.
import { type TupleCell, unchangedToast } from '../../engine/src/connectors/records.ts';
import { TupleDataRow } from '../../engine/src/connectors/rows.ts';

/** pgoutput's TupleData of `cells` (an Int16 count, then a kind byte and maybe a length and the value per cell). */
export function tupleData(cells: readonly TupleCell[]): Buffer {
  const parts: Buffer[] = [Buffer.from([cells.length >> 8, cells.length & 0xff])];
  for (const cell of cells) {
    if (cell === null) parts.push(Buffer.from('n'));
    else if (cell === unchangedToast) parts.push(Buffer.from('u'));
    else {
      const value = typeof cell === 'string' ? Buffer.from(cell, 'utf8') : cell;
      const header = Buffer.alloc(5);
      header.write(typeof cell === 'string' ? 't' : 'b', 0, 'latin1');
      header.writeInt32BE(value.length, 1);
      parts.push(header, value);
    }
  }
  return Buffer.concat(parts);
}

export function wireTuple(cells: readonly TupleCell[]): TupleDataRow {
  return new TupleDataRow(tupleData(cells), cells.length);
}

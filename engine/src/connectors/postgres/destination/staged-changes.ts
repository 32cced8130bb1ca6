// A table's upserts and deletes of a batch, held from the moment they are
// decoded as the COPY text of the stage table they are applied from
// (destination.ts, #applyStaged): op, unchanged column names, then the row.
// The lines are sealed into ~64 KiB chunks outside V8's heap, so the batch
// costs its collector nothing to keep (copy-rows.ts says why); what stays in
// the heap is each line's key.
//
// `fold` then does coalesce.ts's fold over the lines: the last change of a key
// wins (a key met again drops its earlier line), a key change deletes the old
// key, and unchanged-TOAST cells are filled from an earlier line of the row in
// the batch. The test holds the two to the same result. Lines whose keys came
// in ascending order are all distinct and need no fold.
//
// A row whose key changed and whose unchanged-TOAST cells no line of the batch
// fills keeps the values of the destination's row under the old key, which the
// batch deletes: the fold names such moves (`moves`) for the destination to
// fill the new row from the old one before anything is deleted.

import { EngineError } from '../../../errors.ts';
import type { TupleData } from '../../changes.ts';
import { rowKey } from '../../coalesce.ts';
import { CopyTextChunks } from '../../copy-chunks.ts';
import { tupleLineMaxBytes, writeTupleLine } from '../../copy-lines.ts';
import { copyNull, escapeCopyText, parseCopyTextLine, textArrayLiteral } from '../../copy-text.ts';
import type { DestinationTable } from '../../records.ts';
import { keyIndexes, type Row, type RowChange, type RowImage, unchangedToast } from '../../records.ts';
import { filledRow, rowOfCells } from '../../rows.ts';

/**
 * What a line's key costs in the heap besides its characters: the string's
 * header and the two array slots (measured on V8, Node 24: 37 bytes a line
 * with a 7-character key).
 */
const keyOverheadBytes = 30;

/** Stage line ops, the first field of a line. */
const upsertOp = 'U';
const deleteOp = 'D';

/** A table's stage lines, folded: one line per key. */
export interface StageLines {
  /** The stage's COPY text, each chunk ending on a line end. */
  readonly chunks: readonly Buffer[];
  readonly upsertCount: number;
  readonly deleteCount: number;
  /** Some upsert keeps a destination value its change did not send (unchanged TOAST). */
  readonly mayKeepUnchanged: boolean;
  /** Upserts of a changed key that keep values of the destination's row under the old key. */
  readonly moves: readonly KeyMove[];
}

/** An upsert under `newKey` whose unchanged-TOAST cells are in the destination's row under `oldKey`. */
export interface KeyMove {
  /** The key columns' values (keyIndexes order), as the source's text. */
  readonly newKey: readonly string[];
  readonly oldKey: readonly string[];
}

/** An upsert line written with unchanged-TOAST cells, which an earlier line of the batch may fill. */
interface UnfilledUpsert {
  readonly image: Row;
  /** The key whose state the row follows: its own, or its old key after a key change. */
  readonly fromKey: string;
  /** That key's row image (the change's old key, or the row itself). */
  readonly fromRow: Row;
}

/** Where an upsert's still unchanged cells are: the destination's row under this key. */
interface Origin {
  readonly key: string;
  readonly row: Row;
}

export class StagedChanges {
  readonly #table: DestinationTable;
  readonly #keyIndexes: readonly number[];
  readonly #text = new CopyTextChunks();
  /** Per line, its row's key and whether it is an upsert (1) or a delete (0). */
  readonly #keys: string[] = [];
  readonly #upserts: number[] = [];
  readonly #unfilled = new Map<number, UnfilledUpsert>();
  #upsertLineCount = 0;
  #lastKey: string | undefined;
  /** Every line's key came after the line before's (`follows`): no key repeats. */
  #keysAscending = true;
  #folded: StageLines | undefined;

  constructor(table: DestinationTable) {
    this.#table = table;
    this.#keyIndexes = keyIndexes(table);
  }

  /** Holds one insert, update or delete as its stage line(s); returns about the bytes they took. */
  add(change: Exclude<RowChange, { kind: 'truncate' }>): number {
    if (this.#folded) throw new EngineError('internal', 'a change was added to stage lines already folded');
    switch (change.kind) {
      case 'insert': {
        const key = rowKey(change.newRow, this.#keyIndexes);
        return this.#upsert(change.newRow, key, key);
      }
      case 'update': {
        const newKey = rowKey(change.newRow, this.#keyIndexes);
        const oldKey = change.oldKey ? rowKey(change.oldKey, this.#keyIndexes) : newKey;
        if (!change.oldKey || oldKey === newKey) return this.#upsert(change.newRow, newKey, newKey);
        // The new row follows the old key's state; then the old key goes.
        const size = this.#upsert(change.newRow, newKey, oldKey, change.oldKey);
        return size + this.#append(deleteOp, copyNull, change.oldKey, oldKey, 0);
      }
      case 'delete':
        return this.#append(deleteOp, copyNull, change.oldKey, rowKey(change.oldKey, this.#keyIndexes), 0);
    }
  }

  /**
   * Folds the lines to the last of each key, filling unchanged-TOAST cells
   * from the earlier line of the row, in one pass: a hash lookup per line done
   * together costs a fraction of the same lookups spread between decoding.
   * Nothing may be added after it; calling it again returns the same.
   */
  fold(): StageLines {
    if (this.#folded) return this.#folded;
    const chunks = this.#text.chunks();
    const lineCount = this.#keys.length;
    // Distinct keys supersede nothing, and without unchanged-TOAST cells there
    // is nothing to fill: the lines stand as written, and the hash lookup per
    // line (most of a fold's cost) is saved. Bulk changes often come this way:
    // inserts under a sequence, updates and deletes over a key range.
    if (this.#keysAscending && this.#unfilled.size === 0) {
      this.#folded = {
        chunks,
        upsertCount: this.#upsertLineCount,
        deleteCount: lineCount - this.#upsertLineCount,
        mayKeepUnchanged: false,
        moves: [],
      };
      return this.#folded;
    }
    const latest = new Map<string, number>();
    const dropped = new Uint8Array(lineCount);
    let droppedAny = false;
    /** Lines whose text a fill changed, and the images of lines written with unchanged cells. */
    const replaced = new Map<number, string>();
    const images = new Map<number, Row>();
    /** Per line written with unchanged cells that the batch left unfilled, the row that holds them. */
    const origins = new Map<number, Origin>();
    const chunkLines = new ChunkLines(chunks, this.#text.firstLines);
    for (let line = 0; line < lineCount; line++) {
      const key = this.#keys[line] as string;
      const unfilled = this.#unfilled.size > 0 ? this.#unfilled.get(line) : undefined;
      if (unfilled) {
        const from = latest.get(unfilled.fromKey);
        let image = unfilled.image;
        let origin: Origin | undefined = { key: unfilled.fromKey, row: unfilled.fromRow };
        if (from !== undefined && this.#upserts[from] === 1) {
          image = filledRow(image, images.get(from) ?? rowOfCells(chunkLines.upsertImage(from)));
          replaced.set(line, stageLineText(this.#table, upsertOp, unchangedField(this.#table, image), image));
          // Cells the earlier line did not have either are where its own were.
          origin = origins.get(from);
        }
        images.set(line, image);
        if (origin && image.hasUnchangedToast()) origins.set(line, origin);
      }
      const previous = latest.get(key);
      if (previous !== undefined) {
        dropped[previous] = 1;
        droppedAny = true;
      }
      latest.set(key, line);
    }
    let upsertCount = 0;
    let mayKeepUnchanged = false;
    const moves: KeyMove[] = [];
    for (const [key, line] of latest) {
      if (this.#upserts[line] !== 1) continue;
      upsertCount++;
      const image = images.get(line);
      if (!image?.hasUnchangedToast()) continue;
      mayKeepUnchanged = true;
      const origin = origins.get(line);
      if (origin && origin.key !== key) {
        moves.push({ newKey: this.#keyText(image), oldKey: this.#keyText(origin.row) });
      }
    }
    this.#folded = {
      chunks: droppedAny || replaced.size > 0 ? chunkLines.rewritten(dropped, replaced) : chunks,
      upsertCount,
      deleteCount: latest.size - upsertCount,
      mayKeepUnchanged,
      moves,
    };
    return this.#folded;
  }

  /** A row's key cells as the source's text (a key is never null, unchanged or binary). */
  #keyText(row: Row): string[] {
    return this.#keyIndexes.map((index) => {
      const cell = row.cell(index);
      if (typeof cell !== 'string') {
        const column = this.#table.columns[index]?.name ?? String(index);
        throw new EngineError('internal', `key column ${column} of a changed row is not text`);
      }
      return cell;
    });
  }

  #upsert(row: Row, key: string, fromKey: string, fromRow: Row = row): number {
    if (!row.hasUnchangedToast()) return this.#append(upsertOp, copyNull, row, key, 1);
    this.#unfilled.set(this.#keys.length, { image: row, fromKey, fromRow });
    return this.#append(upsertOp, unchangedField(this.#table, row), row, key, 1);
  }

  /** Holds a stage line of `op` over `row`; returns about the bytes it takes. */
  #append(op: string, unchanged: string, row: Row, key: string, upsert: 0 | 1): number {
    const tuple = row.tupleData();
    // The line first: a cell it cannot write (binary) leaves nothing recorded.
    const lineBytes = this.#text.addWritten(
      op.length + unchanged.length + 2 + tupleLineMaxBytes(tuple),
      (target, offset) => writeStageLine(this.#table, op, unchanged, tuple, target, offset),
    );
    this.#appended(key, upsert);
    return lineBytes + keyOverheadBytes + key.length;
  }

  /** Records the key and op of the line about to be added. */
  #appended(key: string, upsert: 0 | 1): void {
    if (this.#keysAscending && this.#lastKey !== undefined) this.#keysAscending = follows(key, this.#lastKey);
    this.#lastKey = key;
    this.#upsertLineCount += upsert;
    this.#keys.push(key);
    this.#upserts.push(upsert);
  }
}

/**
 * A strict order on keys: shorter first, then by UTF-16 code units. Keys that
 * each follow the one before are distinct, which is all the fold needs; any
 * strict order would do, and under this one unsigned integer keys in numeric
 * order ascend.
 */
function follows(key: string, previous: string): boolean {
  return key.length > previous.length || (key.length === previous.length && key > previous);
}

/** The unchanged field of an upsert line: the names of its unchanged-TOAST columns, or `\N`. */
function unchangedField(table: DestinationTable, row: Row): string {
  if (!row.hasUnchangedToast()) return copyNull;
  const cells = row.cells();
  const names = table.columns.filter((_, index) => cells[index] === unchangedToast);
  return escapeCopyText(textArrayLiteral(names.map((column) => column.name)));
}

/** Writes a stage line (op, unchanged field, then the row, and its line end) at `offset`; returns its end. */
function writeStageLine(
  table: DestinationTable,
  op: string,
  unchanged: string,
  tuple: TupleData,
  target: Buffer,
  offset: number,
): number {
  let write = offset;
  const head = unchanged === copyNull ? plainHeads[op] : undefined;
  if (head) {
    // The usual line: its op and `\N` for no unchanged columns, copied (no string write).
    for (let index = 0; index < head.length; index++) target[write++] = head[index] as number;
  } else {
    write += target.write(op, write, 'latin1');
    target[write++] = tab;
    write += target.write(unchanged, write, 'utf8');
    target[write++] = tab;
  }
  return writeTupleLine(table, tuple, target, write);
}

/** A stage line's text without its line end (a line a fold rewrote). */
function stageLineText(table: DestinationTable, op: string, unchanged: string, row: Row): string {
  const tuple = row.tupleData();
  const line = Buffer.allocUnsafe(op.length + 3 * unchanged.length + 2 + tupleLineMaxBytes(tuple));
  return line.toString('utf8', 0, writeStageLine(table, op, unchanged, tuple, line, 0) - 1);
}

const tab = 0x09;
/** The head of a line without unchanged columns, per op: `U\t\N\t`, `D\t\N\t`. */
const plainHeads: Readonly<Record<string, Buffer>> = {
  [upsertOp]: Buffer.from(`${upsertOp}\t${copyNull}\t`),
  [deleteOp]: Buffer.from(`${deleteOp}\t${copyNull}\t`),
};

/** Sealed chunks read back as lines, for the rare fold that must look into them. */
class ChunkLines {
  readonly #chunks: readonly Buffer[];
  readonly #firstLines: readonly number[];
  /** The last chunk read, as lines. */
  #cached: { index: number; lines: string[] } | undefined;

  constructor(chunks: readonly Buffer[], firstLines: readonly number[]) {
    this.#chunks = chunks;
    this.#firstLines = firstLines;
  }

  /** The row of an upsert line written without unchanged cells. */
  upsertImage(line: number): RowImage {
    // The last chunk that starts at or before the line.
    let low = 0;
    let high = this.#firstLines.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if ((this.#firstLines[middle] ?? 0) <= line) low = middle;
      else high = middle - 1;
    }
    const lineText = this.#linesOf(low)[line - (this.#firstLines[low] ?? 0)] ?? '';
    // Skip the op and the unchanged names.
    return parseCopyTextLine(lineText).slice(2);
  }

  /** The chunks again without the dropped lines, replaced lines in their new text. */
  rewritten(dropped: Uint8Array, replaced: ReadonlyMap<number, string>): readonly Buffer[] {
    const kept = new CopyTextChunks();
    for (let index = 0; index < this.#chunks.length; index++) {
      let line = this.#firstLines[index] ?? 0;
      for (const lineText of this.#linesOf(index)) {
        if (dropped[line] === 0) kept.add(`${replaced.get(line) ?? lineText}\n`);
        line++;
      }
    }
    return kept.chunks();
  }

  #linesOf(index: number): string[] {
    if (this.#cached?.index !== index) {
      const lines = (this.#chunks[index] as Buffer).toString('utf8').split('\n');
      lines.pop();
      this.#cached = { index, lines };
    }
    return this.#cached.lines;
  }
}

// A table's upserts and deletes of a batch, folded to the final state per row
// key as they arrive and held as the COPY text of the stage table they are
// applied from (destination.ts, #applyStaged): op, unchanged column names,
// then the row. It is coalesce.ts's fold (the last change of a key wins, a key
// change deletes the old key, unchanged-TOAST cells are filled from an earlier
// image of the row in the batch) done a change at a time, so that what the
// batch holds is text sealed into ~64 KiB chunks outside V8's heap rather
// than the changes as objects (copy-rows.ts says why). The test holds the two
// to the same result.
//
// A key met again supersedes its earlier line, which is left out when the
// lines are read; the map of keys to their latest line is what stays in the
// heap, one entry per key.

import { rowKey } from '../coalesce.ts';
import { copyNull, escapeCopyText, parseCopyTextLine, textArrayLiteral } from '../copy-text.ts';
import type { DestinationTable } from '../records.ts';
import { fillUnchanged, keyIndexes, type RowChange, type RowImage, unchangedToast } from '../records.ts';
import { copyChunkBytes } from './copy-chunks.ts';
import { rowFields } from './copy-lines.ts';

/** Stage line ops, the first field of a line. */
const upsertOp = 'U';
const deleteOp = 'D';

export class StagedChanges {
  readonly #table: DestinationTable;
  readonly #keyIndexes: readonly number[];
  readonly #chunks: Buffer[] = [];
  /** The number of the first line of each sealed chunk. */
  readonly #chunkFirstLines: number[] = [];
  /** Lines not yet sealed into a chunk; the first of them is line #lineCount - (lines in it). */
  #pending = '';
  #pendingFirstLine = 0;
  #lineCount = 0;
  /** Per key, its latest line: the line number times two, plus one for an upsert. */
  readonly #latest = new Map<string, number>();
  /** Lines a later change of their key replaced. */
  readonly #superseded: number[] = [];
  /**
   * The images of upsert lines that still hold unchanged-TOAST cells (their
   * line has those cells as null): the rare case an earlier image is read back
   * from a line could not otherwise tell.
   */
  readonly #unchangedImages = new Map<number, RowImage>();
  #upserts = 0;
  #deletes = 0;

  constructor(table: DestinationTable) {
    this.#table = table;
    this.#keyIndexes = keyIndexes(table);
  }

  /** Rows the stage upserts, one per key. */
  get upsertCount(): number {
    return this.#upserts;
  }

  /** Rows the stage deletes, one per key. */
  get deleteCount(): number {
    return this.#deletes;
  }

  /** Some upsert may keep a destination value its change did not send (unchanged TOAST). */
  get mayKeepUnchanged(): boolean {
    return this.#unchangedImages.size > 0;
  }

  /** Folds one insert, update or delete in; returns the characters its line took. */
  add(change: Exclude<RowChange, { kind: 'truncate' }>): number {
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
        const size = this.#upsert(change.newRow, newKey, oldKey);
        return size + this.#delete(change.oldKey, oldKey);
      }
      case 'delete':
        return this.#delete(change.oldKey, rowKey(change.oldKey, this.#keyIndexes));
    }
  }

  /** The stage's COPY text, one line per key, each chunk ending on a line end. */
  lines(): Buffer[] {
    this.#seal();
    if (this.#superseded.length === 0) return this.#chunks;
    const dropped = new Uint8Array(this.#lineCount);
    for (const line of this.#superseded) dropped[line] = 1;
    const kept: Buffer[] = [];
    let text = '';
    for (const [index, chunk] of this.#chunks.entries()) {
      let line = this.#chunkFirstLines[index] ?? 0;
      for (const lineText of linesOf(chunk)) {
        if (dropped[line++] === 0) text += `${lineText}\n`;
        if (text.length >= copyChunkBytes) {
          kept.push(Buffer.from(text, 'utf8'));
          text = '';
        }
      }
    }
    if (text.length > 0) kept.push(Buffer.from(text, 'utf8'));
    return kept;
  }

  /** `row` (key `key`) follows the row at `fromKey`: its own key, or its old key after a key change. */
  #upsert(row: RowImage, key: string, fromKey: string): number {
    let image = row;
    if (hasUnchanged(row)) {
      const from = this.#latest.get(fromKey);
      if (from !== undefined && from % 2 === 1) image = fillUnchanged(row, this.#imageOf(from >> 1));
    }
    const line = this.#lineCount;
    this.#supersede(key);
    this.#latest.set(key, line * 2 + 1);
    this.#upserts++;
    let unchangedField = copyNull;
    if (hasUnchanged(image)) {
      this.#unchangedImages.set(line, image);
      const names = this.#table.columns.filter((_, index) => image[index] === unchangedToast);
      unchangedField = escapeCopyText(textArrayLiteral(names.map((column) => column.name)));
    }
    return this.#append(`${upsertOp}\t${unchangedField}\t${rowFields(this.#table, image)}\n`);
  }

  #delete(keyImage: RowImage, key: string): number {
    const line = this.#lineCount;
    this.#supersede(key);
    this.#latest.set(key, line * 2);
    this.#deletes++;
    return this.#append(`${deleteOp}\t${copyNull}\t${rowFields(this.#table, keyImage)}\n`);
  }

  #supersede(key: string): void {
    const latest = this.#latest.get(key);
    if (latest === undefined) return;
    const line = latest >> 1;
    this.#superseded.push(line);
    this.#unchangedImages.delete(line);
    if (latest % 2 === 1) this.#upserts--;
    else this.#deletes--;
  }

  #append(line: string): number {
    this.#pending += line;
    this.#lineCount++;
    if (this.#pending.length >= copyChunkBytes) this.#seal();
    return line.length;
  }

  #seal(): void {
    if (this.#pending.length === 0) return;
    this.#chunks.push(Buffer.from(this.#pending, 'utf8'));
    this.#chunkFirstLines.push(this.#pendingFirstLine);
    this.#pending = '';
    this.#pendingFirstLine = this.#lineCount;
  }

  /** The row image an upsert line holds, read back from its text. */
  #imageOf(line: number): RowImage {
    const kept = this.#unchangedImages.get(line);
    if (kept) return kept;
    let text: string;
    let firstLine: number;
    if (line >= this.#pendingFirstLine) {
      text = this.#pending;
      firstLine = this.#pendingFirstLine;
    } else {
      // The last chunk that starts at or before the line.
      let low = 0;
      let high = this.#chunkFirstLines.length - 1;
      while (low < high) {
        const middle = (low + high + 1) >> 1;
        if ((this.#chunkFirstLines[middle] ?? 0) <= line) low = middle;
        else high = middle - 1;
      }
      text = (this.#chunks[low] as Buffer).toString('utf8');
      firstLine = this.#chunkFirstLines[low] ?? 0;
    }
    const lineText = text.split('\n')[line - firstLine] ?? '';
    // Skip the op and the unchanged names: the line has none (#unchangedImages holds those).
    return parseCopyTextLine(lineText).slice(2);
  }
}

function hasUnchanged(row: RowImage): boolean {
  for (const cell of row) if (cell === unchangedToast) return true;
  return false;
}

/** The lines of a sealed chunk, without their line ends. */
function linesOf(chunk: Buffer): string[] {
  const lines = chunk.toString('utf8').split('\n');
  lines.pop();
  return lines;
}

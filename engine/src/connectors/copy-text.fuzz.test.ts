// Properties of the COPY text reader over generated input (docs/security.md,
// "Fuzzing"): a COPY stream is the source server's bytes, read in whatever
// chunks the socket gives. The reader gives back what the writers wrote
// (escapeCopyText, and the line encoder over TupleData, copy-lines.ts), reads
// any bytes as rows or a decode error, and copies each byte a bounded number
// of times however long a line is.
// https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.2
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { countBufferAllocationsAsync, fuzzParameters } from '../../../test/support/fuzz.ts';
import { typedColumn } from '../../../test/support/text-table.ts';
import { wireTuple } from '../../../test/support/wire-tuple.ts';
import { EngineError } from '../errors.ts';
import { CopyTextChunks } from './copy-chunks.ts';
import { tupleLineMaxBytes, writeTupleLine } from './copy-lines.ts';
import {
  type CopyTable,
  copyNull,
  copyTextLineBlocks,
  copyTextRowBatches,
  escapeCopyText,
  parseCopyTextLine,
} from './copy-text.ts';
import { type DestinationTable, type TupleCell, unchangedToast } from './records.ts';

/** `stream` cut at `cuts` (taken modulo its length) into chunks of their own, possibly inside a UTF-8 character. */
function chunksOf(stream: Buffer, cuts: readonly number[]): Buffer[] {
  if (stream.length === 0) return [];
  const points = [...new Set(cuts.map((cut) => cut % stream.length))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const point of [...points, stream.length]) {
    if (point > from) chunks.push(Buffer.from(stream.subarray(from, point)));
    from = point;
  }
  return chunks;
}

async function* streamOf(chunks: readonly Buffer[]): AsyncGenerator<Buffer> {
  yield* chunks;
}

async function readRows(chunks: readonly Buffer[], table: CopyTable): Promise<(string | null)[][]> {
  const rows: (string | null)[][] = [];
  for await (const batch of copyTextRowBatches(streamOf(chunks), table)) rows.push(...batch);
  return rows;
}

const tableOfWidth = (width: number): CopyTable => ({
  source: { schema: 'public', table: 't' },
  columns: Array.from({ length: width }, (_, index) => index),
});

/** Any text, tabs, newlines, backslashes and multi-byte characters included (no lone surrogates: COPY is UTF-8). */
const text = fc.string({
  unit: fc.oneof(
    fc.constantFrom('\t', '\n', '\r', '\\', 'N', '.', 'é', '✓', '𝄞'),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  ),
  maxLength: 24,
});
const field = fc.option(text, { freq: 5 });
const cuts = fc.array(fc.nat(), { maxLength: 10 });

describe('COPY text reader, generated streams', () => {
  it('reads back every row escapeCopyText wrote, however the stream is cut (1000 cases)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc
          .integer({ min: 1, max: 5 })
          .chain((width) =>
            fc.array(fc.array(field, { minLength: width, maxLength: width }), { maxLength: 8 }),
          ),
        cuts,
        async (rows, cutPoints) => {
          const stream = Buffer.from(
            rows
              .map(
                (row) =>
                  `${row.map((value) => (value === null ? copyNull : escapeCopyText(value))).join('\t')}\n`,
              )
              .join(''),
          );
          const width = rows[0]?.length ?? 1;
          expect(await readRows(chunksOf(stream, cutPoints), tableOfWidth(width))).toEqual(rows);
        },
      ),
      fuzzParameters(1000),
    );
  });

  it('reads back every row the TupleData line encoder wrote through CopyTextChunks (500 cases)', async () => {
    // Types whose values the encoder copies unescaped (int4, numeric, timestamptz), and text.
    const escapeFree = fc.stringMatching(/^[0-9:. +-]{0,12}$/);
    const column = fc.constantFrom(23, 1700, 1184, 25, 3802);
    await fc.assert(
      fc.asyncProperty(
        fc
          .array(column, { minLength: 1, maxLength: 5 })
          .chain((typeOids) =>
            fc.tuple(
              fc.constant(typeOids),
              fc.array(
                fc.tuple(
                  ...typeOids.map((typeOid) =>
                    fc.oneof(
                      { weight: 1, arbitrary: fc.constantFrom<TupleCell>(null, unchangedToast) },
                      { weight: 4, arbitrary: typeOid === 25 || typeOid === 3802 ? text : escapeFree },
                    ),
                  ),
                ),
                { maxLength: 10 },
              ),
            ),
          ),
        fc.integer({ min: 16, max: 256 }),
        cuts,
        async ([typeOids, rows], chunkBytes, cutPoints) => {
          const table: DestinationTable = {
            source: { schema: 'public', table: 't' },
            destination: { schema: 'public', table: 't' },
            columns: typeOids.map((typeOid, index) => typedColumn(`c${index}`, typeOid)),
            keyColumns: [],
          };
          const lines = new CopyTextChunks(chunkBytes);
          for (const cells of rows) {
            const tuple = wireTuple(cells);
            lines.addWritten(tupleLineMaxBytes(tuple), (target, offset) =>
              writeTupleLine(table, tuple, target, offset),
            );
          }
          const stream = Buffer.concat(lines.chunks());
          const expected = rows.map((cells) => cells.map((cell) => (typeof cell === 'string' ? cell : null)));
          expect(await readRows(chunksOf(stream, cutPoints), table)).toEqual(expected);
        },
      ),
      fuzzParameters(500),
    );
  });

  it('reads any bytes as rows of the table width or a decode error, nothing else (1000 cases)', async () => {
    const bytes = fc.oneof(
      fc.uint8Array({ maxLength: 200 }).map((array) => Buffer.from(array)),
      fc
        .array(fc.constantFrom('\t', '\n', '\\', '\\N', 'a', '\\x4', '\\777', '\r', 'é'), { maxLength: 60 })
        .map((parts) => Buffer.from(parts.join(''))),
    );
    await fc.assert(
      fc.asyncProperty(bytes, fc.integer({ min: 1, max: 4 }), cuts, async (stream, width, cutPoints) => {
        try {
          for (const row of await readRows(chunksOf(stream, cutPoints), tableOfWidth(width))) {
            expect(row).toHaveLength(width);
            for (const value of row) expect(value === null || typeof value === 'string').toBe(true);
          }
        } catch (error) {
          expect(error).toBeInstanceOf(EngineError);
          expect((error as EngineError).kind).toBe('decode');
        }
      }),
      fuzzParameters(1000),
    );
  });

  it('splits any line into one field per tab, never throwing (2000 cases)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 80 }), (line) => {
        const fields = parseCopyTextLine(line);
        expect(fields).toHaveLength(line.split('\t').length);
      }),
      fuzzParameters(2000),
    );
  });

  it('copies each byte of a stream a bounded number of times, however long its lines and small its chunks (200 cases)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 40_000 }), { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 1, max: 4_096 }),
        async (lineLengths, chunkBytes) => {
          const stream = Buffer.from(lineLengths.map((length) => `${'x'.repeat(length)}\n`).join(''));
          const chunks: Buffer[] = [];
          for (let offset = 0; offset < stream.length; offset += chunkBytes)
            chunks.push(stream.subarray(offset, offset + chunkBytes));
          const allocated = await countBufferAllocationsAsync(async () => {
            for await (const _ of copyTextLineBlocks(streamOf(chunks)));
          });
          expect(allocated.error).toBeUndefined();
          expect(allocated.total).toBeLessThanOrEqual(2 * stream.length + 16);
        },
      ),
      fuzzParameters(200),
    );
  });

  it('joins a 4 MiB line that comes in 64 KiB chunks once, not once a chunk', async () => {
    const line = Buffer.alloc(4 * 1024 * 1024, 0x61);
    const chunks: Buffer[] = [];
    for (let offset = 0; offset < line.length; offset += 65_536)
      chunks.push(line.subarray(offset, offset + 65_536));
    chunks.push(Buffer.from('\n'));
    let blockBytes = 0;
    const allocated = await countBufferAllocationsAsync(async () => {
      for await (const block of copyTextLineBlocks(streamOf(chunks))) blockBytes += block.length;
    });
    expect(blockBytes).toBe(line.length + 1);
    // Joining the pending part again at every chunk copied the line 32 times over (128 MiB).
    expect(allocated.total).toBeLessThanOrEqual(2 * (line.length + 1));
  });
});

// Row versions of a ReplacingMergeTree: each final state of a batch
// (coalesce.ts, finalStates) is written with the version of the change that
// produced it, so a replayed batch writes the same versions again.
import { EngineError } from '../../errors.ts';

/** Bits of the version that hold the change's index within its batch's table. */
export const versionIndexBits = 27n;
/** The largest batch a ClickHouse destination takes: indexes must stay below 2^27. */
export const maxChangesPerBatch = 100_000_000;

/**
 * The row version of the change at `index` (its position among the batch's
 * changes to one table) in batch `batchId`: increases with commit order, and a
 * change replayed after a crash gets a version at least as high as before
 * (docs/clickhouse.md, "Versions").
 */
export function rowVersion(batchId: bigint, index: number): bigint {
  if (index >= 2 ** Number(versionIndexBits)) {
    throw new EngineError('internal', `a batch holds more than 2^${versionIndexBits} changes to one table`);
  }
  return (batchId << versionIndexBits) + BigInt(index);
}

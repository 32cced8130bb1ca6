// What onRecord's return value does to a row, for a table destination
// (PostgreSQL, ClickHouse, Snowflake; docs/scripts.md is the user's reference):
//   nil     drop the change (or the snapshot row)
//   true    keep it as it is
//   table   the row: each field whose value differs from the record's row is
//           a new value for that column; fields left out keep theirs
// The row's values are PostgreSQL's text of each column (json.null for NULL),
// so a value given back is that text too: a number becomes its decimal text, a
// boolean 't' or 'f'. Runs where the Lua state lives (the script's worker
// thread): only the changed values cross back. Whether a changed column may
// change at all (it exists, it is not a key column) is the engine's check
// (pipeline/script-stage.ts), which knows the table.
import { LuaTable, type LuaValue } from './lua-vm.ts';
import { describe, InvalidScriptResult } from './script-messages.ts';

/** A change dropped, or kept with the new text (null: SQL NULL) of the columns the script changed. */
export type RowEdit =
  | { readonly drop: true }
  | { readonly drop: false; readonly values: Readonly<Record<string, string | null>> };

const kept: RowEdit = { drop: false, values: {} };
const dropped: RowEdit = { drop: true };

/**
 * What one call's return values do to the row `row` the record carried (its
 * `row` field: column name to text or null). Throws InvalidScriptResult.
 */
export function rowEdit(
  results: readonly LuaValue[],
  row: Readonly<Record<string, unknown>> | undefined,
): RowEdit {
  if (results.length > 1) {
    throw new InvalidScriptResult(
      `onRecord returned ${results.length} values; for a table destination return one row, true or nil`,
    );
  }
  const result = results[0];
  if (result === undefined) return dropped;
  if (result === true) return kept;
  if (!(result instanceof LuaTable)) {
    throw new InvalidScriptResult(
      `onRecord returned a ${describe(result)}; for a table destination return the row (a table), true to keep it or nil to drop it`,
    );
  }
  let values: Record<string, string | null> | undefined;
  for (const [name, value] of result.entries) {
    if (typeof name !== 'string')
      throw new InvalidScriptResult('the row returned has a field that is not a column name');
    const text = cellText(name, value);
    if (row !== undefined && row[name] === text) continue;
    values ??= {};
    values[name] = text;
  }
  return values ? { drop: false, values } : kept;
}

/** Characters of text an edit carries, to bound what one reply of the worker holds. */
export function rowEditTextLength(edit: RowEdit): number {
  if (edit.drop) return 0;
  let length = 0;
  for (const [name, value] of Object.entries(edit.values)) length += name.length + (value?.length ?? 0);
  return length;
}

function cellText(name: string, value: LuaValue): string | null {
  if (value === null) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (typeof value === 'boolean') return value ? 't' : 'f';
  throw new InvalidScriptResult(
    `column ${name} is given a ${describe(value)}; give its text (json.encode it for a json column), or json.null`,
  );
}

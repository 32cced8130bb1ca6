// What changed in a source table's shape between two looks at it, told apart
// the way PostgreSQL itself tells columns apart: by attribute number. A column
// keeps its attnum through a rename and a type change; a dropped column's
// attnum is never used again; an added column gets one above every other.
//
// pgoutput's Relation message carries names and types in attnum order but not
// the attnums (https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html),
// so a rename there looks like a drop and an add. `alignRelation` recovers the
// attnums from the shape the mirror last followed and the columns still alive
// in the source catalog; `diffShapes` then compares two attnum-keyed shapes.
// Pure: the catalog look and the destination's DDL are the caller's.

/** A source column as a shape knows it. */
export interface ShapeColumn {
  readonly name: string;
  readonly typeOid: number;
  readonly typeModifier: number;
  /** pg_attribute.attnum; undefined only for a column added since the last look, before it is resolved. */
  readonly attnum?: number | undefined;
  /**
   * Left out of the destination (a mapping's `exclude`): a publication's
   * column list may leave it out of the messages too (PostgreSQL 15+).
   */
  readonly excluded?: boolean | undefined;
}

/** One change of a table's shape, in the order to apply it. */
export type ColumnChange<Column extends ShapeColumn = ShapeColumn> =
  | { readonly kind: 'add'; readonly column: Column }
  | { readonly kind: 'drop'; readonly name: string }
  | { readonly kind: 'rename'; readonly from: string; readonly to: string }
  | { readonly kind: 'retype'; readonly name: string; readonly before: Column; readonly after: Column };

/**
 * The attnum of each column of a Relation message (`incoming`, in the
 * message's order, which is attnum order), or undefined for a column added
 * since `before` whose attnum is not known:
 * - `before`: the columns the mirror last followed, with their attnums;
 * - `live`: the columns the source catalog has now (attnum, name).
 *
 * The message lists the columns of `before` alive at its position, in order,
 * then the ones added since. The catalog is read later than the message was
 * written, so a column alive now was alive then, but one gone now may have
 * gone after the message. So the message is aligned with `before`: every
 * column alive now is paired with the message's next column (under its name
 * then, which a rename changed), a column gone now either so or not at all
 * (dropped before the message), whichever pairing keeps the most names
 * (and, of the columns left over as added, finds the most among the
 * catalog's new attnums under their names); a tie goes to pairing (a rename
 * then a drop, rather than a drop and an add). `exact` is false when no
 * pairing fits, and then columns are matched by name alone.
 */
export function alignRelation(
  before: readonly ShapeColumn[],
  incoming: readonly string[],
  live: readonly { readonly attnum: number; readonly name: string }[],
): {
  readonly attnums: readonly (number | undefined)[];
  readonly exact: boolean;
  /**
   * Attnums learnt for columns of `before` that had none (added when the
   * catalog already named them otherwise), by their index in `before`.
   */
  readonly learnt: ReadonlyMap<number, number>;
} {
  const alive = new Set(live.map((column) => column.attnum));
  // A column alive now is in the message, unless a column list leaves it out (an excluded one).
  const forced = before.map(
    (column) => column.attnum !== undefined && alive.has(column.attnum) && column.excluded !== true,
  );
  const highest = Math.max(0, ...before.map((column) => column.attnum ?? 0));
  const fresh = live.filter((column) => column.attnum > highest);
  const freshNames = new Set(fresh.map((column) => column.name));
  const freshByName = new Map(fresh.map((column) => [column.name, column.attnum]));
  const beforeNames = new Set(before.map((column) => column.name));
  // In a shape with attnums, a column followed without one was added while
  // the catalog already named it otherwise (renamed before the mirror read
  // it): paired with a column the catalog has among its new attnums, under a
  // name no followed column has, it is that column renamed. (A shape recorded
  // before attnums were, with none at all, is matched by name as before.)
  const unnumbered = (column: ShapeColumn | undefined) => highest > 0 && column?.attnum === undefined;
  const keptAt = (i: number, j: number): number => {
    const column = before[i];
    const name = incoming[j];
    if (column === undefined || name === undefined) return 0;
    if (column.name === name) return 1;
    return unnumbered(column) && freshNames.has(name) && !beforeNames.has(name) ? 1 : 0;
  };
  const n = before.length;
  const m = incoming.length;
  // best[i][j]: the most names kept pairing before[0..i) with incoming[0..j).
  const none = Number.NEGATIVE_INFINITY;
  const best: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(none));
  (best[0] as number[])[0] = 0;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= m; j++) {
      const here = (best[i] as number[])[j] as number;
      if (here === none) continue;
      const next = best[i + 1] as number[];
      if (!forced[i]) next[j] = Math.max(next[j] as number, here);
      if (j < m) next[j + 1] = Math.max(next[j + 1] as number, here + keptAt(i, j));
    }
  }
  // The columns after the pairing are added: each found among the new attnums counts.
  const addedFound = (from: number) => incoming.slice(from).filter((name) => freshNames.has(name)).length;
  let end = -1;
  let endScore = none;
  for (let j = 0; j <= m; j++) {
    const paired = (best[n] as number[])[j] as number;
    if (paired === none) continue;
    const score = paired + addedFound(j);
    if (score >= endScore) {
      endScore = score;
      end = j;
    }
  }
  if (end < 0) {
    const byName = new Map(before.map((column) => [column.name, column.attnum]));
    return { attnums: incoming.map((name) => byName.get(name)), exact: false, learnt: new Map() };
  }
  const attnums: (number | undefined)[] = new Array(m).fill(undefined);
  const learnt = new Map<number, number>();
  // Walks the pairing back from its end, preferring pairs as the forward pass did on ties.
  let j = end;
  for (let i = n - 1; i >= 0; i--) {
    const row = best[i] as number[];
    const kept = j > 0 ? keptAt(i, j - 1) : 0;
    const target = (best[i + 1] as number[])[j] as number;
    if (j > 0 && row[j - 1] !== none && (row[j - 1] as number) + kept === target) {
      const learns = unnumbered(before[i]) && kept === 1;
      const attnum = learns ? freshByName.get(incoming[j - 1] ?? '') : before[i]?.attnum;
      attnums[j - 1] = attnum;
      if (learns && attnum !== undefined) learnt.set(i, attnum);
      j -= 1;
    } else if (forced[i] || row[j] !== target) {
      // Unreachable for a consistent table; match by name then.
      const byName = new Map(before.map((column) => [column.name, column.attnum]));
      return { attnums: incoming.map((name) => byName.get(name)), exact: false, learnt: new Map() };
    }
  }
  // Added columns take the catalog's new attnums in order, where their names agree.
  const taken = new Set(learnt.values());
  const unclaimed = fresh.filter((column) => !taken.has(column.attnum));
  let next = 0;
  for (let index = end; index < m; index++) {
    const found = unclaimed.findIndex(
      (column, position) => position >= next && column.name === incoming[index],
    );
    if (found < 0) continue;
    attnums[index] = unclaimed[found]?.attnum;
    next = found + 1;
  }
  return { attnums, exact: true, learnt };
}

/**
 * The changes that turn `before` into `after`, both keyed by attnum (a
 * column of `after` without one is added): drops first, then renames, type
 * changes, and adds last, so a name freed by a drop or a rename can be
 * taken by a later change of the same set.
 */
export function diffShapes<Column extends ShapeColumn>(
  before: readonly Column[],
  after: readonly Column[],
): ColumnChange<Column>[] {
  // A column known only by name (no attnum on record) is matched by name.
  const afterByAttnum = new Map<number, Column>();
  const afterByName = new Map<string, Column>();
  for (const column of after) {
    if (column.attnum !== undefined) afterByAttnum.set(column.attnum, column);
    afterByName.set(column.name, column);
  }
  const matched = new Set<Column>();
  const drops: ColumnChange<Column>[] = [];
  const renames: ColumnChange<Column>[] = [];
  const retypes: ColumnChange<Column>[] = [];
  for (const column of before) {
    const now = column.attnum === undefined ? afterByName.get(column.name) : afterByAttnum.get(column.attnum);
    if (!now || matched.has(now)) {
      drops.push({ kind: 'drop', name: column.name });
      continue;
    }
    matched.add(now);
    if (now.name !== column.name) renames.push({ kind: 'rename', from: column.name, to: now.name });
    if (now.typeOid !== column.typeOid || now.typeModifier !== column.typeModifier) {
      retypes.push({ kind: 'retype', name: now.name, before: column, after: now });
    }
  }
  const adds: ColumnChange<Column>[] = after
    .filter((column) => !matched.has(column))
    .map((column) => ({ kind: 'add', column }));
  return [...drops, ...orderedRenames(renames), ...retypes, ...adds];
}

/**
 * Renames in an order where no rename takes a name another still holds (a
 * chain a→b, b→c runs b→c first). A cycle (two columns that swapped names)
 * goes through a name of its own: a→a_tributary_renaming, b→a, then
 * a_tributary_renaming→b.
 */
function orderedRenames<Column extends ShapeColumn>(
  renames: readonly ColumnChange<Column>[],
): ColumnChange<Column>[] {
  const pending = [...renames] as { kind: 'rename'; from: string; to: string }[];
  const ordered: ColumnChange<Column>[] = [];
  while (pending.length > 0) {
    const free = pending.findIndex((rename) => !pending.some((other) => other.from === rename.to));
    if (free >= 0) {
      ordered.push(...pending.splice(free, 1));
      continue;
    }
    const [first] = pending.splice(0, 1) as [{ kind: 'rename'; from: string; to: string }];
    const aside = `${first.from}_tributary_renaming`.slice(0, 63);
    ordered.push({ kind: 'rename', from: first.from, to: aside });
    pending.push({ kind: 'rename', from: aside, to: first.to });
  }
  return ordered;
}

/** A change said in a log line or a table's problem. */
export function describeColumnChange(change: ColumnChange): string {
  switch (change.kind) {
    case 'add':
      return `column ${change.column.name} added`;
    case 'drop':
      return `column ${change.name} dropped`;
    case 'rename':
      return `column ${change.from} renamed to ${change.to}`;
    case 'retype':
      return `column ${change.name} changed type`;
  }
}

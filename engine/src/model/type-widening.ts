// Which source type changes widen a column: every value of the old type is a
// value of the new one, written the same way. Only these are followed at a
// destination (docs/engine.md, "Schema changes"); any other type change (a
// narrowing, or a change of kind such as text to integer) could fail on rows
// already there or change what they mean, so the table is held instead.
// Types are compared by format_type's names, which the source gives for
// both the column as it was and as it is.

interface ParsedType {
  readonly base: string;
  /** The modifiers in parentheses, e.g. [10, 2] for numeric(10,2); empty when unbounded. */
  readonly modifiers: readonly number[];
  readonly array: boolean;
}

function parse(typeName: string): ParsedType {
  const array = typeName.endsWith('[]');
  const bare = array ? typeName.slice(0, -2) : typeName;
  // format_type puts the modifier after the first word of some names:
  // "timestamp(3) with time zone", "character varying(20)".
  const match = /^([^(]*)\(([^)]*)\)(.*)$/.exec(bare);
  if (!match) return { base: bare.trim(), modifiers: [], array };
  const [, head = '', inside = '', tail = ''] = match;
  return {
    base: `${head}${tail}`.trim(),
    modifiers: inside.split(',').map((part) => Number(part.trim())),
    array,
  };
}

/** Integer kinds in widening order; each fits in the next and in numeric. */
const integerRank: Readonly<Record<string, number>> = { smallint: 1, integer: 2, bigint: 3 };
/** Digits before the decimal point each integer kind needs in a numeric. */
const integerDigits: Readonly<Record<string, number>> = { smallint: 5, integer: 10, bigint: 19 };
/** Types whose only modifier is a length or precision that may grow (unbounded is the widest). */
const growingModifier = new Set([
  'character varying',
  'bit varying',
  'timestamp without time zone',
  'timestamp with time zone',
  'time without time zone',
  'time with time zone',
]);

/** Whether a column of type `before` can become `after` with every value kept as it is. */
export function isWidening(before: string, after: string): boolean {
  if (before === after) return true;
  const from = parse(before);
  const to = parse(after);
  if (from.array !== to.array) return false;
  const fromRank = integerRank[from.base];
  if (fromRank !== undefined) {
    const toRank = integerRank[to.base];
    if (toRank !== undefined) return toRank > fromRank;
    if (to.base !== 'numeric') return false;
    const [precision, scale = 0] = to.modifiers;
    return precision === undefined || precision - scale >= (integerDigits[from.base] ?? Infinity);
  }
  if (from.base === 'real') return to.base === 'double precision';
  if (from.base === 'numeric' && to.base === 'numeric') {
    const [toPrecision, toScale = 0] = to.modifiers;
    if (toPrecision === undefined) return true;
    const [fromPrecision, fromScale = 0] = from.modifiers;
    if (fromPrecision === undefined) return false;
    return toScale === fromScale && toPrecision >= fromPrecision;
  }
  if (from.base === 'character varying' || from.base === 'character') {
    if (to.base === 'text') return true;
    if (to.base !== 'character varying') return false;
    // character(n) pads with blanks: its values keep their padding in a varchar.
    const [toLength] = to.modifiers;
    const [fromLength] = from.modifiers;
    return toLength === undefined || (fromLength !== undefined && toLength >= fromLength);
  }
  if (growingModifier.has(from.base) && to.base === from.base) {
    const [toModifier] = to.modifiers;
    const [fromModifier] = from.modifiers;
    return toModifier === undefined || (fromModifier !== undefined && toModifier >= fromModifier);
  }
  return false;
}

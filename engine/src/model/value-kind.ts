// The typed value model ("system Q"): the closed set of value kinds the engine
// hands to destinations that need typed values (ClickHouse, Kafka, Snowflake).
// A PostgreSQL column maps to one ColumnType (pg-type-map.ts); its text output
// is parsed into the JavaScript value the kind prescribes (parse-text.ts).
//
// Nullability is deliberately not part of ColumnType: it is a property of the
// column, not of the type, and SQL NULL never reaches the text parser.

/** Every kind a non-array value can have. */
export const scalarKinds = [
  'int16',
  'int32',
  'int64',
  'float32',
  'float64',
  'numeric',
  'boolean',
  'string',
  'bytes',
  'uuid',
  'json',
  'date',
  'time',
  'timetz',
  'timestamp',
  'timestamptz',
  'interval',
  'inet',
  'cidr',
  'macaddr',
  'hstore',
  'geometry',
  'money',
  'bit',
  'xml',
  'enum',
  // Any type the engine has no better model for; its text output is kept.
  'unknown_text',
] as const;

export type ScalarKind = (typeof scalarKinds)[number];

/** Every kind a column can have: a scalar kind, or an array of one. */
export const valueKinds = [...scalarKinds, 'array'] as const;

export type ValueKind = (typeof valueKinds)[number];

/** Scalar kinds whose column type carries nothing but the kind. */
export type PlainScalarKind = Exclude<ScalarKind, 'numeric' | 'enum' | 'geometry' | 'unknown_text'>;

export interface PlainColumnType {
  readonly kind: PlainScalarKind;
}

/**
 * numeric(p, s) carries its precision and scale; plain `numeric` carries
 * neither. Both or none: a scale without a precision cannot be written.
 * PostgreSQL 15 allows a negative scale and a scale above the precision
 * (numeric(5,-2), numeric(3,5)), so scale is any integer in -1000..1000.
 */
export type NumericColumnType =
  | { readonly kind: 'numeric'; readonly precision: number; readonly scale: number }
  | { readonly kind: 'numeric'; readonly precision?: never; readonly scale?: never };

/** A user-defined enum; `name` is its pg_type.typname. Values are its labels. */
export interface EnumColumnType {
  readonly kind: 'enum';
  readonly name: string;
}

/**
 * A geometric type carried as its text output: the built-in point, line,
 * lseg, box, path, polygon, circle, or PostGIS geometry, geography, box2d,
 * box3d (whose text output is hex EWKB or a box literal). `name` is the typname.
 */
export interface GeometryColumnType {
  readonly kind: 'geometry';
  readonly name: string;
}

/** A type without a better model, kept as text; `name` is the typname when known. */
export interface UnknownTextColumnType {
  readonly kind: 'unknown_text';
  readonly name?: string;
}

export type ScalarColumnType =
  | PlainColumnType
  | NumericColumnType
  | EnumColumnType
  | GeometryColumnType
  | UnknownTextColumnType;

/**
 * An array of a scalar type. PostgreSQL does not record an array's number of
 * dimensions in its type, so one ColumnType covers int4[] and int4[][]; and
 * the element is a scalar by construction, so an array of arrays cannot be written.
 */
export interface ArrayColumnType {
  readonly kind: 'array';
  readonly element: ScalarColumnType;
}

/** What a destination needs to know about a column's type to create and fill it. */
export type ColumnType = ScalarColumnType | ArrayColumnType;

const scalarKindSet: ReadonlySet<string> = new Set(scalarKinds);

export function isScalarKind(kind: string): kind is ScalarKind {
  return scalarKindSet.has(kind);
}

export function isArrayColumnType(type: ColumnType): type is ArrayColumnType {
  return type.kind === 'array';
}

/** A short, value-free description such as `numeric(10,2)` or `array<int32>`, for messages. */
export function describeColumnType(type: ColumnType): string {
  switch (type.kind) {
    case 'array':
      return `array<${describeColumnType(type.element)}>`;
    case 'numeric':
      return type.precision === undefined ? 'numeric' : `numeric(${type.precision},${type.scale})`;
    case 'enum':
    case 'geometry':
      return `${type.kind}(${type.name})`;
    case 'unknown_text':
      return type.name === undefined ? 'unknown_text' : `unknown_text(${type.name})`;
    default:
      return type.kind;
  }
}

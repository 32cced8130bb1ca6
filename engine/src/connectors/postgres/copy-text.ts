// PostgreSQL COPY text format: one line per row, tab-separated, `\N` for null,
// and backslash escapes for backslash, newline, carriage return and tab
// (https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.2).

const needsEscape = /[\\\n\r\t]/;

export function escapeCopyText(value: string): string {
  if (!needsEscape.test(value)) return value;
  let escaped = '';
  for (const char of value) {
    if (char === '\\') escaped += '\\\\';
    else if (char === '\n') escaped += '\\n';
    else if (char === '\r') escaped += '\\r';
    else if (char === '\t') escaped += '\\t';
    else escaped += char;
  }
  return escaped;
}

export const copyNull = '\\N';

/** A text[] literal of plain names, for COPY: `{"a","b"}` with quotes and backslashes escaped. */
export function textArrayLiteral(values: readonly string[]): string {
  return `{${values.map((value) => `"${value.replace(/[\\"]/g, (char) => `\\${char}`)}"`).join(',')}}`;
}

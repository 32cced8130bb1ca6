// ClickHouse SQL quoting (https://clickhouse.com/docs/sql-reference/syntax#identifiers).

/** A backquoted identifier; backquotes and backslashes inside are escaped. */
export function quoteIdentifier(name: string): string {
  return `\`${name.replace(/[\\`]/g, (char) => `\\${char}`)}\``;
}

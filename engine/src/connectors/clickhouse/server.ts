// What a ClickHouse server can do, decided once from its version (SELECT
// version()): the connector creates the best table shape the server supports
// and falls back on older releases (docs/clickhouse.md, "Types per server").
//
// Thresholds are the first release with the feature generally available, from
// the ClickHouse changelog (https://clickhouse.com/docs/whats-new/changelog),
// rounded up to an LTS release where the feature was experimental before.
import { daysFromCivil } from '../../model/calendar.ts';

export interface ServerVersion {
  readonly major: number;
  readonly minor: number;
}

export interface ServerCapabilities {
  readonly version: ServerVersion;
  /** ReplacingMergeTree(version, is_deleted): FINAL hides deleted rows (23.2). */
  readonly isDeletedColumn: boolean;
  /** DateTime64 and now64 (20.1). */
  readonly dateTime64: boolean;
  /** Date32 (21.9). */
  readonly date32: boolean;
  /** Bool (21.12). */
  readonly bool: boolean;
  /** Map(K, V) without an experimental flag (22.3). */
  readonly map: boolean;
  /** ALTER TABLE … RENAME COLUMN (20.4). */
  readonly renameColumn: boolean;
  /** Largest Decimal precision: 76 with Decimal256 (22.3), else 38. */
  readonly maxDecimalPrecision: number;
  /**
   * Range of Date32 and DateTime64 values the server formats and compares
   * correctly: 1900-01-01 to 2299-12-31 from 22.8, 1925-01-01 to 2283-11-11 before.
   * Values are days since 1970-01-01.
   */
  readonly extendedDateRange: { readonly minDay: number; readonly maxDay: number };
}

const versionPattern = /^(\d+)\.(\d+)/;

export function parseServerVersion(text: string): ServerVersion {
  const match = versionPattern.exec(text.trim());
  return { major: Number(match?.[1] ?? 0), minor: Number(match?.[2] ?? 0) };
}

function atLeast(version: ServerVersion, major: number, minor: number): boolean {
  return version.major > major || (version.major === major && version.minor >= minor);
}

export function serverCapabilities(versionText: string): ServerCapabilities {
  const version = parseServerVersion(versionText);
  const extended = atLeast(version, 22, 8);
  return {
    version,
    isDeletedColumn: atLeast(version, 23, 2),
    dateTime64: atLeast(version, 20, 1),
    date32: atLeast(version, 21, 9),
    bool: atLeast(version, 21, 12),
    map: atLeast(version, 22, 3),
    renameColumn: atLeast(version, 20, 4),
    maxDecimalPrecision: atLeast(version, 22, 3) ? 76 : 38,
    extendedDateRange: extended
      ? { minDay: daysFromCivil(1900, 1, 1), maxDay: daysFromCivil(2299, 12, 31) }
      : { minDay: daysFromCivil(1925, 1, 1), maxDay: daysFromCivil(2283, 11, 11) },
  };
}

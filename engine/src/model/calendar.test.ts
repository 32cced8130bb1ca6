import { describe, expect, it } from 'vitest';
import { civilFromDays, daysFromCivil, formatCivilDate } from './calendar.ts';

describe('calendar', () => {
  it('round-trips day counts across eras, leap days and BC years', () => {
    for (const days of [-719_528, -1, 0, 1, 11_016, 19_782, 2_932_896, -2_500_000]) {
      const date = civilFromDays(days);
      expect(daysFromCivil(date.year, date.month, date.day)).toBe(days);
    }
    expect(civilFromDays(0)).toEqual({ year: 1970, month: 1, day: 1 });
    expect(formatCivilDate(civilFromDays(daysFromCivil(2024, 2, 29)))).toBe('2024-02-29');
    expect(formatCivilDate({ year: -43, month: 3, day: 15 })).toBe('-0043-03-15');
  });
});

import { describe, expect, it } from 'vitest';
import { isWidening } from './type-widening.ts';

describe('isWidening', () => {
  it.each([
    ['smallint', 'integer'],
    ['integer', 'bigint'],
    ['smallint', 'bigint'],
    ['integer', 'numeric'],
    ['integer', 'numeric(12,2)'],
    ['bigint', 'numeric(19,0)'],
    ['real', 'double precision'],
    ['numeric(10,2)', 'numeric(12,2)'],
    ['numeric(10,2)', 'numeric'],
    ['character varying(20)', 'character varying(40)'],
    ['character varying(20)', 'character varying'],
    ['character varying(20)', 'text'],
    ['character(3)', 'character varying(3)'],
    ['timestamp(3) without time zone', 'timestamp(6) without time zone'],
    ['timestamp(3) with time zone', 'timestamp with time zone'],
    ['integer[]', 'bigint[]'],
    ['text', 'text'],
  ])('%s → %s widens', (before, after) => {
    expect(isWidening(before, after)).toBe(true);
  });

  it.each([
    ['bigint', 'integer'],
    ['integer', 'smallint'],
    ['integer', 'numeric(9,0)'],
    ['bigint', 'numeric(20,2)'],
    ['double precision', 'real'],
    ['numeric(12,2)', 'numeric(10,2)'],
    ['numeric(10,2)', 'numeric(12,3)'],
    ['numeric', 'numeric(30,2)'],
    ['character varying(40)', 'character varying(20)'],
    ['text', 'character varying(20)'],
    ['text', 'integer'],
    ['integer', 'text'],
    ['timestamp without time zone', 'timestamp with time zone'],
    ['timestamp(6) without time zone', 'timestamp(3) without time zone'],
    ['integer', 'integer[]'],
    ['real', 'numeric'],
  ])('%s → %s does not widen', (before, after) => {
    expect(isWidening(before, after)).toBe(false);
  });
});

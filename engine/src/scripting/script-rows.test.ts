import { describe, expect, it } from 'vitest';
import { LuaTable } from './lua-vm.ts';
import { InvalidScriptResult } from './script-messages.ts';
import { rowEdit, rowEditTextLength } from './script-rows.ts';

const row = { id: '7', name: 'seven', note: null };

describe('rowEdit', () => {
  it('drops the row on nil and keeps it on true', () => {
    expect(rowEdit([], row)).toEqual({ drop: true });
    expect(rowEdit([undefined], row)).toEqual({ drop: true });
    expect(rowEdit([true], row)).toEqual({ drop: false, values: {} });
  });

  it('carries only the values that differ from the record row, as text', () => {
    const returned = new LuaTable([
      ['id', '7'],
      ['name', 'SEVEN'],
      ['note', null],
      ['count', 3],
      ['big', 9007199254740993n],
      ['paid', true],
      ['void', false],
    ]);
    const edit = rowEdit([returned], row);
    expect(edit).toEqual({
      drop: false,
      values: { name: 'SEVEN', count: '3', big: '9007199254740993', paid: 't', void: 'f' },
    });
    expect(rowEditTextLength(edit)).toBe('nameSEVENcount3big9007199254740993paidtvoidf'.length);
  });

  it('refuses what is not a row, true or nil', () => {
    expect(() => rowEdit(['text'], row)).toThrow(InvalidScriptResult);
    expect(() => rowEdit([false], row)).toThrow(/returned a boolean/);
    expect(() => rowEdit([new LuaTable([]), new LuaTable([])], row)).toThrow(/returned 2 values/);
    expect(() => rowEdit([new LuaTable([[1, 'x']])], row)).toThrow(/not a column name/);
    expect(() => rowEdit([new LuaTable([['tags', new LuaTable([[1, 'a']])]])], row)).toThrow(
      /column tags is given a table; give its text/,
    );
  });
});

import { describe, expect, it } from 'vitest';
import { encodeLuaJson, LuaSandbox, LuaScriptError, LuaTable } from './lua-vm.ts';

const limits = { timeLimitMs: 150, memoryLimitBytes: 8 * 1024 * 1024 };

async function sandbox(source: string, printed: string[] = []): Promise<LuaSandbox> {
  const box = await LuaSandbox.create(limits, { print: (line) => printed.push(line) });
  box.run(source, 'test');
  return box;
}

function failure(box: LuaSandbox, name: string, args: unknown[] = []): LuaScriptError {
  try {
    box.call(name, args as never);
  } catch (error) {
    expect(error).toBeInstanceOf(LuaScriptError);
    return error as LuaScriptError;
  }
  throw new Error(`${name} did not fail`);
}

describe('Lua sandbox', () => {
  it('passes values both ways without loss', async () => {
    const box = await sandbox(`function echo(...) return ... end
      function kinds(v) return type(v.i), math.type(v.i), type(v.big), math.type(v.big), v.s, v.null == json.null, v.list[2] end`);
    const [table] = box.call('echo', [{ a: [1, null, 'x'], b: true }]);
    expect(table).toBeInstanceOf(LuaTable);
    expect(JSON.parse(encodeLuaJson(table))).toEqual({ a: [1, null, 'x'], b: true });
    expect(
      box.call('kinds', [{ i: 42, big: 2n ** 62n, s: 'héllo\u0000tab', null: null, list: [1, 2.5] }]),
    ).toEqual(['number', 'integer', 'number', 'integer', 'héllo\u0000tab', true, 2.5]);
    expect(box.call('echo', [2n ** 62n, 9007199254740993n, -1])).toEqual([2n ** 62n, 9007199254740993n, -1]);
  });

  it('gives scripts json.encode, json.decode and json.null', async () => {
    const box = await sandbox(`function roundtrip(text) return json.encode(json.decode(text)) end
      function encode(v) return json.encode(v) end
      function nan() return json.encode({ 0/0, 1/0, -1/0, math.maxinteger }) end`);
    const [text] = box.call('roundtrip', ['{"a":[1,null,{"b":"c"}],"n":1.5e300,"i":9007199254740993}']);
    // Integers beyond 2^53 stay exact (they are Lua integers); key order is Lua's.
    expect(text).toContain('"i":9007199254740993');
    expect(JSON.parse(text as string)).toMatchObject({ a: [1, null, { b: 'c' }], n: 1.5e300 });
    expect(box.call('nan')).toEqual(['["NaN","Infinity","-Infinity",9223372036854775807]']);
    expect(box.call('encode', [{}])).toEqual(['{}']);
    const error = failure(box, 'roundtrip', ['{not json']);
    expect(error.message).toMatch(/^json\.decode: /);
  });

  it('sends print to the host', async () => {
    const printed: string[] = [];
    const box = await sandbox(`function hello(name) print('hello', name, 42, nil, true) end`, printed);
    box.call('hello', ['world']);
    expect(printed).toEqual(['hello\tworld\t42\tnil\ttrue']);
  });

  it('reports errors with the chunk name and line', async () => {
    const box = await sandbox(`function broken(record)
      local row = nil
      return row.id
    end`);
    expect(failure(box, 'broken').message).toBe("test:3: attempt to index a nil value (local 'row')");
    // The state is still usable after an error.
    expect(box.call('tostring', [1])).toEqual(['1']);
  });

  it('compiles without running, and reports a syntax error with its line', async () => {
    const printed: string[] = [];
    const box = await LuaSandbox.create(limits, { print: (line) => printed.push(line) });
    // A chunk that would fail (and print) when run compiles cleanly: compile runs nothing.
    box.compile(`print('ran')\nerror('ran')\nfunction onRecord(r) return r end`, 'ok');
    expect(printed).toEqual([]);
    expect(box.hasFunction('onRecord')).toBe(false);
    expect(() => box.compile('function onRecord(r)\n  return r +\nend', 'shaper')).toThrow(
      "shaper:3: unexpected symbol near 'end'",
    );
    // Bytecode is refused like in run: text mode only.
    expect(() => box.compile('\x1bLua\x54\x00', 'binary')).toThrow(/binary chunk/);
    box.compile('return 1', 'again');
  });

  it('refuses the file, OS, process, module and debug libraries', async () => {
    const box = await sandbox(`
      function exec() return os.execute('id') end
      function getenv() return os.getenv('HOME') end
      function exit() os.exit(1) end
      function open() return io.open('/etc/passwd') end
      function req() return require('os') end
      function dofile_() return dofile('/etc/passwd') end
      function loadfile_() return loadfile('/etc/passwd') end
      function debug_() return debug.getregistry() end
      function dump() return string.dump(print) end
      function bytecode() return load('\\27LuaT\\0\\25\\147\\r\\n\\26\\n', 'x', 'b') end
      function bytecode_text() return load('\\27LuaT\\0\\25\\147\\r\\n\\26\\n') end
      function source_text() return load('return 1 + 1')() end
      function kept() return type(os.time()), type(os.clock()), type(os.date('%Y')), package, io, debug end`);
    for (const name of ['exec', 'getenv', 'exit']) {
      expect(failure(box, name).message).toMatch(
        /attempt to call a nil value \(field '(execute|getenv|exit)'\)/,
      );
    }
    expect(failure(box, 'open').message).toMatch(/attempt to index a nil value \(global 'io'\)/);
    expect(failure(box, 'req').message).toMatch(/attempt to call a nil value \(global 'require'\)/);
    expect(failure(box, 'dofile_').message).toMatch(/global 'dofile'/);
    expect(failure(box, 'loadfile_').message).toMatch(/global 'loadfile'/);
    expect(failure(box, 'debug_').message).toMatch(/global 'debug'/);
    expect(failure(box, 'dump').message).toMatch(/field 'dump'/);
    expect(failure(box, 'bytecode').message).toMatch(/only text chunks can be loaded/);
    expect(box.call('bytecode_text')).toEqual([undefined, "attempt to load a binary chunk (mode is 't')"]);
    expect(box.call('source_text')).toEqual([2]);
    expect(box.call('kept')).toEqual(['number', 'number', 'string', undefined, undefined, undefined]);
  });

  it('stops a runaway call at its time limit, even one that catches errors', async () => {
    // Each case spends the whole limit in CPU time: a short one keeps the test short on a busy machine.
    const runawayLimits = { ...limits, timeLimitMs: 40 };
    const box = await LuaSandbox.create(runawayLimits, { print: () => {} });
    box.run(
      `
      function spin() while true do end end
      function stubborn() while true do pcall(function() while true do end end) end end
      function stubborn_x() while true do xpcall(function() while true do end end, function(e) return e end) end end
      function in_coroutine() coroutine.wrap(function() while true do end end)() end
      function resumer() while true do coroutine.resume(coroutine.create(function() while true do end end)) end end
      function ok() return 'fine' end`,
      'test',
    );
    for (const name of ['spin', 'stubborn', 'stubborn_x', 'in_coroutine', 'resumer']) {
      // Measured in CPU time of this thread, as the limit is: the same on an idle and a busy machine.
      const cpuBefore = process.threadCpuUsage();
      const error = failure(box, name);
      const cpuUsage = process.threadCpuUsage(cpuBefore);
      const cpuUsedMs = (cpuUsage.user + cpuUsage.system) / 1000;
      expect(error.reason).toBe('timeout');
      expect(error.message).toMatch(/^test:\d+: script exceeded its time limit of 40 ms$/);
      // The whole budget was granted (waiting for a core does not spend it), and no more than a few checks past it.
      expect(cpuUsedMs).toBeGreaterThanOrEqual(runawayLimits.timeLimitMs);
      expect(cpuUsedMs).toBeLessThan(runawayLimits.timeLimitMs * 5);
    }
    expect(box.call('ok')).toEqual(['fine']);
  });

  it('stops a call that allocates past the memory limit and recovers', async () => {
    const box = await sandbox(`
      function huge_string() return ('x'):rep(1e9) end
      function many_tables() local t = {} for i = 1, 1e8 do t[i] = { i } end end
      function concat_loop() local s = 'x' while true do s = s .. s end end
      function after() return collectgarbage('count') < 4096 end`);
    for (const name of ['huge_string', 'many_tables', 'concat_loop']) {
      const error = failure(box, name);
      expect(error.reason).toBe('memory');
      expect(error.message).toMatch(/not enough memory: the script may hold at most 8 MiB/);
    }
    expect(box.memoryUsed).toBeLessThan(limits.memoryLimitBytes * 2);
    box.call('after');
  });

  it('runs no script code in finalizers or unprotected metamethods', async () => {
    const box = await sandbox(`
      function finalizer() setmetatable({}, { __gc = function() while true do end end }) end
      function error_object() error(setmetatable({}, { __tostring = function() while true do end end })) end
      function tricky_result() return setmetatable({}, { __index = function() while true do end end }) end
      function recursion() local function f() return 1 + f() end return f() end`);
    expect(failure(box, 'finalizer').message).toMatch(/__gc metamethods are not allowed/);
    expect(failure(box, 'error_object').message).toBe('(error object is a table value)');
    const [result] = box.call('tricky_result');
    expect(result).toBeInstanceOf(LuaTable);
    expect((result as LuaTable).get('topic')).toBeUndefined();
    expect(failure(box, 'recursion').message).toMatch(/stack overflow|not enough memory/);
  });

  it('times out a script whose top level never ends', async () => {
    const box = await LuaSandbox.create(limits, { print: () => {} });
    expect(() => box.run('while true do end', 'top')).toThrow(/top:1: script exceeded its time limit/);
    expect(() => box.run('x = = 1', 'syntax')).toThrow(/syntax:1: unexpected symbol near '='/);
  });
});

// The Lua code that shapes a sandbox's globals before the user's script runs.
// It receives the host functions as chunk arguments, so they never appear as
// globals, and leaves the script only what cannot reach files, the process,
// the network or other modules (docs/scripts.md lists what is kept):
//
// - removed: io, package, require, dofile, loadfile, debug, warn, string.dump,
//   and every os function but time, clock, date and difftime;
// - load compiles text only (mode 't'), so bytecode can never be loaded;
// - setmetatable refuses __gc, so no script code runs during garbage
//   collection, outside the calls the host times;
// - pcall, xpcall, coroutine.resume and coroutine.close re-raise once the
//   call's time is up, so a script cannot catch its own time-out and go on;
// - collectgarbage keeps only collect, count and step.
export const sandboxPrelude = String.raw`
local host_print, host_encode, host_decode, host_expired, null = ...
local error, type, tostring, rawget = error, type, tostring, rawget
local rawpcall, rawxpcall, rawload, rawsetmetatable, rawcollect = pcall, xpcall, load, setmetatable, collectgarbage
local concat, pack = table.concat, table.pack
local resume, close = coroutine.resume, coroutine.close

local function recheck(...)
  if host_expired() then error('script exceeded its time limit', 0) end
  return ...
end
pcall = function(f, ...) return recheck(rawpcall(f, ...)) end
xpcall = function(f, handler, ...) return recheck(rawxpcall(f, handler, ...)) end
coroutine.resume = function(co, ...) return recheck(resume(co, ...)) end
coroutine.close = function(co) return recheck(close(co)) end

load = function(chunk, chunkname, mode, env)
  if mode ~= nil and mode ~= 't' then error("load: only text chunks can be loaded (mode 't')", 2) end
  if env == nil then return rawload(chunk, chunkname, 't') end
  return rawload(chunk, chunkname, 't', env)
end

setmetatable = function(t, mt)
  if type(mt) == 'table' and rawget(mt, '__gc') ~= nil then
    error('setmetatable: __gc metamethods are not allowed in scripts', 2)
  end
  return rawsetmetatable(t, mt)
end

collectgarbage = function(option, ...)
  if option == nil or option == 'collect' or option == 'count' or option == 'step' then
    return rawcollect(option, ...)
  end
  error("collectgarbage: option '" .. tostring(option) .. "' is not allowed in scripts", 2)
end

print = function(...)
  local parts = pack(...)
  for i = 1, parts.n do parts[i] = tostring(parts[i]) end
  host_print(concat(parts, '\t', 1, parts.n))
end

json = { encode = host_encode, decode = host_decode, null = null }

local os_time, os_clock, os_date, os_difftime = os.time, os.clock, os.date, os.difftime
os = { time = os_time, clock = os_clock, date = os_date, difftime = os_difftime }
string.dump = nil
io, package, require, dofile, loadfile, debug, warn = nil, nil, nil, nil, nil, nil, nil
`;

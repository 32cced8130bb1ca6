// Whether a Lua script's source compiles, so that the API refuses at save time
// a script that could only fail when a mirror first runs it. Compiling runs no
// script code (the parser is linear in the source), so it happens on the
// caller's thread, in one sandbox kept for the purpose; the memory limit holds.
import { LuaSandbox, LuaScriptError } from './lua-vm.ts';
import { defaultScriptLimits } from './record-script.ts';

let checker: Promise<LuaSandbox> | undefined;

/** Lua's message for the first syntax error of `source` (with `chunkName` and the line), or undefined. */
export async function luaSyntaxError(source: string, chunkName: string): Promise<string | undefined> {
  checker ??= LuaSandbox.create(defaultScriptLimits, { print: () => {} });
  const sandbox = await checker;
  try {
    sandbox.compile(source, chunkName);
    return undefined;
  } catch (error) {
    if (!(error instanceof LuaScriptError)) throw error;
    // A broken sandbox is not the script's fault: the next check gets a new one.
    if (error.reason === 'crashed') {
      checker = undefined;
      throw error;
    }
    return error.message;
  }
}

import type { FastifyInstance } from 'fastify';
import {
  type LuaInput,
  luaSyntaxError,
  ResourceExistsError,
  ResourceNotFoundError,
  type ScriptResource,
  scriptLanguages,
  tryScript,
} from '../../../../engine/src/index.ts';
import { noteAuditSubject } from '../audit.ts';
import type { FacadeContext } from '../context.ts';
import { parseRequest } from '../convert.ts';
import { ApiError } from '../errors.ts';
import { testScriptRequest, upsertScriptRequest } from '../wire.ts';

export const scriptsDisabledMessage = 'scripts are disabled on this service';

function wire(script: ScriptResource) {
  return { id: script.id, name: script.name, lang: script.lang, source: script.source };
}

export function scriptRoutes(app: FastifyInstance, context: FacadeContext): void {
  app.post('/api/v1/scripts', async (request) => {
    if (!context.scriptsEnabled) throw new ApiError('forbidden', scriptsDisabledMessage);
    const {
      body: { script },
      field,
    } = parseRequest(upsertScriptRequest, request);
    noteAuditSubject(request, {
      action: script.id === -1 ? 'script.create' : 'script.update',
      object: script.name,
    });
    const lang = scriptLanguages.find((known) => known === script.lang.toLowerCase());
    if (!lang) {
      throw new ApiError(
        'invalidArgument',
        `${field(['script', 'lang'])}: unsupported language; supported: ${scriptLanguages.join(', ')}`,
      );
    }
    // A script that does not compile could only stop every mirror that uses it.
    const syntaxError = await luaSyntaxError(script.source, script.name);
    if (syntaxError !== undefined) {
      throw new ApiError(
        'invalidArgument',
        `${field(['script', 'source'])}: does not compile: ${syntaxError}`,
      );
    }
    try {
      if (script.id === -1) {
        return {
          id: (await context.store.createScript({ name: script.name, lang, source: script.source })).id,
        };
      }
      return {
        id: (
          await context.store.updateScript({ id: script.id, name: script.name, lang, source: script.source })
        ).id,
      };
    } catch (error) {
      if (error instanceof ResourceNotFoundError)
        throw new ApiError('notFound', `script ${script.id} does not exist`);
      if (error instanceof ResourceExistsError) {
        throw new ApiError(
          'conflict',
          error.constructor === ResourceExistsError ? `a script named ${script.name} exists` : error.message,
        );
      }
      throw error;
    }
  });

  // Not in the interface: a script run once on a sample record, as a mirror
  // would run it (its sandbox and limits), saving nothing; the console's
  // "Run on the sample". A script that does not compile answers its line.
  app.post('/api/v1/scripts/test', async (request) => {
    if (!context.scriptsEnabled) throw new ApiError('forbidden', scriptsDisabledMessage);
    const { body } = parseRequest(testScriptRequest, request);
    const name = body.name ?? 'sample';
    const form = body.form ?? 'rows';
    const syntaxError = await luaSyntaxError(body.source, name);
    if (syntaxError !== undefined)
      return { ok: false, form, error: `does not compile: ${syntaxError}`, printed: [] };
    const trial = await tryScript(
      { name, source: body.source },
      form,
      body.record as LuaInput,
      context.logger,
    );
    if (!trial.ok) return { ok: false, form, error: trial.error, printed: trial.printed };
    return trial.form === 'rows'
      ? { ok: true, form, row: trial.edit, printed: trial.printed }
      : { ok: true, form, messages: trial.messages, printed: trial.printed };
  });

  app.get<{ Params: { id: string } }>('/api/v1/scripts/:id', async (request) => {
    if (!/^-?\d+$/.test(request.params.id)) throw new ApiError('invalidArgument', 'id: expected an integer');
    const id = Number(request.params.id);
    if (id === -1) return { scripts: (await context.store.listScripts()).map(wire) };
    const script = await context.store.getScript(id);
    if (!script) throw new ApiError('notFound', `script ${id} does not exist`);
    return { scripts: [wire(script)] };
  });
}

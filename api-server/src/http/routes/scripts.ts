import type { FastifyInstance } from 'fastify';
import {
  luaSyntaxError,
  ResourceExistsError,
  ResourceNotFoundError,
  type ScriptResource,
  scriptLanguages,
} from '../../../../engine/src/index.ts';
import { noteAuditSubject } from '../audit.ts';
import type { FacadeContext } from '../context.ts';
import { parseRequest } from '../convert.ts';
import { ApiError } from '../errors.ts';
import { upsertScriptRequest } from '../wire.ts';

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

  app.get<{ Params: { id: string } }>('/api/v1/scripts/:id', async (request) => {
    if (!/^-?\d+$/.test(request.params.id)) throw new ApiError('invalidArgument', 'id: expected an integer');
    const id = Number(request.params.id);
    if (id === -1) return { scripts: (await context.store.listScripts()).map(wire) };
    const script = await context.store.getScript(id);
    if (!script) throw new ApiError('notFound', `script ${id} does not exist`);
    return { scripts: [wire(script)] };
  });
}

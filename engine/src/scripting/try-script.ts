// A script run once on a sample record, as a mirror would run it, before it is
// saved (the API's scripts/test addition, the console's "Run on the sample"):
// in its own sandbox thread with the mirror's limits, in the form a
// destination reads (messages for Kafka, rows for a table), with what it
// printed. Nothing of a mirror is touched.
import type { Logger } from 'pino';
import { isEngineError } from '../errors.ts';
import type { LuaInput } from './lua-vm.ts';
import { RecordScript, type RowEdit, type ScriptForm, type ScriptMessage } from './record-script.ts';

export type ScriptTrial =
  | {
      readonly ok: true;
      readonly form: 'messages';
      readonly messages: ScriptMessage[];
      readonly printed: string[];
    }
  | { readonly ok: true; readonly form: 'rows'; readonly edit: RowEdit; readonly printed: string[] }
  | { readonly ok: false; readonly error: string; readonly printed: string[] };

/** Prints kept of one trial: enough to see, bounded like the record. */
const maxPrinted = 50;

export async function tryScript(
  script: { readonly name: string; readonly source: string },
  form: ScriptForm,
  record: LuaInput,
  logger: Logger,
): Promise<ScriptTrial> {
  const printed: string[] = [];
  const run = new RecordScript(
    { ...script, lang: 'lua' },
    {
      logger,
      form,
      log: (_level, message) => {
        if (printed.length < maxPrinted) printed.push(message.replace(`script ${script.name}: `, ''));
      },
    },
  );
  try {
    await run.ready();
    if (form === 'rows') {
      const [edit] = await run.transformRows([record]);
      return { ok: true, form, edit: edit ?? { drop: true }, printed };
    }
    const [messages] = await run.transform([record]);
    return { ok: true, form, messages: messages ?? [], printed };
  } catch (error) {
    if (isEngineError(error) && error.kind === 'script') return { ok: false, error: error.message, printed };
    throw error;
  } finally {
    await run.close();
  }
}

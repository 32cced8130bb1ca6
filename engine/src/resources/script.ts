// A record-transforming script as an engine receives it (resolved by name from
// the mirror's \`script\` field).
import { z } from 'zod';

export const scriptSourceSchema = z.object({
  name: z.string().min(1).describe('The script name, as mirrors name it.'),
  lang: z.literal('lua').describe('The language of source.'),
  source: z.string().describe('The Lua source, defining onRecord(record).'),
});

export type ScriptSource = z.infer<typeof scriptSourceSchema>;

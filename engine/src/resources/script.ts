// A record-transforming script as an engine receives it (resolved by name from
// the mirror's \`script\` field).
import { z } from 'zod';

export const scriptSourceSchema = z.object({
  name: z.string().min(1),
  lang: z.literal('lua'),
  source: z.string(),
});

export type ScriptSource = z.infer<typeof scriptSourceSchema>;

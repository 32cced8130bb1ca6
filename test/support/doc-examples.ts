// The fenced examples of README.md and docs/*.md, with the marker that says how
// each is checked. A marker is an HTML comment on the line before the fence:
//   <!-- doc-example: api POST /api/v1/peers/create -->   JSON sent to a running service
//   <!-- doc-example: checked-by test/e2e/x.test.ts -->   compared there with real output
//   <!-- doc-example: skip: why it cannot run in a test --> e.g. needs a Kubernetes cluster
//   <!-- readme-example:start -->                         README's tour, run by readme.test.ts
// A shell block without a marker is run as it stands (test/e2e/readme.test.ts).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './testenv.ts';

export interface DocExample {
  /** Relative to the repository root. */
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly language: string;
  readonly code: string;
  /** What the marker comment says, if there is one. */
  readonly marker?: string;
}

export const shellLanguages = ['sh', 'bash', 'shell', 'console'];

export function documentationFiles(): string[] {
  const docs = readdirSync(join(repoRoot, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

export function docExamples(file: string): DocExample[] {
  const lines = readFileSync(join(repoRoot, file), 'utf8').split('\n');
  const examples: DocExample[] = [];
  for (let index = 0; index < lines.length; index++) {
    const open = /^```(\w*)\s*$/.exec(lines[index] ?? '');
    if (!open) continue;
    const close = lines.findIndex((line, at) => at > index && /^```\s*$/.test(line));
    if (close < 0) throw new Error(`${file}:${index + 1}: a code fence is not closed`);
    let before = index - 1;
    while (before >= 0 && (lines[before] ?? '').trim() === '') before--;
    const comment = /^<!--\s*(?:doc-example:\s*(.+?)|(readme-example):start)\s*-->$/.exec(
      (lines[before] ?? '').trim(),
    );
    const marker = comment?.[1] ?? comment?.[2];
    examples.push({
      file,
      line: index + 1,
      language: open[1] ?? '',
      code: lines.slice(index + 1, close).join('\n'),
      ...(marker ? { marker } : {}),
    });
    index = close;
  }
  return examples;
}

/** Every JSON and shell example of the documentation. */
export function runnableLanguageExamples(): DocExample[] {
  return documentationFiles()
    .flatMap(docExamples)
    .filter((example) => example.language === 'json' || shellLanguages.includes(example.language));
}

/** The one example of `file` whose marker is `checked-by <checker>`, parsed as JSON. */
export function checkedJsonExample(file: string, checker: string): unknown {
  const found = docExamples(file).filter(
    (example) => example.language === 'json' && example.marker === `checked-by ${checker}`,
  );
  if (found.length !== 1) throw new Error(`${file} has ${found.length} JSON examples checked by ${checker}`);
  return JSON.parse(found[0]?.code ?? '');
}

/** The JSON type of each top-level field: what a documented message promises. */
export function jsonShape(value: unknown): Record<string, string> {
  const typeOf = (field: unknown) =>
    field === null ? 'null' : Array.isArray(field) ? 'array' : typeof field;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([key, field]) => [key, typeOf(field)]),
  );
}

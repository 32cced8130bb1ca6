// The files of a support bundle and what could not be collected, held until
// the bundle is written, so that the values of every Secret read (in any
// order) are scrubbed from every file before anything leaves (redact.ts).
import { serialized } from '../output.ts';
import { redactObject, redactSecret, scrubKnown, scrubText, secretForms } from './redact.ts';

export interface BundleFile {
  readonly path: string;
  readonly text: string;
}

type Held =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'object'; readonly value: unknown };

/** An object's strings without the known secrets (its fields and patterns were redacted when it was added). */
function scrubDeep(value: unknown, secrets: readonly string[]): unknown {
  if (typeof value === 'string') return scrubKnown(value, secrets);
  if (Array.isArray(value)) return value.map((item) => scrubDeep(item, secrets));
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, scrubDeep(inner, secrets)]));
}

export class ReportBundle {
  readonly #files = new Map<string, Held>();
  readonly #problems: string[] = [];
  readonly #secrets = new Set<string>();

  /** A text file (a log, metrics, a summary). */
  addText(path: string, text: string): void {
    this.#files.set(path, { kind: 'text', text });
  }

  /** An object as YAML, its secret-looking fields redacted. */
  addObject(path: string, object: unknown): void {
    this.#files.set(path, { kind: 'object', value: redactObject(object) });
  }

  /** A Secret as YAML without its values, which are scrubbed from every other file too. */
  addSecret(path: string, secret: Parameters<typeof redactSecret>[0]): void {
    const { object, values } = redactSecret(secret);
    for (const value of values) for (const form of secretForms(value)) this.#secrets.add(form);
    this.#files.set(path, { kind: 'object', value: object });
  }

  /** Something the bundle does not hold, and why (a refusal, an unreachable pod). */
  problem(what: string, why: string): void {
    this.#problems.push(`${what}: ${why}`);
  }

  get problems(): readonly string[] {
    return this.#problems;
  }

  /** Every file, scrubbed, by path; `readme` is given the paths and the problems and goes first. */
  files(readme: (paths: readonly string[], problems: readonly string[]) => string): BundleFile[] {
    const secrets = [...this.#secrets];
    const paths = [...this.#files.keys()].sort();
    const files = paths.map((path) => {
      const held = this.#files.get(path) as Held;
      const text =
        held.kind === 'text'
          ? scrubText(held.text, secrets)
          : // Known secrets once more on the text, in case YAML quoting left one whole; not the
            // patterns, which would take `password: "<redacted>: 8 bytes"` for a password.
            scrubKnown(`${serialized(scrubDeep(held.value, secrets), 'yaml')}\n`, secrets);
      return { path, text };
    });
    const problems = this.#problems.map((problem) => scrubText(problem, secrets));
    return [{ path: 'README.txt', text: scrubText(readme(paths, problems), secrets) }, ...files];
  }
}

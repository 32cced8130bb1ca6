// What keeps secrets out of a support bundle. Three layers, because a secret
// can reach a bundle by three roads:
// - a Secret object: its data values are replaced by their size (the keys
//   stay, so a missing key still shows), and kubectl's last-applied
//   annotation, which holds the data again, is dropped;
// - a field of any object whose name says it holds a secret (`password`,
//   `privateKey`, `token`, an env var `X_PASSWORD`, …), a password in a URL
//   (`postgres://user:pw@host`), `password=…` in a line of text, and the same
//   inside a string that holds a JSON document (an engine config);
// - the values of the Secrets the bundle read, wherever else they occur (a
//   log line, an Event's message), as they are and base64-, URL- and
//   JSON-encoded.
export const redacted = '<redacted>';

/** Names of fields and variables whose values are secrets. */
const secretName =
  /(?:password|passwd|passphrase|secret|token|private[-_]?key|access[-_]?key|api[-_]?key|credentials?)$/i;

export function isSecretName(name: string): boolean {
  return secretName.test(name);
}

/** The password of `scheme://user:password@`. */
const urlPassword = /([a-z][a-z0-9+.-]*:\/\/[^\s:@/]*:)([^\s@/]+)@/gi;
/** `password=x`, `password: x`, `"password":"x"` and the like, in free text. */
const assignedSecret =
  /((?:password|passwd|passphrase|secret|token|private[-_]?key|access[-_]?key|api[-_]?key)["']?\s*[:=]\s*)("(?:[^"\\]|\\.)*"|'[^']*'|[^\s,;&}"']+)/gi;

/** Text with URL passwords and assigned secrets replaced. */
export function redactPatterns(text: string): string {
  return text
    .replace(urlPassword, `$1${redacted}@`)
    .replace(assignedSecret, (_, prefix: string, value: string) =>
      value.startsWith('"')
        ? `${prefix}"${redacted}"`
        : value.startsWith("'")
          ? `${prefix}'${redacted}'`
          : `${prefix}${redacted}`,
    );
}

function parsedJsonObject(text: string): object | undefined {
  const trimmed = text.trim();
  if (!trimmed.startsWith('{') && !trimmed.startsWith('[')) return undefined;
  try {
    const parsed: unknown = JSON.parse(trimmed);
    return typeof parsed === 'object' && parsed !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function redactValue(value: unknown, key: string | undefined): unknown {
  if (typeof value === 'string') {
    if (key !== undefined && value !== '' && isSecretName(key)) return redacted;
    const document = parsedJsonObject(value);
    return document === undefined ? redactPatterns(value) : JSON.stringify(redactValue(document, undefined));
  }
  if (Array.isArray(value)) return value.map((item) => redactValue(item, undefined));
  if (typeof value !== 'object' || value === null) return value;
  const record = value as Record<string, unknown>;
  // An env var, a Secret key reference's neighbour: { name: DB_PASSWORD, value: … }.
  const namedSecret = typeof record.name === 'string' && isSecretName(record.name);
  return Object.fromEntries(
    Object.entries(record)
      // Who wrote which field: noise in a bundle.
      .filter(([field]) => field !== 'managedFields')
      .map(([field, inner]) => {
        // Label values are short names, and `tributary.dev/peer-secret: "true"` must stay readable.
        if (field === 'labels') return [field, inner];
        if (namedSecret && field === 'value' && typeof inner === 'string') return [field, redacted];
        return [field, redactValue(inner, field)];
      }),
  );
}

/**
 * An object as plain JSON (a typed client model's dates become strings) with
 * its secret-looking fields redacted. A Secret's data goes through `redactSecret`.
 */
export function redactObject(object: unknown): unknown {
  return redactValue(JSON.parse(JSON.stringify(object ?? null)), undefined);
}

const lastAppliedAnnotation = 'kubectl.kubernetes.io/last-applied-configuration';

interface SecretLike {
  readonly metadata?:
    | {
        readonly annotations?: Readonly<Record<string, string>> | undefined;
        readonly labels?: Readonly<Record<string, string>> | undefined;
      }
    | undefined;
  readonly data?: Readonly<Record<string, string>> | undefined;
  readonly stringData?: Readonly<Record<string, string>> | undefined;
}

/** The values a last-applied configuration of a Secret holds: its data (base64) and stringData. */
function lastAppliedValues(lastApplied: string): string[] {
  const document = parsedJsonObject(lastApplied) as SecretLike | undefined;
  if (document === undefined) return [lastApplied];
  return [
    ...Object.values(document.data ?? {}).flatMap((value) => [
      value,
      Buffer.from(value, 'base64').toString('utf8'),
    ]),
    ...Object.values(document.stringData ?? {}),
  ];
}

/**
 * A Secret with its values replaced by their sizes (the rest redacted as any
 * object), and the values themselves, decoded, to scrub from everything else.
 */
export function redactSecret(secret: SecretLike): { object: unknown; values: string[] } {
  const values: string[] = [];
  const sizes = (data: Readonly<Record<string, string>> | undefined, encoded: boolean) =>
    data === undefined
      ? undefined
      : Object.fromEntries(
          Object.entries(data).map(([key, value]) => {
            const decoded = encoded ? Buffer.from(value, 'base64').toString('utf8') : value;
            values.push(decoded);
            if (encoded) values.push(value);
            return [key, `${redacted}: ${Buffer.byteLength(decoded)} bytes`];
          }),
        );
  const { [lastAppliedAnnotation]: lastApplied, ...annotations } = secret.metadata?.annotations ?? {};
  if (lastApplied !== undefined) values.push(...lastAppliedValues(lastApplied));
  const data = sizes(secret.data, true);
  const stringData = sizes(secret.stringData, false);
  const {
    data: _data,
    stringData: _stringData,
    ...rest
  } = JSON.parse(JSON.stringify(secret)) as Record<string, unknown>;
  const metadata = { ...(rest.metadata as Record<string, unknown> | undefined) };
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  else delete metadata.annotations;
  return {
    object: {
      ...(redactObject({ ...rest, metadata }) as Record<string, unknown>),
      ...(data === undefined ? {} : { data }),
      ...(stringData === undefined ? {} : { stringData }),
    },
    values,
  };
}

/**
 * The strings to scrub for a secret value: the value, its encodings, and the
 * secrets inside it when it is a document (an engine config's passwords, a URL's password).
 */
export function secretForms(value: string): string[] {
  const forms = new Set<string>([value]);
  const inner: string[] = [];
  const document = parsedJsonObject(value);
  if (document !== undefined) collectSecretLeaves(document, undefined, inner);
  for (const match of value.matchAll(urlPassword)) inner.push(match[2] ?? '');
  for (const candidate of [value, ...inner]) {
    forms.add(candidate);
    forms.add(Buffer.from(candidate).toString('base64'));
    forms.add(encodeURIComponent(candidate));
    forms.add(JSON.stringify(candidate).slice(1, -1));
    // A URL's password is percent-encoded in the URL: the decoded form too.
    try {
      forms.add(decodeURIComponent(candidate));
    } catch {
      // Not percent-encoded.
    }
  }
  return [...forms];
}

function collectSecretLeaves(value: unknown, key: string | undefined, into: string[]): void {
  if (typeof value === 'string') {
    if (key !== undefined && isSecretName(key)) into.push(value);
    for (const match of value.matchAll(urlPassword)) into.push(match[2] ?? '');
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  for (const [field, inner] of Object.entries(value))
    collectSecretLeaves(inner, Array.isArray(value) ? key : field, into);
}

/** Secrets shorter than this are not scrubbed from free text: they would match everywhere, and say nothing alone. */
export const shortestScrubbedSecret = 4;

/** Removes every occurrence of the known secret strings, longest first. */
export function scrubKnown(text: string, secrets: readonly string[]): string {
  let scrubbed = text;
  const ordered = [...new Set(secrets)]
    .filter((secret) => secret.length >= shortestScrubbedSecret)
    .sort((a, b) => b.length - a.length);
  for (const secret of ordered) scrubbed = scrubbed.replaceAll(secret, redacted);
  return scrubbed;
}

/** Free text (a log, a message): the known secrets, then passwords in URLs and assigned secrets. */
export function scrubText(text: string, secrets: readonly string[]): string {
  return redactPatterns(scrubKnown(text, secrets));
}

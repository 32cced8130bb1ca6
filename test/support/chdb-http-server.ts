// Test-only HTTP front over chdb (an in-process build of current ClickHouse), so
// the connector and the tests talk to "modern ClickHouse" through the official
// @clickhouse/client exactly as they would to a real server. Started in the
// background by scripts/testenv/clickhouse.sh on 127.0.0.1 (TESTENV_CHDB_HTTP_PORT);
// run by hand with:
//   node test/support/chdb-http-server.ts --port 18124 --data DIR [--tmp DIR] [--pid-file FILE]
//
// How it works
// - One chdb Session over --data (.testenv/chdb/data): databases and tables live
//   on disk and persist across requests and restarts. chdb binds one session per
//   process and runs one statement at a time on it, so requests are SERIALISED
//   (a queue): one slow query delays every other request.
// - A request is handled like ClickHouse's HTTP interface does: the SQL is the
//   `query` URL parameter followed by the request body, or the body alone. URL
//   parameters `database`, `default_format` (else TabSeparated) and `query_id`
//   (echoed back) are honoured; the other URL parameters are ClickHouse
//   settings, applied with SET for that request only and reset afterwards
//   (SET name = DEFAULT); HTTP-layer parameters (user, password, session_id,
//   wait_end_of_query, ...) are ignored.
// - `param_<name>` values fill {name:Type} placeholders the way the server binds
//   them: Identifier becomes a backquoted name, String-like types a literal of
//   the unescaped value, any other type
//   CAST((SELECT x FROM format(TabSeparated, 'x Type', 'value')) AS Type), which
//   parses the value text with the server's escaped-format rules (arrays, maps,
//   tuples, Date objects sent as Unix timestamps, NULL as \N).
// - `INSERT ... FORMAT X` whose data is in the body (how the client's insert()
//   sends it, or an exec() body holding the statement and then the data) is
//   written to a temporary file and run as `INSERT ... FROM INFILE 'tmp' FORMAT X`,
//   so every input format chdb knows works, binary ones included (RowBinary,
//   RowBinaryWithNamesAndTypes, Native, Parquet, ...), and the summary's
//   written_rows is exact. An INSERT with an empty body inserts nothing.
// - Output is whatever chdb renders in the query's FORMAT clause or the default
//   format: JSON, JSONEachRow, JSONCompactEachRow, CSV, TabSeparated and the
//   binary ones all come back byte for byte. The whole result is buffered
//   before it is sent (no streaming, no progress headers).
// - Compression: request bodies with Content-Encoding gzip, deflate, br or zstd
//   are decompressed; with `enable_http_compression=1` the response is compressed
//   with the first of those codecs named in Accept-Encoding. So the client works
//   with `compression: { request: true, response: true }` as well as with both off.
//   ClickHouse's own block compression (`compress=1` / `decompress=1`) is refused.
// - GET /ping, GET / (without a query) and GET /replicas_status answer "Ok.".
// - Errors look like ClickHouse's: the engine's `Code: N. DB::Exception: ...
//   (NAME) (version V)` text, the X-ClickHouse-Exception-Code header, and the
//   status ClickHouse uses for the common codes (400 syntax/bad arguments, 404
//   unknown table/database/function/type, 403 read-only/access, else 500), so
//   @clickhouse/client raises a ClickHouseError with code and type.
// Not supported / different from a real server
// - No authentication or users: any credentials are accepted; it listens on
//   loopback only. No GRANT/CREATE USER semantics beyond what chdb does itself.
// - One shared session: SET, USE, temporary tables and CREATE TEMPORARY TABLE
//   inside a query text leak into later requests (session_id is ignored; the
//   URL's settings and database are reset per request). Multi-statement bodies
//   are accepted (a real server refuses them). GET does not imply readonly, and
//   the `readonly` URL setting is ignored.
// - No query cancellation (KILL QUERY, client abort) and no timeouts: a request
//   runs to completion. No multipart (use_multipart_params) bodies, no external
//   tables, no progress headers, no session_timeout, no streaming of results.
// - The engine runs with clickhouse-local's profile (e.g. implicit_select=1, so
//   a bare `1 + 1` is a query); unknown paths answer 400 where a server says 404.
import { randomUUID } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import zlib from 'node:zlib';
import { version as chdbVersion, Session } from 'chdb';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '18124' },
    host: { type: 'string', default: '127.0.0.1' },
    data: { type: 'string' },
    tmp: { type: 'string' },
    'pid-file': { type: 'string' },
  },
});
if (args.data === undefined) {
  console.error('chdb-http-server: --data DIR is required');
  process.exit(2);
}
const dataDir = resolve(args.data);
const tmpDir = resolve(args.tmp ?? join(dataDir, '..', 'tmp'));
mkdirSync(dataDir, { recursive: true });
mkdirSync(tmpDir, { recursive: true });

const session = new Session(dataDir, { connectionArgs: ['--async_load_databases=0'] });
const engineVersion = (await session.queryAsync('SELECT version()', { format: 'TabSeparated' }))
  .text()
  .trim();
const serverTimezone = (await session.queryAsync('SELECT timezone()', { format: 'TabSeparated' }))
  .text()
  .trim();

/** URL parameters of the HTTP layer that are not settings and that this front ignores. */
const IGNORED_PARAMS = new Set([
  'user',
  'password',
  'quota_key',
  'session_id',
  'session_timeout',
  'session_check',
  'buffer_size',
  'wait_end_of_query',
  'stacktrace',
  'role',
  'readonly',
  'send_progress_in_http_headers',
  'http_headers_progress_interval_ms',
  'http_response_buffer_size',
  'http_wait_end_of_query',
  'http_zlib_compression_level',
  'http_native_compression_disable_checksumming_on_decompress',
  'http_write_exception_in_output_format',
  'http_response_headers',
  'cancel_http_readonly_queries_on_client_close',
  'add_http_cors_header',
  'output_format_parallel_formatting',
]);

const STATUS_BY_CODE: Readonly<Record<number, number>> = {
  6: 400, // CANNOT_PARSE_TEXT
  26: 400, // CANNOT_PARSE_QUOTED_STRING
  27: 400, // CANNOT_PARSE_INPUT_ASSERTION_FAILED
  36: 400, // BAD_ARGUMENTS
  41: 400, // CANNOT_PARSE_DATETIME
  43: 400, // ILLEGAL_TYPE_OF_ARGUMENT
  46: 404, // UNKNOWN_FUNCTION
  47: 400, // UNKNOWN_IDENTIFIER
  50: 404, // UNKNOWN_TYPE
  60: 404, // UNKNOWN_TABLE
  62: 400, // SYNTAX_ERROR
  73: 400, // UNKNOWN_FORMAT
  81: 404, // UNKNOWN_DATABASE
  115: 400, // UNKNOWN_SETTING
  117: 400, // INCORRECT_DATA
  164: 403, // READONLY
  497: 403, // ACCESS_DENIED
};

class HttpFrontError extends Error {
  readonly code: number;
  readonly type: string;
  constructor(code: number, type: string, message: string) {
    super(message);
    this.code = code;
    this.type = type;
  }
}

// ------------------------------------------------------------------ request queue

let queue: Promise<unknown> = Promise.resolve();
/** Runs `task` after every earlier one settled: chdb gets one statement at a time. */
function serialised<T>(task: () => Promise<T>): Promise<T> {
  const run = queue.then(task, task);
  queue = run.catch(() => undefined);
  return run;
}

// ------------------------------------------------------------------ helpers

function quoteIdentifier(name: string): string {
  return `\`${name.replaceAll('\\', '\\\\').replaceAll('`', '\\`')}\``;
}

function quoteString(value: string): string {
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

const ESCAPES: Readonly<Record<string, string>> = {
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  0: '\0',
  a: '\x07',
  v: '\v',
  e: '\x1b',
};

/** Reverses ClickHouse's Escaped (TSV) text format, as used for `param_*` values. */
function unescapeEscaped(text: string): string {
  return text.replace(/\\(x[0-9A-Fa-f]{2}|[\s\S])/g, (_, seq: string) => {
    if (seq.length === 3) return String.fromCharCode(Number.parseInt(seq.slice(1), 16));
    return ESCAPES[seq] ?? seq;
  });
}

const PLACEHOLDER = /\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*((?:[^{}'"]|'(?:[^'\\]|\\.)*')+?)\s*\}/g;

/** Replaces {name:Type} placeholders whose `param_name` was given, the way the server binds them. */
function substituteParams(sql: string, params: Readonly<Record<string, string>>): string {
  return sql.replace(PLACEHOLDER, (whole: string, name: string, rawType: string) => {
    const value = params[name];
    if (value === undefined) return whole;
    const type = rawType.trim();
    if (type === 'Identifier') return quoteIdentifier(unescapeEscaped(value));
    if (/^Nullable\s*\(/i.test(type) && value === '\\N') return `CAST(NULL AS ${type})`;
    let inner = type;
    for (let m = /^(?:Nullable|LowCardinality)\s*\(([\s\S]*)\)$/i.exec(inner); m?.[1]; ) {
      inner = m[1].trim();
      m = /^(?:Nullable|LowCardinality)\s*\(([\s\S]*)\)$/i.exec(inner);
    }
    if (/^(?:String|FixedString\s*\()/i.test(inner))
      return `CAST(${quoteString(unescapeEscaped(value))} AS ${type})`;
    return `CAST((SELECT x FROM format(TabSeparated, ${quoteString(`x ${type}`)}, ${quoteString(value)})) AS ${type})`;
  });
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  const encoding = (req.headers['content-encoding'] ?? '').trim().toLowerCase();
  try {
    switch (encoding) {
      case '':
      case 'identity':
        return raw;
      case 'gzip':
      case 'x-gzip':
        return zlib.gunzipSync(raw);
      case 'deflate':
        return zlib.inflateSync(raw);
      case 'br':
        return zlib.brotliDecompressSync(raw);
      case 'zstd':
        return zlib.zstdDecompressSync(raw);
      default:
        throw new HttpFrontError(
          36,
          'BAD_ARGUMENTS',
          `Unknown Content-Encoding of the request body: ${encoding}`,
        );
    }
  } catch (error) {
    if (error instanceof HttpFrontError) throw error;
    throw new HttpFrontError(
      354,
      'CANNOT_DECOMPRESS',
      `Cannot decompress the ${encoding} request body: ${(error as Error).message}`,
    );
  }
}

type Codec = 'gzip' | 'deflate' | 'br' | 'zstd';

function responseCodec(req: IncomingMessage, enabled: boolean): Codec | undefined {
  if (!enabled) return undefined;
  const accepted = String(req.headers['accept-encoding'] ?? '')
    .split(',')
    .map((part) => part.split(';')[0]?.trim().toLowerCase() ?? '');
  return accepted.find((codec): codec is Codec => ['gzip', 'deflate', 'br', 'zstd'].includes(codec));
}

function compress(codec: Codec | undefined, body: Buffer): Buffer {
  switch (codec) {
    case undefined:
      return body;
    case 'gzip':
      return zlib.gzipSync(body);
    case 'deflate':
      return zlib.deflateSync(body);
    case 'br':
      return zlib.brotliCompressSync(body);
    case 'zstd':
      return zlib.zstdCompressSync(body);
  }
}

function contentType(format: string): string {
  const f = format.toLowerCase();
  if (f.startsWith('json') && f.includes('eachrow')) return 'application/x-ndjson; charset=UTF-8';
  if (f.startsWith('json')) return 'application/json; charset=UTF-8';
  if (f.startsWith('csv')) return 'text/csv; charset=UTF-8; header=absent';
  if (f.startsWith('tsv') || f.startsWith('tabseparated')) return 'text/tab-separated-values; charset=UTF-8';
  if (
    ['rowbinary', 'native', 'parquet', 'arrow', 'arrowstream', 'orc', 'avro', 'msgpack'].some((b) =>
      f.startsWith(b),
    )
  )
    return 'application/octet-stream';
  return 'text/plain; charset=UTF-8';
}

const TRAILING_FORMAT = /\bFORMAT\s+([A-Za-z][A-Za-z0-9_]*)\s*;?\s*$/i;
const LEADING_INSERT = /^\s*(?:\/\*[\s\S]*?\*\/\s*|--[^\n]*\n\s*)*INSERT\s+INTO\b/i;

/** Rewrites `INSERT INTO t [(cols)] [SETTINGS ...] FORMAT X` to read its data from `file`. */
function insertFromFile(insertQuery: string, file: string): string | undefined {
  const format = TRAILING_FORMAT.exec(insertQuery);
  if (!format?.[1]) return undefined;
  let head = insertQuery.slice(0, format.index);
  if (/\b(?:SELECT|INFILE|VALUES|WITH)\b/i.test(head)) return undefined;
  const settings = /\bSETTINGS\b(?![\s\S]*\bSETTINGS\b)/i.exec(head);
  const infile = `FROM INFILE ${quoteString(file)} `;
  head =
    settings === null
      ? `${head.trimEnd()} ${infile}`
      : `${head.slice(0, settings.index)}${infile}${head.slice(settings.index)}`;
  return `${head}FORMAT ${format[1]}`;
}

/** Splits a body holding `INSERT ... FORMAT X` then the data at the first line break (or space) after X. */
function splitInlineInsert(body: Buffer): { query: string; data: Buffer } | undefined {
  const head = body.subarray(0, 256 * 1024).toString('latin1');
  if (!LEADING_INSERT.test(head)) return undefined;
  const match = /\bFORMAT\s+([A-Za-z][A-Za-z0-9_]*)(?=\s|$)/i.exec(head);
  if (!match) return undefined;
  let end = match.index + match[0].length;
  while (head[end] === ' ' || head[end] === '\t') end += 1;
  if (head[end] === '\r' && head[end + 1] === '\n') end += 2;
  else if (head[end] === '\n') end += 1;
  const query = body.subarray(0, match.index + match[0].length).toString('utf8');
  if (/^values$/i.test(match[1] ?? '') || /\b(?:SELECT|INFILE|VALUES|WITH)\b/i.test(query)) return undefined;
  return { query, data: body.subarray(end) };
}

function clickhouseCodeOf(error: unknown): number {
  if (error instanceof HttpFrontError) return error.code;
  const code = (error as { clickhouseCode?: unknown }).clickhouseCode;
  if (typeof code === 'number') return code;
  const parsed = /Code: (\d+)/.exec(String((error as Error)?.message ?? error));
  return parsed?.[1] ? Number(parsed[1]) : 1001;
}

function exceptionText(error: unknown): string {
  if (error instanceof HttpFrontError) {
    return `Code: ${error.code}. DB::Exception: ${error.message}. (${error.type}) (version ${engineVersion})`;
  }
  const message = String((error as Error)?.message ?? error).trim();
  const text = /^Code: \d+/.test(message)
    ? message
    : `Code: 1001. DB::Exception: ${message}. (STD_EXCEPTION)`;
  return /\(version [^)]*\)\s*$/.test(text) ? text : `${text} (version ${engineVersion})`;
}

// ------------------------------------------------------------------ handler

interface Summary {
  read_rows: string;
  read_bytes: string;
  written_rows: string;
  written_bytes: string;
  total_rows_to_read: string;
  result_rows: string;
  result_bytes: string;
  elapsed_ns: string;
}

interface Outcome {
  body: Buffer;
  format: string;
  summary: Summary;
}

async function runQuery(
  sql: string,
  database: string,
  settings: ReadonlyArray<readonly [string, string]>,
  params: Record<string, string>,
  defaultFormat: string,
  inserting: boolean,
): Promise<Outcome> {
  await session.queryAsync(`USE ${quoteIdentifier(database)}`);
  const applied: string[] = [];
  try {
    for (const [name, value] of settings) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        throw new HttpFrontError(115, 'UNKNOWN_SETTING', `Invalid setting name ${JSON.stringify(name)}`);
      }
      await session.queryAsync(`SET ${name} = ${quoteString(value)}`);
      applied.push(name);
    }
    const bound = Object.keys(params).length > 0 ? substituteParams(sql, params) : sql;
    const result = await session.queryAsync(bound, { format: defaultFormat });
    const bytes = result.bytes();
    const body = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const rows = String(result.rowsRead);
    const read = String(result.bytesRead);
    return {
      body,
      format: inserting ? defaultFormat : (TRAILING_FORMAT.exec(sql)?.[1] ?? defaultFormat),
      summary: {
        read_rows: rows,
        read_bytes: read,
        written_rows: inserting ? rows : '0',
        written_bytes: inserting ? read : '0',
        total_rows_to_read: '0',
        result_rows: inserting ? '0' : rows,
        result_bytes: inserting ? '0' : String(body.byteLength),
        elapsed_ns: String(Math.round(result.elapsed * 1e9)),
      },
    };
  } finally {
    for (const name of applied) {
      await session.queryAsync(`SET ${name} = DEFAULT`).catch(() => undefined);
    }
  }
}

async function handleQuery(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
  const body = await readBody(req);
  const queryId = url.searchParams.get('query_id') || randomUUID();
  let database = 'default';
  let defaultFormat = 'TabSeparated';
  let urlQuery: string | undefined;
  let compressResponse = false;
  const settings: Array<readonly [string, string]> = [];
  const params: Record<string, string> = {};
  for (const [key, value] of url.searchParams) {
    if (key === 'query') urlQuery = value;
    else if (key === 'database') database = value || 'default';
    else if (key === 'default_format') defaultFormat = value;
    else if (key === 'query_id' || IGNORED_PARAMS.has(key)) continue;
    else if (key.startsWith('param_')) params[key.slice('param_'.length)] = value;
    else if (key === 'enable_http_compression') compressResponse = value === '1' || value === 'true';
    else if ((key === 'compress' || key === 'decompress') && value !== '0') {
      throw new HttpFrontError(
        36,
        'BAD_ARGUMENTS',
        `${key}=1 (ClickHouse block compression) is not supported`,
      );
    } else if (key !== 'compress' && key !== 'decompress') settings.push([key, value]);
  }
  const codec = responseCodec(req, compressResponse);

  let sql: string;
  let data: Buffer | undefined;
  if (urlQuery !== undefined && LEADING_INSERT.test(urlQuery) && TRAILING_FORMAT.test(urlQuery)) {
    sql = urlQuery;
    data = body;
  } else if (urlQuery !== undefined) {
    sql = body.length > 0 ? `${urlQuery}\n${body.toString('utf8')}` : urlQuery;
  } else {
    const inline = splitInlineInsert(body);
    if (inline) ({ query: sql, data } = inline);
    else sql = body.toString('utf8');
  }
  if (sql.trim() === '') throw new HttpFrontError(62, 'SYNTAX_ERROR', 'Empty query');

  let file: string | undefined;
  if (data !== undefined) {
    const candidate = join(tmpDir, `insert-${randomUUID()}.data`);
    const rewritten = insertFromFile(sql, candidate);
    if (rewritten !== undefined) {
      await writeFile(candidate, data);
      file = candidate;
      sql = rewritten;
    } else {
      sql = `${sql}\n${data.toString('utf8')}`;
    }
  }

  let outcome: Outcome;
  try {
    outcome = await serialised(() =>
      runQuery(sql, database, settings, params, defaultFormat, file !== undefined),
    );
  } finally {
    if (file !== undefined) rmSync(file, { force: true });
  }
  const payload = compress(codec, outcome.body);
  res.writeHead(200, {
    'Content-Type': contentType(outcome.format),
    'Content-Length': payload.byteLength,
    ...(codec === undefined ? {} : { 'Content-Encoding': codec }),
    'X-ClickHouse-Server-Display-Name': 'chdb-http-server',
    'X-ClickHouse-Query-Id': queryId,
    'X-ClickHouse-Format': outcome.format,
    'X-ClickHouse-Timezone': serverTimezone,
    'X-ClickHouse-Summary': JSON.stringify(outcome.summary),
  });
  res.end(payload);
}

function sendError(req: IncomingMessage, res: ServerResponse, error: unknown): void {
  const code = clickhouseCodeOf(error);
  const text = `${exceptionText(error)}\n`;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  const enabled = ['1', 'true'].includes(url.searchParams.get('enable_http_compression') ?? '');
  const codec = responseCodec(req, enabled);
  const payload = compress(codec, Buffer.from(text, 'utf8'));
  res.writeHead(STATUS_BY_CODE[code] ?? 500, {
    'Content-Type': 'text/plain; charset=UTF-8',
    'Content-Length': payload.byteLength,
    ...(codec === undefined ? {} : { 'Content-Encoding': codec }),
    'X-ClickHouse-Server-Display-Name': 'chdb-http-server',
    'X-ClickHouse-Exception-Code': String(code),
  });
  res.end(payload);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    'Content-Type': 'text/plain; charset=UTF-8',
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  const method = req.method ?? 'GET';
  const isRead = method === 'GET' || method === 'HEAD';
  if (isRead && (url.pathname === '/ping' || url.pathname === '/replicas_status')) {
    req.resume();
    sendText(res, 200, 'Ok.\n');
    return;
  }
  if (isRead && url.pathname === '/' && !url.searchParams.has('query')) {
    req.resume();
    sendText(res, 200, 'Ok.\n');
    return;
  }
  if (url.pathname !== '/' || (method !== 'GET' && method !== 'POST')) {
    req.resume();
    sendError(
      req,
      res,
      new HttpFrontError(36, 'BAD_ARGUMENTS', `There is no handle ${method} ${url.pathname}`),
    );
    return;
  }
  handleQuery(req, res, url).catch((error: unknown) => sendError(req, res, error));
});
server.keepAliveTimeout = 10_000;

let stopping = false;
function stop(signal: string): void {
  if (stopping) return;
  stopping = true;
  console.log(`chdb-http-server: ${signal}, stopping`);
  server.close();
  server.closeAllConnections();
  const deadline = setTimeout(() => process.exit(1), 5_000);
  queue.finally(() => {
    clearTimeout(deadline);
    session.close();
    if (args['pid-file'] !== undefined) rmSync(args['pid-file'], { force: true });
    process.exit(0);
  });
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));

server.listen(Number(args.port), args.host, () => {
  if (args['pid-file'] !== undefined) writeFileSync(args['pid-file'], `${process.pid}\n`);
  console.log(
    `chdb-http-server listening on http://${args.host}:${args.port}, engine ${engineVersion} (chdb ${chdbVersion().chdb}), data ${dataDir}`,
  );
});

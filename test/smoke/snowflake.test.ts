// Smoke test of the Snowflake emulator that scripts/testenv/snowflake.sh starts
// (fakesnow behind a JSON-result adapter), through the real Node snowflake-sdk.
// Only what was seen to work is asserted here; what does not work is listed in
// docs/snowflake-emulator.md.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import snowflakeSdk, {
  type Binds,
  type Connection,
  type ConnectionOptions,
  type RowStatement,
  type SnowflakeError,
  type StatementOption,
} from 'snowflake-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { snowflake } from '../support/testenv.ts';

// Every session shares the emulator's one in-memory DuckDB: a database of our own.
const database = `SMOKE_${randomBytes(4).toString('hex').toUpperCase()}`;
const schema = 'REPL';

// Without a logger of its own the driver writes snowflake.log into the working directory.
const quiet = (): void => {};
snowflakeSdk.configure({
  customLogger: { error: quiet, warn: quiet, info: quiet, debug: quiet, trace: quiet },
  disableOCSPChecks: true,
});

function options(extra: ConnectionOptions = {}): ConnectionOptions {
  return {
    accessUrl: snowflake.url,
    account: 'tributary',
    username: 'tributary',
    password: 'unchecked',
    sfRetryMaxLoginRetries: 1,
    ...extra,
  };
}

async function connect(extra: ConnectionOptions = {}): Promise<Connection> {
  return snowflakeSdk.createConnection(options(extra)).connectAsync();
}

function destroy(connection: Connection): Promise<void> {
  return new Promise((resolve, reject) => {
    connection.destroy((error) => (error ? reject(error) : resolve()));
  });
}

type Row = Record<string, unknown>;

interface Executed {
  readonly rows: Row[];
  readonly statement: RowStatement;
}

// Rejects rather than waits forever: without the adapter the driver never calls
// back for DML (fakesnow leaves out `returned`), and a hang says nothing.
function execute(
  connection: Connection,
  sqlText: string,
  binds?: Binds,
  extra: Omit<StatementOption, 'sqlText' | 'binds' | 'complete'> = {},
): Promise<Executed> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within 20 s to: ${sqlText}`)), 20_000);
    connection.execute({
      ...extra,
      sqlText,
      ...(binds === undefined ? {} : { binds }),
      complete: (error, statement, rows) => {
        clearTimeout(timer);
        if (error) reject(error);
        else resolve({ rows: rows ?? [], statement });
      },
    });
  });
}

async function failure(promise: Promise<unknown>): Promise<SnowflakeError> {
  try {
    await promise;
  } catch (error) {
    return error as SnowflakeError;
  }
  throw new Error('expected the statement to fail');
}

/** The Date the driver returns for DATE and TIMESTAMP_* carries nanoseconds too. */
interface SfDate extends Date {
  getNanoSeconds(): number;
}
function isSfDate(value: unknown): value is SfDate {
  return value instanceof Date && typeof (value as Partial<SfDate>).getNanoSeconds === 'function';
}

describe('Snowflake emulator (fakesnow) through the Node snowflake-sdk', () => {
  let conn: Connection;
  const scratch = mkdtempSync(join(tmpdir(), 'tributary-snowflake-'));

  beforeAll(async () => {
    conn = await connect();
  });

  afterAll(async () => {
    rmSync(scratch, { recursive: true, force: true });
    if (conn?.isUp()) {
      // fakesnow cannot parse DROP DATABASE; dropping the schema frees the tables.
      await execute(conn, `DROP SCHEMA IF EXISTS ${database}.${schema} CASCADE`);
      await destroy(conn);
    }
  });

  it('logs in with a password and creates a database, a schema and tables', async () => {
    expect(conn.isUp()).toBe(true);
    const created = await execute(conn, `CREATE DATABASE ${database}`);
    expect(created.rows).toEqual([{ status: `Database ${database} successfully created.` }]);
    await execute(conn, `CREATE SCHEMA ${database}.${schema}`);
    await execute(conn, `USE SCHEMA ${database}.${schema}`);
    const where = await execute(conn, 'SELECT current_database() AS db, current_schema() AS sch');
    expect(where.rows).toEqual([{ DB: database, SCH: schema }]);

    const table = await execute(
      conn,
      `CREATE TABLE typed (
         id NUMBER(38,0), name VARCHAR, amount NUMBER(12,2), ratio FLOAT, ok BOOLEAN,
         day DATE, ts TIMESTAMP_NTZ, ts_tz TIMESTAMP_TZ, clock TIME, doc VARIANT, raw BINARY)`,
    );
    expect(table.rows).toEqual([{ status: 'Table TYPED successfully created.' }]);
    const columns = await execute(conn, 'DESCRIBE TABLE typed');
    expect(columns.rows.map((row) => [row.name, row.type])).toEqual([
      ['ID', 'NUMBER(38,0)'],
      ['NAME', 'VARCHAR(16777216)'],
      ['AMOUNT', 'NUMBER(12,2)'],
      ['RATIO', 'FLOAT'],
      ['OK', 'BOOLEAN'],
      ['DAY', 'DATE'],
      ['TS', 'TIMESTAMP_NTZ(9)'],
      ['TS_TZ', 'TIMESTAMP_TZ(9)'],
      ['CLOCK', 'TIME(9)'],
      ['DOC', 'VARIANT'],
      ['RAW', 'BINARY(8388608)'],
    ]);
  });

  it('inserts with positional binds and reads numbers, strings, dates, timestamps and NULL back', async () => {
    const inserted = await execute(
      conn,
      `INSERT INTO typed (id, name, amount, ratio, ok, day, ts, ts_tz, clock, doc, raw)
       SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, PARSE_JSON(?), TO_BINARY(?, 'HEX')`,
      [
        '9007199254740993', // past Number.MAX_SAFE_INTEGER, so bound as text
        'héllo, "world"',
        '12.34',
        1.25,
        true,
        '2024-01-02',
        '2024-01-02 03:04:05.123456',
        '2024-01-02T03:04:05+02:00',
        '12:34:56.789',
        '{"k":[1,null,"x"]}',
        'CAFE',
      ],
    );
    expect(inserted.rows).toEqual([{ 'number of rows inserted': 1 }]);
    expect(inserted.statement.getNumUpdatedRows()).toBe(1);

    // The driver binds a JS Date as its ISO text (toJSON), though the sdk's Bind type leaves Date out.
    const when: unknown = new Date('2024-05-06T07:08:09.123Z');
    await execute(conn, 'INSERT INTO typed (id, name, ts) VALUES (?, ?, ?)', [2, null, when as string]);

    const { rows, statement } = await execute(conn, 'SELECT * FROM typed ORDER BY id');
    expect(statement.getColumns()?.map((column) => column.getType())).toEqual([
      'fixed',
      'text',
      'fixed',
      'real',
      'boolean',
      'date',
      'timestamp_ntz',
      'timestamp_tz',
      'time',
      'variant',
      'binary',
    ]);
    expect(rows).toHaveLength(2);
    const [second, first] = rows;

    expect(second).toMatchObject({
      ID: 2,
      NAME: null,
      AMOUNT: null,
      RATIO: null,
      OK: null,
      DAY: null,
      TS_TZ: null,
      CLOCK: 'NULL', // the driver turns TIME into text, NULL included (toValueFromTime)
      DOC: null,
      RAW: null,
    });
    expect(isSfDate(second?.TS) && second.TS.getTime()).toBe(Date.UTC(2024, 4, 6, 7, 8, 9, 123));

    expect(first).toMatchObject({ NAME: 'héllo, "world"', AMOUNT: 12.34, RATIO: 1.25, OK: true });
    expect(first?.DOC).toEqual({ k: [1, null, 'x'] });
    expect(Buffer.isBuffer(first?.RAW) && (first.RAW as Buffer).toString('hex')).toBe('cafe');
    const day = first?.DAY;
    expect(isSfDate(day) && day.getTime()).toBe(Date.UTC(2024, 0, 2));
    const ts = first?.TS;
    expect(isSfDate(ts) && [ts.getTime(), ts.getNanoSeconds()]).toEqual([
      Date.UTC(2024, 0, 2, 3, 4, 5, 123),
      123_456_000,
    ]);
    // The instant survives; the +02:00 offset does not (fakesnow keeps TIMESTAMP_TZ in UTC).
    const tsTz = first?.TS_TZ;
    expect(isSfDate(tsTz) && tsTz.getTime()).toBe(Date.UTC(2024, 0, 2, 1, 4, 5));
    // TIME comes back as text in TIME_OUTPUT_FORMAT (Snowflake's default HH24:MI:SS): no fraction.
    expect(first?.CLOCK).toBe('12:34:56');

    // Integers past 2^53 come back exact as strings with fetchAsString.
    const big = await execute(conn, 'SELECT id FROM typed WHERE id > 2', undefined, {
      fetchAsString: ['Number'],
    });
    expect(big.rows).toEqual([{ ID: '9007199254740993' }]);
  });

  it('inserts several rows in one statement with array binds', async () => {
    await execute(conn, 'CREATE TABLE people (id NUMBER(38,0), name VARCHAR, updated_at TIMESTAMP_NTZ)');
    const batch = await execute(conn, 'INSERT INTO people (id, name, updated_at) VALUES (?, ?, ?)', [
      [1, 'ada', '2024-01-01 00:00:00'],
      [2, 'grace', '2024-01-01 00:00:00'],
      [3, null, '2024-01-01 00:00:00'],
    ]);
    expect(batch.statement.getNumUpdatedRows()).toBe(3);
    const { rows } = await execute(conn, 'SELECT id, name FROM people ORDER BY id');
    expect(rows).toEqual([
      { ID: 1, NAME: 'ada' },
      { ID: 2, NAME: 'grace' },
      { ID: 3, NAME: null },
    ]);
  });

  it('updates, deletes and merges with the affected row counts', async () => {
    const updated = await execute(conn, 'UPDATE people SET name = ? WHERE id = ?', ['nobody', 3]);
    expect(updated.rows).toEqual([{ 'number of rows updated': 1, 'number of multi-joined rows updated': 0 }]);

    await execute(conn, 'CREATE TEMPORARY TABLE people_changes (id NUMBER(38,0), name VARCHAR, op VARCHAR)');
    await execute(conn, 'INSERT INTO people_changes VALUES (?, ?, ?)', [
      [1, 'ada lovelace', 'U'],
      [2, null, 'D'],
      [4, 'edsger', 'I'],
    ]);
    const merged = await execute(
      conn,
      `MERGE INTO people t USING people_changes s ON t.id = s.id
       WHEN MATCHED AND s.op = 'D' THEN DELETE
       WHEN MATCHED THEN UPDATE SET name = s.name, updated_at = '2024-02-02 00:00:00'
       WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT (id, name, updated_at)
         VALUES (s.id, s.name, '2024-02-02 00:00:00')`,
    );
    expect(merged.rows).toEqual([
      { 'number of rows inserted': 1, 'number of rows updated': 1, 'number of rows deleted': 1 },
    ]);
    expect(merged.statement.getNumUpdatedRows()).toBe(3);

    const deleted = await execute(conn, 'DELETE FROM people WHERE id = ?', [3]);
    expect(deleted.rows).toEqual([{ 'number of rows deleted': 1 }]);

    const { rows } = await execute(conn, 'SELECT id, name FROM people ORDER BY id');
    expect(rows).toEqual([
      { ID: 1, NAME: 'ada lovelace' },
      { ID: 4, NAME: 'edsger' },
    ]);
  });

  it('rolls back an explicit transaction', async () => {
    await execute(conn, 'BEGIN');
    await execute(conn, 'INSERT INTO people (id, name) VALUES (?, ?)', [100, 'ghost']);
    await execute(conn, 'ROLLBACK');
    const { rows } = await execute(conn, 'SELECT count(*) AS n FROM people WHERE id = 100');
    expect(rows).toEqual([{ N: 0 }]);
  });

  it('streams a larger result', async () => {
    await execute(
      conn,
      "CREATE TABLE numbers AS SELECT seq4() AS n, 'row ' || seq4() AS label FROM TABLE(GENERATOR(ROWCOUNT => 5000))",
    );
    const { statement } = await execute(conn, 'SELECT n, label FROM numbers ORDER BY n', undefined, {
      streamResult: true,
    });
    const stream: Readable = statement.streamRows();
    let count = 0;
    let last: Row | undefined;
    for await (const row of stream) {
      count += 1;
      last = row as Row;
    }
    expect(count).toBe(5000);
    expect(last).toEqual({ N: 4999, LABEL: 'row 4999' });
  });

  it('uploads files with PUT and loads them with COPY INTO', async () => {
    const file = join(scratch, 'people.csv');
    writeFileSync(file, '10,"from, a stage"\n11,\n');
    await execute(conn, 'CREATE TABLE loaded (id NUMBER(38,0), name VARCHAR)');

    // The table's own stage, no compression.
    const put = await execute(conn, `PUT file://${file} @%loaded AUTO_COMPRESS = FALSE`);
    expect(put.rows).toMatchObject([{ source: 'people.csv', target: 'people.csv', status: 'UPLOADED' }]);
    // Same name again: needs OVERWRITE = TRUE here (see the doc).
    const again = await execute(conn, `PUT file://${file} @%loaded AUTO_COMPRESS = FALSE OVERWRITE = TRUE`);
    expect(again.rows).toMatchObject([{ status: 'UPLOADED' }]);
    const copied = await execute(
      conn,
      `COPY INTO loaded FROM @%loaded FILE_FORMAT = (TYPE = CSV FIELD_OPTIONALLY_ENCLOSED_BY = '"') PURGE = TRUE`,
    );
    expect(copied.rows).toMatchObject([{ file: 'people.csv', status: 'LOADED', rows_loaded: 2 }]);

    // A named stage, gzip-compressed by the driver on the way.
    await execute(conn, 'CREATE STAGE landing');
    const gz = await execute(conn, `PUT file://${file} @landing/batch1`);
    expect(gz.rows).toMatchObject([
      { target: 'people.csv.gz', targetCompression: 'GZIP', status: 'UPLOADED' },
    ]);
    const listed = await execute(conn, 'LIST @landing');
    expect(listed.rows.map((row) => row.name)).toEqual(['landing/batch1/people.csv.gz']);
    const fromNamed = await execute(
      conn,
      `COPY INTO loaded FROM @landing/batch1 FILE_FORMAT = (TYPE = CSV FIELD_OPTIONALLY_ENCLOSED_BY = '"')`,
    );
    expect(fromNamed.rows).toMatchObject([{ status: 'LOADED', rows_loaded: 2 }]);

    const { rows } = await execute(
      conn,
      'SELECT id, name, count(*) AS copies FROM loaded GROUP BY id, name ORDER BY id',
    );
    expect(rows).toEqual([
      { ID: 10, NAME: 'from, a stage', COPIES: 2 },
      { ID: 11, NAME: null, COPIES: 2 },
    ]);
  });

  it('answers SQL errors with Snowflake error codes, and unsupported SQL with an error rather than a hang', async () => {
    const missing = await failure(execute(conn, 'SELECT * FROM no_such_table'));
    expect(missing.code).toBe('002003');
    expect(missing.sqlState).toBe('42S02');

    const syntax = await failure(execute(conn, 'SELEC 1'));
    expect(syntax.code).toBe('001003');

    // fakesnow has no rowtype for DuckDB list results: a 500, turned into an error by the adapter.
    const unsupported = await failure(execute(conn, 'SELECT ARRAY_CONSTRUCT(1, 2) AS a'));
    expect(unsupported.code).toBe('261000');
    expect(unsupported.message).toContain('fakesnow: unsupported');
  });

  it('connects with key-pair (SNOWFLAKE_JWT) authentication, whose JWT the emulator does not verify', async () => {
    const { privateKey } = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    const { password: _unused, ...withoutPassword } = options();
    const jwt = await snowflakeSdk
      .createConnection({ ...withoutPassword, authenticator: 'SNOWFLAKE_JWT', privateKey, database, schema })
      .connectAsync();
    try {
      const { rows } = await execute(jwt, 'SELECT count(*) AS n FROM people');
      expect(rows).toEqual([{ N: 2 }]);
    } finally {
      await destroy(jwt);
    }
  });

  it('accepts any password: the emulator checks no credentials', async () => {
    const other = await connect({ password: `wrong-${randomBytes(4).toString('hex')}`, database, schema });
    try {
      const { rows } = await execute(other, 'SELECT count(*) AS n FROM people');
      expect(rows).toEqual([{ N: 2 }]);
    } finally {
      await destroy(other);
    }
  });
});

#!/usr/bin/env bash
# Snowflake emulator for tests: fakesnow's HTTP server (DuckDB behind Snowflake's
# REST protocol) on 127.0.0.1:$TESTENV_SNOWFLAKE_PORT, behind a small response
# adapter (below) without which the Node snowflake-sdk can log in but run nothing.
# What works and what does not: docs/snowflake-emulator.md.
#   snowflake.sh up     install (cached venv) and start; idempotent
#   snowflake.sh down   stop and remove the per-checkout state
# TESTENV_SNOWFLAKE_RAW=1 starts plain `fakesnow -s` instead, to compare.
source "$(dirname "$0")/lib.sh"

# Pinned: fakesnow's own dependency ranges are loose (pyarrow, the Python
# connector, starlette, uvicorn), and its SQL translation changes between releases.
# fakesnow 0.12.1 imports snowflake.connector.converter, which the Python
# connector 5.x no longer has (ModuleNotFoundError at start): keep it on 4.8.1.
FAKESNOW_PACKAGES=(
  'fakesnow[server]==0.12.1'
  'duckdb==2.0.0'
  'sqlglot==30.22.0'
  'pyarrow==26.0.1'
  'snowflake-connector-python==4.8.1'
  'starlette==1.10.0'
  'uvicorn==0.54.0'
)
VENV="$TESTENV_CACHE/fakesnow-venv"
STATE="$TESTENV_DATA/snowflake"
PIDFILE="$STATE/fakesnow.pid"
LOG="$STATE/fakesnow.log"
PORT="$TESTENV_SNOWFLAKE_PORT"

install_venv() {
  # The stamp holds the pinned list; a venv without a matching stamp (absent,
  # half-installed, or older pins) is rebuilt from scratch.
  local want
  want="$(printf '%s\n' "${FAKESNOW_PACKAGES[@]}")"
  if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.tributary-stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "testenv: fakesnow needs python3 >= 3.11, found: $(python3 --version 2>&1)" >&2
    return 1
  fi
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${FAKESNOW_PACKAGES[@]}" >"$TESTENV_CACHE/fakesnow-pip.log" 2>&1 || {
    echo "testenv: pip install of fakesnow failed, see $TESTENV_CACHE/fakesnow-pip.log" >&2
    tail -20 "$TESTENV_CACHE/fakesnow-pip.log" >&2
    return 1
  }
  printf '%s\n' "$want" >"$VENV/.tributary-stamp"
}

# The login endpoint answers a JSON body with a session token once the app is up.
login_ok() {
  curl -sf -m 2 -X POST -H 'Content-Type: application/json' \
    -d '{"data":{"LOGIN_NAME":"probe","PASSWORD":"probe","SESSION_PARAMETERS":{}}}' \
    "http://127.0.0.1:$PORT/session/v1/login-request" | grep -q '"token"'
}

# The adapter: fakesnow's ASGI app wrapped so that query responses come back in
# the JSON result format the Node driver reads. Kept here so that this script is
# the one file that defines the emulator; written out on every `up`.
write_adapter() {
  cat >"$STATE/server.py" <<'PYEOF'
"""fakesnow behind a response adapter for JSON-only Snowflake clients (the Node snowflake-sdk).

Written by scripts/testenv/snowflake.sh. fakesnow answers every non-DML query
with an Arrow rowset and omits `returned`; the Node driver only decodes JSON
rowsets and reads `returned` to know how many rows to hand out. This rewrites
query responses into Snowflake's JSON result format (the one the real service
sends the Node driver), and nothing else about the emulator's behaviour.
"""

import base64
import datetime
import decimal
import gzip
import json
import math
import os
import re
import sys
from urllib.parse import unquote

import pyarrow as pa
import uvicorn

# Snowflake's own default; fakesnow sends 0, which makes the Node driver try to
# stage every array binding (CREATE TEMPORARY STAGE + PUT) before inserting.
ARRAY_BINDING_THRESHOLD = 65280
# Snowflake's defaults for the session parameters that its query responses carry
# and the Node driver needs to turn dates, times and binaries into values; fakesnow
# sends only TIMEZONE.
OUTPUT_PARAMETERS = {
    "TIMESTAMP_OUTPUT_FORMAT": "YYYY-MM-DD HH24:MI:SS.FF3 TZHTZM",
    "TIMESTAMP_NTZ_OUTPUT_FORMAT": "YYYY-MM-DD HH24:MI:SS.FF3",
    "TIMESTAMP_LTZ_OUTPUT_FORMAT": "",
    "TIMESTAMP_TZ_OUTPUT_FORMAT": "",
    "DATE_OUTPUT_FORMAT": "YYYY-MM-DD",
    "TIME_OUTPUT_FORMAT": "HH24:MI:SS",
    "BINARY_OUTPUT_FORMAT": "HEX",
}
EPOCH_DATE = datetime.date(1970, 1, 1)
NANOS = 1_000_000_000


def epoch_text(nanos: int, scale: int) -> str:
    """Seconds since the epoch with `scale` fractional digits, as Snowflake's JSON rowsets carry them."""
    sign = "-" if nanos < 0 else ""
    whole, frac = divmod(abs(nanos), NANOS)
    if scale <= 0:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{frac:09d}"[: len(sign) + len(str(whole)) + 1 + scale]


def to_nanos(value: object) -> int:
    if isinstance(value, dict):
        return int(value["epoch"]) * NANOS + int(value["fraction"])
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        delta = value - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
        return (delta.days * 86400 + delta.seconds) * NANOS + delta.microseconds * 1000
    if isinstance(value, datetime.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * NANOS + value.microsecond * 1000
    return int(value)  # type: ignore[call-overload]


def json_cell(value: object, column: dict) -> str | None:
    if value is None or (isinstance(value, dict) and value.get("epoch") is None):
        return None
    kind = column["type"]
    scale = column.get("scale")
    if kind == "boolean":
        return "1" if value else "0"
    if kind == "fixed":
        return format(value, "f") if isinstance(value, decimal.Decimal) else str(int(value))  # type: ignore[call-overload]
    if kind == "real":
        number = float(value)  # type: ignore[arg-type]
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "Infinity" if number > 0 else "-Infinity"
        return repr(number)
    if kind == "date":
        return str((value - EPOCH_DATE).days)  # type: ignore[operator]
    if kind in ("time", "timestamp_ntz", "timestamp_ltz"):
        return epoch_text(to_nanos(value), 9 if scale is None else scale)
    if kind == "timestamp_tz":
        offset = value.get("timezone", 1440) if isinstance(value, dict) else 1440
        return f"{epoch_text(to_nanos(value), 9 if scale is None else scale)} {offset}"
    if kind == "binary":
        return bytes(value).hex().upper()  # type: ignore[arg-type]
    if kind in ("variant", "object", "array") and not isinstance(value, str):
        return json.dumps(value)
    return str(value)


def arrow_to_json_rowset(rowset_b64: str, rowtype: list[dict]) -> list[list[str | None]]:
    if not rowset_b64:
        return []
    table = pa.ipc.open_stream(base64.b64decode(rowset_b64)).read_all()
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [
        [json_cell(value, rowtype[i]) for i, value in enumerate(row)]
        for row in zip(*columns, strict=True)
    ]


def rewrite(path: str, payload: dict, sql_text: str) -> dict:
    data = payload.get("data")
    if not isinstance(data, dict):
        return payload
    if path == "/session/v1/login-request":
        for parameter in data.get("parameters", []):
            if parameter.get("name") == "CLIENT_STAGE_ARRAY_BINDING_THRESHOLD":
                parameter["value"] = ARRAY_BINDING_THRESHOLD
        return payload
    if isinstance(stage := data.get("stageInfo"), dict):
        # a PUT's upload instructions: the Node driver reads the stage's region
        # (always present in Snowflake's answer, absent in fakesnow's)
        stage.setdefault("region", "local")
        # fakesnow always answers overwrite=false; pass the statement's OVERWRITE on
        if re.search(r"\boverwrite\s*=\s*true\b", sql_text, re.IGNORECASE):
            data["overwrite"] = True
        return payload
    if "rowtype" not in data:
        return payload
    parameters = data.setdefault("parameters", [])
    present = {parameter.get("name") for parameter in parameters}
    parameters.extend({"name": k, "value": v} for k, v in OUTPUT_PARAMETERS.items() if k not in present)
    if data.get("queryResultFormat") == "arrow":
        data["rowset"] = arrow_to_json_rowset(data.pop("rowsetBase64", ""), data["rowtype"])
        data["queryResultFormat"] = "json"
    data.setdefault("rowset", [])
    data["returned"] = len(data["rowset"])
    data.setdefault("version", 1)
    return payload


async def bucket_read(scope, send):
    """GET/HEAD on a presigned upload url: the Node driver's GCS client asks first
    whether the file is there (fakesnow serves only PUT there, and answers 405)."""
    from fakesnow.transforms.stage import LOCAL_BUCKET_PATH

    target = os.path.normpath(os.path.join(LOCAL_BUCKET_PATH, unquote(scope["path"][len("/fs_bucket/"):])))
    found = target.startswith(LOCAL_BUCKET_PATH + os.sep) and os.path.isfile(target)
    body = b""
    if found and scope["method"] == "GET":
        with open(target, "rb") as f:
            body = f.read()
    await send({"type": "http.response.start", "status": 200 if found else 404,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def sql_text(scope, body: bytes) -> str:
    if not body:
        return ""
    if (b"content-encoding", b"gzip") in [(k.lower(), v.lower()) for k, v in scope.get("headers", [])]:
        body = gzip.decompress(body)
    try:
        return str(json.loads(body).get("sqlText") or "")
    except (ValueError, AttributeError):
        return ""


# Named transactions (tributary's batches name theirs after the mirror, and abort
# the ones a killed engine left open). fakesnow neither names, lists nor aborts
# transactions; these translations keep, per session token, the transaction its
# BEGIN ... NAME opened, and rewrite the statements into ones fakesnow runs.
BEGIN_NAMED = re.compile(r"^\s*(?:BEGIN|START)(?:\s+(?:TRANSACTION|WORK))?\s+NAME\s+([A-Za-z_][A-Za-z0-9_$]*)\s*;?\s*$", re.IGNORECASE)
TXN_END = re.compile(r"^\s*(COMMIT|ROLLBACK)\b", re.IGNORECASE)
SHOW_TRANSACTIONS = re.compile(r"^\s*SHOW\s+TRANSACTIONS\s*;?\s*$", re.IGNORECASE)
ABORT_TRANSACTION = re.compile(r"SYSTEM\$ABORT_TRANSACTION\(\s*(\d+)\s*\)", re.IGNORECASE)
CURRENT_SESSION = re.compile(r"CURRENT_SESSION\(\s*\)", re.IGNORECASE)
session_ids: dict[str, int] = {}
open_transactions: dict[str, dict] = {}  # session token -> {"id", "name", "started"}
next_transaction_id = 1_700_000_000_000_000_000  # Snowflake's ids are 19 digits too


def session_token(scope) -> str:
    for key, value in scope.get("headers", []):
        if key.lower() == b"authorization":
            return value.decode()[17:-1]  # Snowflake Token="..."; as fakesnow reads it
    return ""


def session_id(token: str) -> int:
    return session_ids.setdefault(token, 1_000_000 + len(session_ids))


def sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def translate(token: str, sql: str) -> str | None:
    """The statement fakesnow should run instead of `sql`, or None to run it unchanged."""
    global next_transaction_id
    if match := BEGIN_NAMED.match(sql):
        next_transaction_id += 1
        open_transactions[token] = {"id": next_transaction_id, "name": match.group(1).upper(),
                                    "started": datetime.datetime.now(datetime.UTC).isoformat()}
        return "BEGIN"
    if TXN_END.match(sql):
        open_transactions.pop(token, None)
        return None
    if SHOW_TRANSACTIONS.match(sql):
        rows = [f"({sql_literal(str(t['id']))}, 'TRIBUTARY', {sql_literal(str(session_id(k)))}, {sql_literal(t['name'])}, "
                f"{sql_literal(t['started'])}, 'running', 'ROOT')" for k, t in open_transactions.items()]
        if not rows:
            rows = ["(NULL, NULL, NULL, NULL, NULL, NULL, NULL)"]
        return ('SELECT * FROM (VALUES ' + ", ".join(rows) + ') AS t("id", "user", "session", "name", "started_on", "state", "scope")'
                + (' WHERE "id" IS NOT NULL' if not open_transactions else ""))
    if match := ABORT_TRANSACTION.search(sql):
        import fakesnow.server

        wanted = int(match.group(1))
        for other, transaction in list(open_transactions.items()):
            if transaction["id"] == wanted and (conn := fakesnow.server.sessions.get(other)):
                conn.rollback()
                open_transactions.pop(other, None)
                return ABORT_TRANSACTION.sub(sql_literal(f"{wanted} aborted."), sql)
        return ABORT_TRANSACTION.sub(sql_literal(f"Transaction {wanted} does not exist."), sql)
    if CURRENT_SESSION.search(sql):
        return CURRENT_SESSION.sub(sql_literal(str(session_id(token))), sql)
    if match := SWAP_WITH.match(sql):
        return swap_tables(token, match.group(1), match.group(2))
    return None


# ALTER TABLE a SWAP WITH b (the Snowflake destination puts a resynced table in
# the live one's place with it, docs/snowflake.md). fakesnow cannot parse it, and
# DuckDB cannot move a table to another schema, so the two tables' rows and
# comments (the destination marks a shadow by its comment) are exchanged in one
# DuckDB transaction: readers see either table whole, as with Snowflake's swap of
# the two objects. Like any Snowflake DDL it first commits the session's open
# transaction. Both tables must have the same columns (a resync's shadow does).
IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)'
QUALIFIED = rf"{IDENT}(?:\s*\.\s*{IDENT}){{0,2}}"
SWAP_WITH = re.compile(rf"^\s*ALTER\s+TABLE\s+({QUALIFIED})\s+SWAP\s+WITH\s+({QUALIFIED})\s*;?\s*$", re.IGNORECASE)
TABLES_EXT = "_fs_global._fs_information_schema._fs_tables_ext"


def name_parts(conn, qualified: str) -> tuple[str, str, str]:
    parts = [p[1:-1].replace('""', '"') if p.startswith('"') else p.upper() for p in re.findall(IDENT, qualified)]
    defaults = [str(conn.database or ""), str(conn._schema or "")]
    return tuple(defaults[: 3 - len(parts)] + parts)  # type: ignore[return-value]


def duck_ident(parts: tuple[str, str, str]) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in parts)


def swap_tables(token: str, first: str, second: str) -> str:
    import fakesnow.server

    conn = fakesnow.server.sessions.get(token)
    if conn is None:
        return None  # type: ignore[return-value]  # fakesnow answers an unknown session itself
    duck = conn._duck_conn
    a, b = name_parts(conn, first), name_parts(conn, second)
    found = [duck.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND schema_name = ? AND table_name = ?",
                          list(parts)).fetchone()[0] for parts in (a, b)]
    if not all(found):
        # fakesnow's own "does not exist" error (002003), for whichever is missing
        return f"SELECT 1 FROM {first}, {second} LIMIT 0"
    open_transactions.pop(token, None)
    try:
        duck.execute("COMMIT")
    except Exception:  # noqa: BLE001 - no transaction was open
        pass
    conn._in_transaction = False
    duck.execute("BEGIN")
    try:
        duck.execute(f"CREATE TEMP TABLE _tributary_swap AS SELECT * FROM {duck_ident(a)}")
        duck.execute(f"DELETE FROM {duck_ident(a)}")
        duck.execute(f"INSERT INTO {duck_ident(a)} SELECT * FROM {duck_ident(b)}")
        duck.execute(f"DELETE FROM {duck_ident(b)}")
        duck.execute(f"INSERT INTO {duck_ident(b)} SELECT * FROM _tributary_swap")
        duck.execute("DROP TABLE _tributary_swap")
        duck.execute("COMMIT")
    except Exception as error:  # noqa: BLE001 - reported as the statement's failure
        duck.execute("ROLLBACK")
        return f"SELECT ERROR({sql_literal(f'swap of {first} with {second} failed: {error}')})"
    # The comments live in fakesnow's own database, which DuckDB will not write in
    # the transaction that wrote the tables': a second one, run before this request
    # answers and before the server reads another request, so no session sees
    # rows and comments apart.
    where = "ext_table_catalog = ? AND ext_table_schema = ? AND ext_table_name = ?"
    duck.execute("BEGIN")
    comments = [duck.execute(f"SELECT comment FROM {TABLES_EXT} WHERE {where}", list(parts)).fetchone() for parts in (a, b)]
    for parts in (a, b):
        duck.execute(f"DELETE FROM {TABLES_EXT} WHERE {where}", list(parts))
    for parts, comment in ((a, comments[1]), (b, comments[0])):
        if comment is not None:
            duck.execute(f"INSERT INTO {TABLES_EXT} VALUES (?, ?, ?, ?)", [*parts, comment[0]])
    duck.execute("COMMIT")
    return "SELECT 'Statement executed successfully.' AS \"status\""


def rewrite_request(scope, body: bytes) -> bytes:
    """The request body with its sqlText translated (see translate), gzip or not as it came."""
    if not body:
        return body
    gzipped = (b"content-encoding", b"gzip") in [(k.lower(), v.lower()) for k, v in scope.get("headers", [])]
    try:
        payload = json.loads(gzip.decompress(body) if gzipped else body)
        replacement = translate(session_token(scope), str(payload.get("sqlText") or ""))
    except (ValueError, AttributeError, OSError):
        return body
    if replacement is None:
        return body
    payload["sqlText"] = replacement
    encoded = json.dumps(payload).encode()
    return gzip.compress(encoded) if gzipped else encoded


def adapt(inner):
    async def app(scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and path.startswith("/fs_bucket/"):
            await bucket_read(scope, send)
            return
        if scope["type"] != "http" or path not in ("/session/v1/login-request", "/queries/v1/query-request", "/telemetry/send"):
            await inner(scope, receive, send)
            return
        if path == "/telemetry/send":
            # the driver posts client telemetry after login; accept and drop it
            while (await receive()).get("more_body"):
                pass
            body = b'{"success":true}'
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        start: dict = {}
        chunks: list[bytes] = []

        async def capture(message):
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        request: list[bytes] = []
        if path == "/queries/v1/query-request":
            # The whole request first, so that its statement can be translated.
            while True:
                message = await receive()
                request.append(message.get("body", b""))
                if not message.get("more_body"):
                    break
            translated = rewrite_request(scope, b"".join(request))
            request[:] = [translated]
            delivered = False

            async def tap():
                nonlocal delivered
                if delivered:
                    return await receive()
                delivered = True
                return {"type": "http.request", "body": translated, "more_body": False}

            headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(translated)).encode()))
            scope = {**scope, "headers": headers}
        else:

            async def tap():
                message = await receive()
                if message["type"] == "http.request":
                    request.append(message.get("body", b""))
                return message

        await inner(scope, tap, capture)
        body = b"".join(chunks)
        status = start.get("status", 200)
        try:
            payload = json.loads(body)
            if status >= 500 and isinstance(payload, dict) and payload.get("success") is False:
                # fakesnow answers 500 when it has no translation for a statement; the
                # driver retries 5xx for minutes. Fail the statement at once instead.
                status = 200
                payload["message"] = f"{payload.get('message')} (fakesnow: unsupported; traceback in its log)"
            body = json.dumps(rewrite(path, payload, sql_text(scope, b"".join(request)))).encode()
        except Exception as error:  # noqa: BLE001 - never turn an answer into a hang
            print(f"tributary adapter: left response as is: {error!r}", file=sys.stderr, flush=True)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    config = uvicorn.Config("fakesnow.server:app", host=host, port=port, log_level="info")
    import fakesnow.server  # after uvicorn configured logging, so fakesnow's logger inherits its handlers

    config.app = adapt(fakesnow.server.app)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
PYEOF
}

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

# Ends the readiness poll early when the server has exited (eg: an import error).
ready_or_dead() { login_ok || ! running; }

# The adapter as this checkout's script writes it, hashed: a server started from
# another adapter is restarted by `up` (its in-memory data is lost), so that tests
# run against the translations they expect. A raw (unadapted) server is kept.
adapter_checksum() {
  sed -n "/^  cat >\"\$STATE\/server.py\" <<'PYEOF'\$/,/^PYEOF\$/p" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1
}

adapter_current() {
  [ "$(cat "$STATE/mode" 2>/dev/null)" = raw ] || [ "$(cat "$STATE/adapter.sha256" 2>/dev/null)" = "$(adapter_checksum)" ]
}

up() {
  if running && login_ok && ! adapter_current; then
    status_line snowflake "the running emulator has an older adapter: restarting it"
    stop_pidfile "$PIDFILE"
  fi
  if running && login_ok; then
    status_line snowflake "fakesnow already running ($(cat "$STATE/mode" 2>/dev/null)) on http://127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"
    return 0
  fi
  stop_pidfile "$PIDFILE"
  if port_open "$PORT"; then
    echo "testenv: port $PORT is taken by a process this script did not start" >&2
    return 1
  fi
  install_venv
  mkdir -p "$STATE/tmp"
  # Both run uvicorn in the foreground of a detached (setsid) process; SIGTERM
  # from stop_pidfile ends them. State is one in-memory DuckDB shared by all
  # sessions: a restart starts empty.
  local mode=adapted
  if [ "${TESTENV_SNOWFLAKE_RAW:-0}" = 1 ]; then
    mode=raw
    # fakesnow/cli.py: -s serves fakesnow.server:app, waits for SIGINT.
    TMPDIR="$STATE/tmp" setsid "$VENV/bin/fakesnow" -s --host 127.0.0.1 -p "$PORT" </dev/null >"$LOG" 2>&1 &
  else
    write_adapter
    adapter_checksum >"$STATE/adapter.sha256"
    TMPDIR="$STATE/tmp" setsid "$VENV/bin/python" "$STATE/server.py" 127.0.0.1 "$PORT" </dev/null >"$LOG" 2>&1 &
  fi
  echo $! >"$PIDFILE"
  echo "$mode" >"$STATE/mode"
  if ! wait_for snowflake 60 ready_or_dead || ! login_ok; then
    echo "testenv: fakesnow did not start, log $LOG:" >&2
    tail -20 "$LOG" >&2
    stop_pidfile "$PIDFILE"
    return 1
  fi
  status_line snowflake "fakesnow $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("fakesnow"))') ($mode) on http://127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"
}

down() {
  stop_pidfile "$PIDFILE"
  rm -rf "$STATE"
  status_line snowflake "stopped"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac

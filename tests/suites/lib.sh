# Shared helpers for the external-client suites (sourced, not run).
#
# scripts/test exports TEST_DATABASE_URL (a superuser URL), WC_TARGET_DIR (the debug build),
# WC_PYTHON, WC_NODE22 and WC_TOOLS_DIR. Each suite gets fresh databases and its own wc-local
# processes, and everything it starts is stopped when it exits.
set -euo pipefail

SUITE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
: "${TEST_DATABASE_URL:?TEST_DATABASE_URL must be set (scripts/test sets it)}"
: "${WC_TARGET_DIR:=$SUITE_ROOT/target/debug}"
WC_LOCAL="$WC_TARGET_DIR/wc-local"
WC_ADMIN="$WC_TARGET_DIR/wc-admin"
SUITE_TMP="$(mktemp -d "${TMPDIR:-/tmp}/wc-suite.XXXXXX")"
SUITE_PIDS=()
# Databases are recorded in a file, not an array: `url="$(fresh_db)"` runs in a subshell.
SUITE_DB_LIST="$SUITE_TMP/databases"
: >"$SUITE_DB_LIST"

suite_cleanup() {
    local pid
    for pid in "${SUITE_PIDS[@]:-}"; do
        [[ -n "$pid" ]] && kill -INT "$pid" 2>/dev/null || true
    done
    for pid in "${SUITE_PIDS[@]:-}"; do
        [[ -n "$pid" ]] && wait "$pid" 2>/dev/null || true
    done
    local db
    while read -r db; do
        [[ -n "$db" ]] && psql_admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
    done <"$SUITE_DB_LIST"
    rm -rf "$SUITE_TMP"
}
trap suite_cleanup EXIT

psql_admin() { psql "$TEST_DATABASE_URL" -v ON_ERROR_STOP=1 -q "$@"; }

# db_url_for NAME: TEST_DATABASE_URL with its database replaced by NAME.
db_url_for() {
    "${WC_PYTHON:-python3}" - "$TEST_DATABASE_URL" "$1" <<'PY'
import sys
from urllib.parse import urlsplit, urlunsplit
parts = urlsplit(sys.argv[1])
print(urlunsplit((parts.scheme, parts.netloc, "/" + sys.argv[2], parts.query, parts.fragment)))
PY
}

# fresh_db: creates an empty database, migrates it, and prints its URL.
fresh_db() {
    local name="suite_$(date +%s%N)_$RANDOM"
    psql_admin -c "CREATE DATABASE \"$name\"" >/dev/null
    printf '%s\n' "$name" >>"$SUITE_DB_LIST"
    local url
    url="$(db_url_for "$name")"
    "$WC_ADMIN" --database-url "$url" migrate >/dev/null
    printf '%s\n' "$url"
}

# new_token DB_URL [wc-admin credential create args…]: prints a fresh shared-key token.
new_token() {
    local url="$1"
    shift
    "$WC_ADMIN" --database-url "$url" credential create --kind shared-key "$@" | tail -n 1
}

# start_local NAME DB_URL [extra wc-local args…]: starts wc-local on a free port, waits for
# it, and sets <NAME>_URL (base URL), <NAME>_TOKEN (the shared key it generated, all scopes)
# and <NAME>_LOG (stderr file).
start_local() {
    local name="$1" url="$2"
    shift 2
    local dir="$SUITE_TMP/$name"
    mkdir -p "$dir"
    # A restarted instance must not be found by its predecessor's banner: the redirections
    # below truncate in the child, which may run after this shell has read the old file.
    : >"$dir/stdout"
    : >"$dir/stderr"
    DATABASE_URL="$url" "$WC_LOCAL" --listen 127.0.0.1:0 "$@" \
        >"$dir/stdout" 2>"$dir/stderr" &
    local pid=$!
    SUITE_PIDS+=("$pid")
    local i base=""
    for i in $(seq 1 600); do
        base="$(sed -n 's/^  Health: *\(http:\/\/[^ ]*\)\/healthz$/\1/p' "$dir/stdout" 2>/dev/null | head -n 1)"
        [[ -n "$base" ]] && break
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "wc-local $name exited early:" >&2
            cat "$dir/stderr" >&2
            return 1
        fi
        sleep 0.1
    done
    [[ -n "$base" ]] || { echo "wc-local $name did not start" >&2; cat "$dir/stderr" >&2; return 1; }
    local token
    token="$(sed -n 's/^  Token: *\([^ ]*\).*/\1/p' "$dir/stdout" | head -n 1)"
    printf -v "${name}_URL" '%s' "$base"
    printf -v "${name}_TOKEN" '%s' "$token"
    printf -v "${name}_LOG" '%s' "$dir/stderr"
    export "${name}_URL" "${name}_TOKEN" "${name}_LOG"
}

# start_pair: a fresh database served by two wc-local instances, A and B, with the project
# agent:local:demo registered by A only (B must see it through the shared database). Sets
# SUITE_DB besides the A_*/B_* variables of start_local.
start_pair() {
    if ! SUITE_DB="$(fresh_db 2>"$SUITE_TMP/migrate.log")"; then
        cat "$SUITE_TMP/migrate.log" >&2
        echo "FAIL: could not create the suite database" >&2
        return 1
    fi
    export SUITE_DB
    local project_dir="$SUITE_TMP/project-demo"
    mkdir -p "$project_dir"
    start_local A "$SUITE_DB" --project "demo=$project_dir"
    start_local B "$SUITE_DB"
}

# fail_with_logs MESSAGE [NAME…]: reports MESSAGE and the last 40 lines of each named
# wc-local's stderr (default A and B), then exits 1.
fail_with_logs() {
    local message="$1"
    shift
    echo "FAIL: $message; server logs follow" >&2
    local names=("$@") n log_var
    ((${#names[@]})) || names=(A B)
    for n in "${names[@]}"; do
        log_var="${n}_LOG"
        echo "---- wc-local $n stderr (last 40 lines) ----" >&2
        tail -n 40 "${!log_var}" >&2 || true
    done
    exit 1
}

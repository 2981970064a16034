#!/usr/bin/env bash
# MCP through the official Python SDK (mcp==2.3.0, Streamable HTTP) in each protocol mode
# ("auto", "legacy", "2026-07-28"), against two wc-local instances sharing one database.
# The checks themselves are in tests/clients/mcp_python_suite.py, including a Workflow Session
# flow per mode (create, recorded calls, handoff, finish, refused resume) across both instances,
# and a message-board flow per mode: a coordinator and two workers as separate windows (post a
# todo, fenced completion, an identical retry, a stale worker, a waiting observer).
#
#   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres tests/suites/10-mcp-python.sh
#
# scripts/test runs it with WC_PYTHON (the pinned venv) and WC_TARGET_DIR exported.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PY="${WC_PYTHON:-$SUITE_ROOT/.tools/venv/bin/python}"
[[ -x "$PY" ]] || { echo "FAIL: no Python test venv at $PY (run scripts/test --quick once)" >&2; exit 1; }
"$PY" -c 'import importlib.metadata as m, sys; v = m.version("mcp"); sys.exit(v != "2.3.0" and f"mcp {v} installed, 2.3.0 pinned")' ||
    { echo "FAIL: the pinned mcp SDK is not installed in $PY" >&2; exit 1; }

start_pair
echo "instances: A=$A_URL B=$B_URL (one database); project agent:local:demo registered by A"

# A's token is served by B too: credentials live in the database, not in a process.
status=0
timeout 170 "$PY" "$SUITE_ROOT/tests/clients/mcp_python_suite.py" \
    --instance "$A_URL" --instance "$B_URL" \
    --token "$A_TOKEN" --project-id "agent:local:demo" || status=$?

if ((status != 0)); then
    ((status == 124)) && echo "FAIL: the Python MCP suite did not finish within 170s" >&2
    fail_with_logs "the Python MCP suite failed (exit $status)"
fi
echo "OK: Python MCP SDK suite passed against two instances"

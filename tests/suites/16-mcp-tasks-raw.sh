#!/usr/bin/env bash
# Durable MCP tasks through a raw 2026-07-28 client (tests/clients/mcp_tasks_raw.py; the pinned
# Python SDK does not speak the tasks extension): a run_job task created on instance A is polled
# on A and B alternately until it completes with the job's result; a listener on B
# (`subscriptions/listen`) is told of a task made on A live, through its cancel; a second one is
# left running,
# A (and its embedded runner) is killed and started again on the same database, and the task is
# still readable on both instances and ends — `lost`, since its runner was replaced mid-run.
#
#   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres tests/suites/16-mcp-tasks-raw.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PY="${WC_PYTHON:-python3}"
[[ -x "$PY" ]] || PY=python3

if ! SUITE_DB="$(fresh_db 2>"$SUITE_TMP/migrate.log")"; then
    cat "$SUITE_TMP/migrate.log" >&2
    echo "FAIL: could not create the suite database" >&2
    exit 1
fi
project="$SUITE_TMP/project-tasks"
mkdir -p "$project"
# One credential for every request: the tasks belong to its authority group, across restarts.
token="$(new_token "$SUITE_DB")"
start_local A "$SUITE_DB" --project "tasks=$project"
start_local B "$SUITE_DB"
a_pid="${SUITE_PIDS[0]}"
echo "instances: A=$A_URL B=$B_URL (one database); agent:local:tasks served by A's runner"

task_id="$(timeout 120 "$PY" "$SUITE_ROOT/tests/clients/mcp_tasks_raw.py" create \
    --instance "$A_URL" --instance "$B_URL" --token "$token" --project-id "agent:local:tasks")" ||
    fail_with_logs "creating and polling tasks"
[[ "$task_id" == wc_task_* ]] || fail_with_logs "no task id from the create step: $task_id"

kill -KILL "$a_pid"
wait "$a_pid" 2>/dev/null || true
start_local A "$SUITE_DB" --project "tasks=$project"
echo "A restarted: $A_URL"

timeout 120 "$PY" "$SUITE_ROOT/tests/clients/mcp_tasks_raw.py" resume \
    --instance "$A_URL" --instance "$B_URL" --token "$token" --task-id "$task_id" ||
    fail_with_logs "reading the task after the restart"
echo "OK: tasks created, polled across two instances and read back after a wc-local restart"

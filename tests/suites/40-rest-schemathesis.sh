#!/usr/bin/env bash
# The REST / GPT Actions surface fuzzed by Schemathesis 4.32.5 from wc's own /openapi.json with
# every check (`--checks all`): responses match the documented schemas, statuses and content
# types; schema-valid input is accepted and schema-violating input refused; no 5xx; auth is not
# ignored. Two wc-local instances share one database: the main pass runs against A while a
# smaller pass with another seed runs against B at the same time. Any server ERROR/WARN log line
# during the run fails the suite too (a response can look fine while the server logged a fault).
#
#   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres tests/suites/40-rest-schemathesis.sh
#
# Environment knobs (environment only, never checks or operations):
#   WC_SCHEMATHESIS_SEED       seed of the main pass (default 20261130; B uses seed+1)
#   WC_SCHEMATHESIS_EXAMPLES   examples per operation of the main pass (default 400; B gets 150)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TOOLS_DIR="${WC_TOOLS_DIR:-$SUITE_ROOT/.tools}"
ST="$TOOLS_DIR/venv/bin/schemathesis"
[[ -x "$ST" ]] || ST="$(command -v schemathesis || true)"
[[ -n "$ST" && -x "$ST" ]] || { echo "FAIL: schemathesis not installed (run scripts/test --quick once)" >&2; exit 1; }
version="$("$ST" --version 2>&1 | grep -o '[0-9][0-9.]*' | head -n 1)"
[[ "$version" == "4.32.5" ]] || { echo "FAIL: schemathesis $version found, 4.32.5 pinned" >&2; exit 1; }

SEED="${WC_SCHEMATHESIS_SEED:-20261130}"
EXAMPLES="${WC_SCHEMATHESIS_EXAMPLES:-400}"
EXAMPLES_B=$((EXAMPLES * 3 / 8 > 50 ? EXAMPLES * 3 / 8 : 50))
# Per pass: the execution operations run real (short) processes on the embedded runner. The
# bound only catches a hang: on a slow 2-core box the main pass took just under 10 minutes
# (measured), so the bound leaves room for a box slower still.
ST_TIMEOUT="${WC_SCHEMATHESIS_TIMEOUT:-1800}"

start_pair
echo "schemathesis $version; instances: A=$A_URL B=$B_URL (one database)"

# st_run NAME URL TOKEN SEED EXAMPLES: one Schemathesis pass, output in $SUITE_TMP/st-NAME.log.
# Run from a scratch directory so nothing (reports, caches) lands in the repository; no example
# database, so every run is the same run for a given seed.
st_run() {
    local name="$1" url="$2" token="$3" seed="$4" examples="$5"
    local dir="$SUITE_TMP/st-$name"
    mkdir -p "$dir"
    (
        cd "$dir" &&
            timeout "$ST_TIMEOUT" "$ST" run "$url/openapi.json" \
                --url "$url" \
                --checks all \
                --header "Authorization: Bearer $token" \
                --seed "$seed" \
                --max-examples "$examples" \
                --generation-database none \
                --continue-on-failure \
                --request-timeout 30 \
                --no-color
    ) >"$SUITE_TMP/st-$name.log" 2>&1
}

start=$SECONDS
echo "main pass: A, seed $SEED, $EXAMPLES examples per operation;" \
    "second pass: B, seed $((SEED + 1)), $EXAMPLES_B examples (concurrently)"
rc_a=0
rc_b=0
# B's pass uses A's token: credentials are database rows, not per-process state.
st_run B "$B_URL" "$A_TOKEN" "$((SEED + 1))" "$EXAMPLES_B" &
pid_b=$!
st_run A "$A_URL" "$A_TOKEN" "$SEED" "$EXAMPLES" || rc_a=$?
wait "$pid_b" || rc_b=$?
took=$((SECONDS - start))

status=0
# summarize NAME RC: the run's verdict, from its exit status and its final summary line.
summarize() {
    local name="$1" rc="$2" log="$SUITE_TMP/st-$1.log" summary
    summary="$(grep -E '^=+ .* in [0-9.]+s =+$' "$log" | tail -n 1 | sed 's/^=* *//; s/ *=*$//')"
    if ((rc == 124)); then
        echo "FAIL [$name]: schemathesis did not finish within ${ST_TIMEOUT}s" >&2
    elif ((rc != 0)); then
        echo "FAIL [$name]: schemathesis exited $rc: ${summary:-no summary}" >&2
    elif [[ -z "$summary" ]] || grep -qE '[0-9]+ (failure|error)|No checks ran|interrupted' <<<"$summary"; then
        echo "FAIL [$name]: schemathesis reported failures or errors: ${summary:-no summary}" >&2
    else
        # Every operation in the document must have been tested, with checks run.
        local selected tested
        selected="$(sed -n 's/^ *Selected: *\([0-9]*\)\/\([0-9]*\).*/\1 \2/p' "$log" | tail -n 1)"
        tested="$(sed -n 's/^ *Tested: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)"
        if [[ -z "$selected" || "${selected% *}" != "${selected#* }" || "${selected% *}" != "$tested" || "$tested" == 0 ]]; then
            echo "FAIL [$name]: not every operation was tested (selected/total: ${selected:-?}, tested: ${tested:-?})" >&2
        else
            echo "ok [$name]: $summary; $tested/${selected#* } operations; $(grep -E '^ *[0-9]+ generated' "$log" | sed 's/^ *//')"
            return 0
        fi
    fi
    echo "---- schemathesis output ($name) ----" >&2
    sed -n '/FAILURES\|ERRORS/,$p' "$log" >&2
    [[ -s "$log" ]] && ! grep -q 'FAILURES\|ERRORS' "$log" && tail -n 40 "$log" >&2
    return 1
}
summarize A "$rc_a" || status=1
summarize B "$rc_b" || status=1

# Warnings (e.g. "missing test data") do not fail the run, but are shown.
for n in A B; do
    if grep -q '^=* *WARNINGS' "$SUITE_TMP/st-$n.log"; then
        echo "schemathesis warnings ($n):"
        sed -n '/^=* *WARNINGS/,/^=* *SUMMARY/p' "$SUITE_TMP/st-$n.log" | grep -vE '^=+' | sed '/^$/d; s/^/  /'
    fi
done

# A fault the response hid (a dropped audit row, a panic caught as a tool error) is a server log
# line at WARN or ERROR.
for n in A B; do
    log_var="${n}_LOG"
    if grep -E '"level":"(WARN|ERROR)"' "${!log_var}" >"$SUITE_TMP/faults-$n" 2>/dev/null; then
        echo "FAIL [$n]: the server logged $(wc -l <"$SUITE_TMP/faults-$n") WARN/ERROR line(s) during fuzzing:" >&2
        head -n 10 "$SUITE_TMP/faults-$n" | cut -c1-600 >&2
        status=1
    fi
done

echo "schemathesis passes took ${took}s"
if ((status != 0)); then
    echo "FAIL: the REST surface does not conform to its OpenAPI document (see above)" >&2
    exit 1
fi
echo "OK: schemathesis --checks all found 0 failures on two instances"

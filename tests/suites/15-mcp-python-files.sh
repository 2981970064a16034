#!/usr/bin/env bash
# The file tools through the official Python SDK (mcp==2.3.0, Streamable HTTP): a small Rust
# crate in a Git repository is served by wc-local's embedded runner (`--project`), and one
# Workflow Session explores it, edits it past a stale hash, validates it with cargo_test, diffs,
# commits and reads its log,
# each request on one of two instances sharing the database. The checks are in
# tests/clients/mcp_python_files.py.
#
#   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres tests/suites/15-mcp-python-files.sh
#
# scripts/test runs it with WC_PYTHON (the pinned venv) and WC_TARGET_DIR exported.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PY="${WC_PYTHON:-$SUITE_ROOT/.tools/venv/bin/python}"
[[ -x "$PY" ]] || { echo "FAIL: no Python test venv at $PY (run scripts/test --quick once)" >&2; exit 1; }
"$PY" -c 'import importlib.metadata as m, sys; v = m.version("mcp"); sys.exit(v != "2.3.0" and f"mcp {v} installed, 2.3.0 pinned")' ||
    { echo "FAIL: the pinned mcp SDK is not installed in $PY" >&2; exit 1; }

# The crate: a manifest, a nested module, an ignored build directory, a binary file and a
# symlink that leads outside the root, committed on main.
repo="$SUITE_TMP/crate"
mkdir -p "$repo/src/util" "$repo/target/debug" "$repo/assets"
printf '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n' >"$repo/Cargo.toml"
printf '/target\n/Cargo.lock\n' >"$repo/.gitignore"
printf 'pub mod util;\n\npub fn answer() -> u32 {\n    42\n}\n' >"$repo/src/lib.rs"
printf 'pub fn double(x: u32) -> u32 {\n    x * 2\n}\n\n#[test]\nfn doubles() {\n    assert_eq!(double(2), 4);\n}\n' >"$repo/src/util/mod.rs"
printf 'answer ignored\n' >"$repo/target/debug/build.log"
printf '\x89PNG\0\0\0binary answer' >"$repo/assets/logo.bin"
ln -s /etc "$repo/escape"
git_id=(-c user.name=Suite -c user.email=suite@example.com -c init.defaultBranch=main -c commit.gpgsign=false)
git -C "$repo" "${git_id[@]}" init -q
git -C "$repo" "${git_id[@]}" add -A
git -C "$repo" "${git_id[@]}" commit -q -m initial

if ! SUITE_DB="$(fresh_db 2>"$SUITE_TMP/migrate.log")"; then
    cat "$SUITE_TMP/migrate.log" >&2
    echo "FAIL: could not create the suite database" >&2
    exit 1
fi
start_local A "$SUITE_DB" --project "crate=$repo"
start_local B "$SUITE_DB"
echo "instances: A=$A_URL B=$B_URL (one database); project agent:local:crate served by A's runner"

status=0
timeout 120 "$PY" "$SUITE_ROOT/tests/clients/mcp_python_files.py" \
    --instance "$A_URL" --instance "$B_URL" \
    --token "$A_TOKEN" --project-id "agent:local:crate" --root "$repo" || status=$?

if ((status != 0)); then
    ((status == 124)) && echo "FAIL: the Python file-tools suite did not finish within 120s" >&2
    fail_with_logs "the Python file-tools suite failed (exit $status)"
fi
echo "OK: the file tools passed through the Python MCP SDK against two instances"

"""wc's file tools through the official Python MCP SDK (mcp==2.3.0), Streamable HTTP.

Run by tests/suites/15-mcp-python-files.sh against two wc-local instances sharing one
database, the first serving a small Rust crate in a Git repository (`--project`):

    python mcp_python_files.py --instance URL_A --instance URL_B --token TOKEN \
        --project-id agent:local:crate --root DIR

One Workflow Session, started with start_session and named by `session_id` on every call,
walks the crate the way a coding client does: project_overview, list_project_files,
search_project_texts, read_files (noting the sha256), then apply_text_edits with that hash
after the file was changed behind the session's back (refused sha256_mismatch with the current
hash), the retry with the current hash, the handoff brief (workspace observed, progress
needs_validation), cargo_test and validation_summary (the brief then ready_to_continue; a count
the output cannot prove refused test_count_not_proven), git_diff, git_commit and git_log, then a
persistent shell (open, three commands that keep cwd, exports and a function, status, close). One read through the symlink that leads
outside the root is refused path_outside_root. Consecutive HTTP requests alternate between
the instances; the runner is connected to the first only.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client

from mcp_python_suite import (
    Failed,
    RoutingTransport,
    Wire,
    expect,
    http_client,
    leaf_exceptions,
    mcp_client,
    short,
    structured,
    tool_ok,
    tool_refused,
)

MODE = "auto"
LIB_RS = "pub mod util;\n\npub fn answer() -> u32 {\n    42\n}\n"
# What "someone else" writes between the read and the edit.
LIB_RS_CHANGED = "pub mod util;\n\npub fn answer() -> u32 {\n    41 + 1\n}\n"
LIB_RS_EDITED = "pub mod util;\n\npub fn answer() -> u32 {\n    6 * 7\n}\n"
COMMIT_MESSAGE = "answer: six times seven\n\nComputed, not spelled out."


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


class FilesFlow:
    def __init__(self, bases: list[str], token: str, project_id: str, root: Path) -> None:
        self.bases = [httpx2.URL(b.rstrip("/")) for b in bases]
        self.endpoint = f"{bases[0].rstrip('/')}/mcp"
        self.token = token
        self.project_id = project_id
        self.root = root
        self.wire = Wire()
        self.checks = 0

    def check(self, cond: Any, what: str) -> None:
        self.checks += 1
        expect(cond, what)

    async def call(self, c: Client, tool: str, args: dict[str, Any]) -> Any:
        return await c.call_tool(tool, args)

    async def ok(self, c: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        out = tool_ok(await self.call(c, tool, args), tool)
        self.check(out.get("project") == self.project_id, f"{tool}: output.project is {out.get('project')!r}")
        return out

    async def handoff(self, c: Client, sid: str) -> dict[str, Any]:
        out = await self.ok_session(c, "session_handoff_summary", {"session_id": sid})
        brief = out.get("handoff_brief")
        self.check(isinstance(brief, dict), f"no handoff_brief: {short(out)}")
        return brief

    async def ok_session(self, c: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return tool_ok(await self.call(c, tool, args), tool)

    async def run(self) -> str:
        lib = self.root / "src/lib.rs"
        self.check(lib.read_text() == LIB_RS, "the fixture's src/lib.rs is not the expected text")
        head_before = git(self.root, "rev-parse", "HEAD").strip()
        hc = http_client(self.token, RoutingTransport(self.bases, self.wire))
        async with hc, mcp_client(self.endpoint, hc, MODE) as c:
            started = await self.ok_session(
                c, "start_session", {"project": self.project_id, "instruction": "compute the answer"}
            )
            sid = started.get("session_id")
            self.check(isinstance(sid, str) and sid.startswith("wc_sess_"), f"start_session: {short(started)}")

            # project_overview: the crate, its manifest, its tree without the ignored build
            # directory, and a clean repository on main.
            ov = await self.ok(c, "project_overview", {"session_id": sid})
            self.check(ov.get("root_name") == "crate", f"root_name: {short(ov)}")
            self.check(
                ov.get("manifests") == [{"path": "Cargo.toml", "ecosystem": "cargo"}],
                f"manifests: {short(ov.get('manifests'))}",
            )
            langs = {lang["language"]: lang["files"] for lang in ov.get("languages") or []}
            self.check(langs.get("Rust") == 2, f"languages: {short(ov.get('languages'))}")
            tree = {e["path"]: e["kind"] for e in ov.get("tree") or []}
            self.check(
                tree.get("src") == "directory"
                and tree.get("src/lib.rs") == "file"
                and tree.get("src/util") == "directory"
                and tree.get("escape") == "symlink"
                and "target" not in tree
                and ".gitignore" not in tree,
                f"tree: {short(ov.get('tree'))}",
            )
            git_state = ov.get("git") or {}
            self.check(
                git_state == {"status": "repository", "branch": "main", "head": head_before, "dirty": False},
                f"git: {short(git_state)}",
            )

            # list_project_files: every file in path order, the symlink as one, never followed,
            # nothing hidden or ignored.
            listing = await self.ok(c, "list_project_files", {"session_id": sid})
            files = [(f["path"], f["kind"]) for f in listing.get("files") or []]
            self.check(
                files
                == [
                    ("Cargo.toml", "file"),
                    ("assets/logo.bin", "file"),
                    ("escape", "symlink"),
                    ("src/lib.rs", "file"),
                    ("src/util/mod.rs", "file"),
                ],
                f"list_project_files: {short(listing)}",
            )
            self.check(listing.get("next_cursor") is None, f"one page expected: {short(listing)}")

            # search_project_texts: the text files only (the binary and the ignored log also
            # say "answer").
            found = await self.ok(c, "search_project_texts", {"session_id": sid, "pattern": "answer"})
            hits = [(m["path"], m["line"]["number"], m["line"]["text"]) for m in found.get("matches") or []]
            self.check(hits == [("src/lib.rs", 3, "pub fn answer() -> u32 {")], f"search: {short(found)}")

            # read_files: the whole text and its hash.
            read = await self.ok(c, "read_files", {"session_id": sid, "files": [{"path": "src/lib.rs"}]})
            f0 = (read.get("files") or [{}])[0]
            seen = f0.get("sha256")
            self.check(seen == sha256(LIB_RS.encode()), f"read_files sha256 {seen!r}")
            self.check(
                f0.get("content")
                == {"kind": "text", "start_line": 1, "end_line": 5, "text": LIB_RS, "truncated": False},
                f"read_files content: {short(f0)}",
            )
            self.check((f0.get("size"), f0.get("lines")) == (len(LIB_RS), 5), f"read_files size/lines: {short(f0)}")

            # The file changes behind the session's back; the edit naming the old hash is
            # refused with the current one and writes nothing.
            lib.write_text(LIB_RS_CHANGED)
            current = sha256(LIB_RS_CHANGED.encode())
            edit = {"old_text": "    41 + 1\n", "new_text": "    6 * 7\n"}
            stale = await self.call(
                c,
                "apply_text_edits",
                {"session_id": sid, "path": "src/lib.rs", "expected_sha256": seen, "edits": [edit]},
            )
            self.check(stale.is_error is True, f"a stale edit: isError={stale.is_error}")
            err = tool_refused(stale, "sha256_mismatch", "stale apply_text_edits")
            self.check(err.get("current_sha256") == current, f"current_sha256: {short(err)}")
            self.check(isinstance(err.get("job_id"), str), f"the refusal names no job: {short(err)}")
            self.check(lib.read_text() == LIB_RS_CHANGED, "a refused edit wrote")

            # The retry with the current hash applies.
            done = await self.ok(
                c,
                "apply_text_edits",
                {"session_id": sid, "path": "src/lib.rs", "expected_sha256": current, "edits": [edit]},
            )
            self.check(lib.read_text() == LIB_RS_EDITED, f"the file after the edit: {lib.read_text()!r}")
            self.check(
                (done.get("path"), done.get("previous_sha256"), done.get("sha256"), done.get("changed"))
                == ("src/lib.rs", current, sha256(LIB_RS_EDITED.encode()), True),
                f"apply_text_edits: {short(done)}",
            )
            self.check(
                (done.get("edits_applied"), done.get("created"), done.get("size")) == (1, False, len(LIB_RS_EDITED)),
                f"apply_text_edits: {short(done)}",
            )
            self.check("-    41 + 1\n+    6 * 7\n" in (done.get("diff") or ""), f"edit diff: {short(done)}")

            # Before the commit, the handoff sees the changed workspace and asks for validation.
            brief = await self.handoff(c, sid)
            ws = brief.get("workspace") or {}
            self.check(ws.get("status") == "available", f"workspace: {short(ws)}")
            self.check(ws.get("dirty") is True and ws.get("conflict") is False, f"workspace: {short(ws)}")
            self.check(
                ws.get("changed_paths") == {"items": ["src/lib.rs"], "returned": 1, "total": 1, "truncated": False},
                f"workspace: {short(ws)}",
            )
            progress = brief.get("progress") or {}
            self.check(progress.get("state") == "needs_validation", f"progress: {short(progress)}")

            # cargo_test proves the change: its counts, the session's validation summary, and a
            # brief that may now continue.
            tested = await self.ok(c, "cargo_test", {"session_id": sid, "require_tests": True})
            v = tested.get("validation") or {}
            self.check(
                (v.get("outcome"), v.get("passed"), v.get("complete")) == ("passed", True, True),
                f"cargo_test validation: {short(v)}",
            )
            self.check(v.get("tests") == {"passed": 1, "failed": 0, "ignored": 0}, f"cargo_test counts: {short(v)}")
            self.check(
                v.get("count_assertion") == {"min_tests": 1, "observed_tests": 1, "met": True},
                f"cargo_test count assertion: {short(v)}",
            )
            summary = await self.ok(c, "validation_summary", {"session_id": sid})
            self.check(summary.get("status") == "passed", f"validation_summary: {short(summary)}")
            latest = summary.get("latest") or {}
            self.check(
                (latest.get("tool"), latest.get("job_id")) == ("cargo_test", tested.get("job_id")),
                f"validation_summary latest: {short(latest)}",
            )
            self.check(
                summary.get("validation_delta") == {"status": "unavailable", "reason_code": "no_previous_validation"},
                f"validation_delta: {short(summary)}",
            )
            brief = await self.handoff(c, sid)
            self.check((brief.get("validation") or {}).get("status") == "passed", f"validation: {short(brief)}")
            progress = brief.get("progress") or {}
            self.check(progress.get("state") == "ready_to_continue", f"progress: {short(progress)}")
            unproven = await self.call(
                c, "cargo_test", {"session_id": sid, "test_filter": "no_such_test", "min_tests": 1}
            )
            self.check(unproven.is_error is True, f"an unproven count: isError={unproven.is_error}")
            err = tool_refused(unproven, "test_count_not_proven", "cargo_test min_tests 1, no test run")
            self.check(err.get("observed_tests") == 0, f"observed_tests: {short(err)}")

            # git_diff: the one change against what is committed (the intermediate text was never
            # staged).
            diff = await self.ok(c, "git_diff", {"session_id": sid})
            self.check(
                diff.get("files") == [{"path": "src/lib.rs", "added": 1, "removed": 1, "binary": False}],
                f"git_diff files: {short(diff)}",
            )
            text = diff.get("diff") or ""
            self.check(
                "--- a/src/lib.rs\n+++ b/src/lib.rs\n" in text and "-    42\n+    6 * 7\n" in text,
                f"git_diff text: {short(text)}",
            )
            self.check((diff.get("truncated"), diff.get("files_truncated")) == (False, False), short(diff))

            # git_commit, then git_log shows it.
            commit = await self.ok(c, "git_commit", {"session_id": sid, "message": COMMIT_MESSAGE})
            cid = commit.get("commit")
            self.check(cid == git(self.root, "rev-parse", "HEAD").strip(), f"git_commit: {short(commit)}")
            self.check(
                (commit.get("branch"), commit.get("files_changed"), commit.get("insertions"), commit.get("deletions"))
                == ("main", 1, 1, 1),
                f"git_commit: {short(commit)}",
            )
            log = await self.ok(c, "git_log", {"session_id": sid, "limit": 5})
            commits = log.get("commits") or []
            self.check(
                [(x.get("commit"), x.get("subject")) for x in commits]
                == [(cid, "answer: six times seven"), (head_before, "initial")],
                f"git_log: {short(log)}",
            )
            self.check(commits[0].get("parents") == [head_before], f"git_log parents: {short(commits[0])}")
            self.check(git(self.root, "status", "--porcelain") == "", "the work tree is not clean after the commit")

            brief = await self.handoff(c, sid)
            ws = brief.get("workspace") or {}
            self.check(
                (ws.get("status"), ws.get("dirty")) == ("available", False), f"workspace after the commit: {short(ws)}"
            )

            # A persistent shell: open, three commands that build on each other (each on the
            # other instance than the last), status, close.
            shell = await self.ok_session(c, "open_session_shell", {"session_id": sid, "shell": "bash"})
            shell_id = shell.get("shell_id")
            self.check(shell.get("state") == "ready" and isinstance(shell_id, str), f"open_session_shell: {short(shell)}")
            steps = [
                ("cd src/util && export ANSWER=42", ""),
                ("twice() { echo $(( $1 * 2 )); }", ""),
                ("basename \"$PWD\"; twice $ANSWER", "util\n84\n"),
            ]
            for command, stdout in steps:
                ran = await self.ok_session(
                    c, "session_shell_exec", {"session_id": sid, "shell_id": shell_id, "command": command}
                )
                self.check(
                    (ran.get("exit_code"), ran.get("stdout"), ran.get("state")) == (0, stdout, "ready"),
                    f"session_shell_exec {command!r}: {short(ran)}",
                )
            status = await self.ok_session(c, "session_shell_status", {"session_id": sid, "shell_id": shell_id})
            self.check(status.get("state") == "ready", f"session_shell_status: {short(status)}")
            closed = await self.ok_session(c, "close_session_shell", {"session_id": sid, "shell_id": shell_id})
            self.check(
                (closed.get("state"), closed.get("released")) == ("closed", True), f"close_session_shell: {short(closed)}"
            )
            after = await self.call(c, "session_shell_exec", {"session_id": sid, "shell_id": shell_id, "command": "true"})
            tool_refused(after, "shell_closed", "session_shell_exec after close")

            # A read through the symlink that leads outside the root.
            outside = await self.call(c, "read_files", {"session_id": sid, "files": [{"path": "escape/passwd"}]})
            self.check(outside.is_error is True, f"escape/passwd: isError={outside.is_error}")
            tool_refused(outside, "path_outside_root", "read_files escape/passwd")
            sc = structured(outside, "read_files escape/passwd")
            self.check("root:" not in str(sc), "the refusal shows the outside file")
            version = c.protocol_version
        served = self.wire.served_by()
        self.check(set(served) == {0, 1}, f"requests did not reach both instances: {self.wire.exchanges}")
        self.check(
            all(x != y for x, y in zip(served, served[1:])), f"requests did not alternate: {served}"
        )
        bad = [x for x in self.wire.exchanges if x[2] >= 400]
        self.check(not bad, f"unexpected HTTP errors: {bad}")
        return f"protocol {version}; {len(served)} requests alternating A/B; {self.checks} checks"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instance", action="append", required=True, help="base URL of a wc-local (twice)")
    parser.add_argument("--token", required=True)
    parser.add_argument("--project-id", required=True)
    parser.add_argument("--root", required=True, type=Path, help="the project's directory")
    args = parser.parse_args()
    if len(args.instance) < 2:
        parser.error("give --instance twice: the flow alternates between two servers")
    flow = FilesFlow(args.instance, args.token, args.project_id, args.root)
    name = "file tools: explore, stale edit refused, retry, handoff, cargo_test, validation_summary, diff, commit, log, persistent shell, escape refused"
    start = time.monotonic()
    try:
        note = await flow.run()
        ok = True
    except Failed as e:
        ok, note = False, str(e)
    except Exception as e:  # noqa: BLE001 - report what the SDK raised
        leaves = leaf_exceptions(e)
        checks = [x for x in leaves if isinstance(x, Failed)]
        ok = False
        if checks:
            note = "; ".join(str(x) for x in checks)
        else:
            note = "unexpected exception: " + "; ".join(f"{type(x).__name__}: {x}" for x in leaves)
            note += "\n" + "".join(traceback.format_exception(leaves[0]))
    print(f"[{'PASS' if ok else 'FAIL'}] {name} ({time.monotonic() - start:.2f}s): {note}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))

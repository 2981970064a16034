"""Checks on MCP Inspector CLI output (`--format json`), for tests/suites/20-mcp-inspector.sh.

    python inspector_checks.py KIND ERA FILE [ARG]

KIND is one of:
  tools     FILE holds a tools/list result: list_tools, list_projects and runtime_status are
            listed and every inputSchema carries the wrapper properties.
  status    FILE holds a runtime_status tools/call result: isError false, success true,
            output.database.reachable true, and the text content is the same JSON.
  projects  FILE holds a list_projects result that shows project id ARG.
  invalid   FILE holds the list_projects limit=0 result: isError true, success false,
            error.kind invalid_arguments, error.pointer "/limit".
  denied    FILE holds the CLI's stderr after a wrong token: an auth_required error naming
            HTTP 401 or the server's invalid_token answer.

ERA (legacy | modern | auto) is checked on tools/call results: wc stamps
`_meta["io.modelcontextprotocol/serverInfo"]` on results only at 2026-07-28, so its presence
tells which era the Inspector actually negotiated. Prints one line; exits 1 on a failed check.
"""

from __future__ import annotations

import json
import sys

EXPECTED_TOOLS = {"list_tools", "list_projects", "runtime_status"}
WRAPPER_FIELDS = ("recording_session_id", "ack_session_message_ids")
# The context_request sidecar is part of the stateless 2026-07-28 contract only.
SIDECAR = "context_request"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def fail(msg: str) -> None:
    print(f"check failed: {msg}", file=sys.stderr)
    sys.exit(1)


def short(value: object) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) < 700 else text[:700] + "…"


def load(path: str) -> dict:
    raw = open(path, encoding="utf-8").read()
    try:
        doc = json.loads(raw)
    except ValueError:
        fail(f"{path} is not JSON: {raw[:500]!r}")
    if not isinstance(doc, dict) or "result" not in doc:
        fail(f"{path} has no result: {short(doc)}")
    return doc["result"]


def era_of(result: dict, era: str) -> str:
    modern = SERVER_INFO in (result.get("_meta") or {})
    if era == "modern" and not modern:
        fail(f"--protocol-era modern, but the result lacks _meta[{SERVER_INFO}] (served as a legacy era?)")
    if era == "legacy" and modern:
        fail(f"--protocol-era legacy, but the result carries _meta[{SERVER_INFO}] (served as 2026-07-28?)")
    if era == "auto" and not modern:
        fail("--protocol-era auto fell back to the legacy handshake although wc serves 2026-07-28")
    return "2026-07-28" if modern else "handshake era"


def structured(result: dict) -> dict:
    sc = result.get("structuredContent")
    if not isinstance(sc, dict):
        fail(f"no structuredContent: {short(result)}")
    texts = [c for c in result.get("content") or [] if c.get("type") == "text"]
    if len(texts) != 1:
        fail(f"expected one text content block: {short(result)}")
    try:
        text = json.loads(texts[0]["text"])
    except ValueError:
        fail(f"text content is not JSON: {texts[0]['text'][:300]!r}")
    if text != sc:
        fail(f"text content differs from structuredContent: {short(text)} vs {short(sc)}")
    return sc


def main() -> None:
    if len(sys.argv) < 4:
        fail(__doc__ or "usage")
    kind, era, path = sys.argv[1:4]
    arg = sys.argv[4] if len(sys.argv) > 4 else ""

    if kind == "denied":
        text = open(path, encoding="utf-8").read()
        # The CLI's error envelope: code auth_required, and either the HTTP status or the
        # server's own 401 body (kind invalid_token), depending on the era's code path.
        if "auth_required" not in text or not ("401" in text or "invalid_token" in text):
            fail(f"the CLI's error is not the 401 auth failure: {text[-600:]!r}")
        print("refused: " + " ".join(text.split())[:160])
        return

    result = load(path)
    if kind == "tools":
        tools = {t["name"]: t for t in result.get("tools") or []}
        missing = EXPECTED_TOOLS - tools.keys()
        if missing:
            fail(f"tools/list lacks {sorted(missing)}; got {sorted(tools)}")
        # The CLI prints a listing without its _meta, so the era is the one asked for ("auto"
        # must settle on 2026-07-28, as era_of checks on tool results).
        modern = era != "legacy"
        for name, tool in tools.items():
            props = (tool.get("inputSchema") or {}).get("properties") or {}
            absent = [f for f in WRAPPER_FIELDS if f not in props]
            if absent:
                fail(f"inputSchema of {name} lacks wrapper properties {absent}")
            if (SIDECAR in props) != modern:
                fail(f"inputSchema of {name} {'lacks' if modern else 'lists'} {SIDECAR}")
        print(f"{len(tools)} tools: {', '.join(sorted(tools))}; wrapper properties of the era on every schema")
    elif kind == "status":
        got = era_of(result, era)
        sc = structured(result)
        if result.get("isError") is not False or sc.get("success") is not True:
            fail(f"runtime_status failed: {short(result)}")
        if ((sc.get("output") or {}).get("database") or {}).get("reachable") is not True:
            fail(f"output.database.reachable is not true: {short(sc)}")
        print(f"runtime_status ok ({got}), server {sc['output'].get('server_version')}")
    elif kind == "projects":
        got = era_of(result, era)
        sc = structured(result)
        ids = [p.get("id") for p in (sc.get("output") or {}).get("projects") or []]
        if result.get("isError") is not False or arg not in ids:
            fail(f"list_projects does not show {arg}: {short(result)}")
        print(f"list_projects shows {arg} ({got})")
    elif kind == "invalid":
        got = era_of(result, era)
        sc = structured(result)
        err = sc.get("error") or {}
        if (
            result.get("isError") is not True
            or sc.get("success") is not False
            or err.get("kind") != "invalid_arguments"
            or err.get("pointer") != "/limit"
        ):
            fail(f"limit=0 is not an invalid_arguments error at /limit: {short(result)}")
        print(f"limit=0 refused: invalid_arguments at /limit ({got})")
    else:
        fail(f"unknown check {kind!r}")


if __name__ == "__main__":
    main()

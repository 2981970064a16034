"""wc through the official Python MCP SDK (mcp==2.3.0), Streamable HTTP, in every protocol mode.

Run by tests/suites/10-mcp-python.sh against two wc-local instances that share one database:

    python mcp_python_suite.py --instance URL_A --instance URL_B --token TOKEN \
        --project-id agent:local:NAME

The SDK's `Client(mode=...)` picks the protocol era: "auto" probes `server/discover` at the
newest modern version and falls back to the `initialize` handshake, "legacy" always does the
handshake, and a modern version string ("2026-07-28") adopts that version without any probe.

Statelessness is exercised three ways: one client per instance with their calls interleaved,
one logical client whose consecutive HTTP requests alternate between the instances (a
round-robin transport under the SDK), and raw requests carrying a made-up `Mcp-Session-Id`,
which must change nothing.

A Workflow Session flow runs in every mode too: work_on_project creates a session, calls carry
it as `recording_session_id` (a tool argument: it is projected into every inputSchema), the
handoff and finish tools run, each request on the other instance, and the ledger read back
through session_summary must hold exactly the expected event pairs; after finish, a resume is
refused with session_closed.

Every scenario runs even when an earlier one failed; the exit status is 1 if any failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

MODES = ("auto", "legacy", "2026-07-28")
EXPECTED_TOOLS = {
    "list_tools",
    "list_projects",
    "runtime_status",
    "work_on_project",
    "session_summary",
    "session_handoff_summary",
    "finish_coding_task",
}
WRAPPER_FIELDS = ("recording_session_id", "ack_session_message_ids", "context_request")
ACCEPT = "application/json, text/event-stream"


class Failed(Exception):
    """A check did not hold."""


def expect(cond: Any, what: str) -> None:
    if not cond:
        raise Failed(what)


def short(value: Any, limit: int = 600) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def leaf_exceptions(exc: BaseException) -> list[BaseException]:
    """The leaves of an exception (group) tree: anyio task groups wrap what the SDK raises."""
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(leaf_exceptions(inner))
        return out
    return [exc]


# ---------------------------------------------------------------------------------------------
# HTTP plumbing under the SDK


class Wire:
    """Records every HTTP exchange the SDK makes: (instance index, JSON-RPC method, status)."""

    def __init__(self) -> None:
        self.exchanges: list[tuple[int, str, int]] = []

    def served_by(self) -> list[int]:
        return [i for i, _, _ in self.exchanges]

    def statuses(self) -> list[int]:
        return [s for _, _, s in self.exchanges]


class RoutingTransport(httpx2.AsyncBaseTransport):
    """Sends each HTTP request to one of `bases`: round-robin, or always `fixed`.

    Rewriting happens below the SDK, so one logical MCP client (one `Client`, one negotiated
    protocol version) sees a single endpoint while its requests land on different servers.
    """

    def __init__(self, bases: list[httpx2.URL], wire: Wire, fixed: int | None = None) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._bases = bases
        self._wire = wire
        self._fixed = fixed
        self._next = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._fixed is not None:
            index = self._fixed
        else:
            index = self._next % len(self._bases)
            self._next += 1
        base = self._bases[index]
        request.url = request.url.copy_with(scheme=base.scheme, host=base.host, port=base.port)
        request.headers["host"] = f"{base.host}:{base.port}"
        method = "?"
        try:
            method = json.loads(request.content or b"null").get("method", "(response)")
        except (ValueError, AttributeError):
            pass
        response = await self._inner.handle_async_request(request)
        self._wire.exchanges.append((index, f"{request.method} {method}", response.status_code))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def http_client(token: str, transport: httpx2.AsyncBaseTransport, extra: dict[str, str] | None = None):
    headers = {"Authorization": f"Bearer {token}"}
    headers.update(extra or {})
    return httpx2.AsyncClient(headers=headers, transport=transport, timeout=30.0)


def mcp_client(endpoint: str, hc: httpx2.AsyncClient, mode: str) -> Client:
    # cache=None: every list/call reaches a server, so interleaving is real.
    return Client(streamable_http_client(endpoint, http_client=hc), mode=mode, cache=None)


# ---------------------------------------------------------------------------------------------
# checks on SDK results


def expected_version(mode: str, got: str) -> None:
    if mode == "legacy":
        expect(
            got in HANDSHAKE_PROTOCOL_VERSIONS,
            f"mode legacy negotiated {got!r}, not a handshake-era version {HANDSHAKE_PROTOCOL_VERSIONS}",
        )
    else:
        # wc serves 2026-07-28, so "auto" must settle on it too rather than fall back.
        expect(
            got in MODERN_PROTOCOL_VERSIONS,
            f"mode {mode} negotiated {got!r}, expected a modern version {MODERN_PROTOCOL_VERSIONS}",
        )


def check_tools(listing: Any, where: str) -> dict[str, Any]:
    tools = {t.name: t for t in listing.tools}
    missing = EXPECTED_TOOLS - tools.keys()
    expect(not missing, f"{where}: tools/list lacks {sorted(missing)}; got {sorted(tools)}")
    for name, tool in tools.items():
        schema = tool.input_schema or {}
        props = schema.get("properties") or {}
        for field in WRAPPER_FIELDS:
            expect(
                field in props,
                f"{where}: inputSchema of {name} lacks wrapper property {field}; has {sorted(props)}",
            )
    return {name: tool.input_schema for name, tool in sorted(tools.items())}


def structured(result: Any, where: str) -> dict[str, Any]:
    sc = result.structured_content
    expect(isinstance(sc, dict), f"{where}: structuredContent missing: {short(result.model_dump())}")
    texts = [c for c in result.content if getattr(c, "type", None) == "text"]
    expect(len(texts) == 1, f"{where}: expected exactly one text content block, got {short(result.model_dump())}")
    try:
        text_json = json.loads(texts[0].text)
    except ValueError:
        raise Failed(f"{where}: text content is not JSON: {short(texts[0].text)}") from None
    expect(
        text_json == sc,
        f"{where}: text content differs from structuredContent:\n  text: {short(text_json)}\n  structured: {short(sc)}",
    )
    return sc


def check_runtime_status(result: Any, where: str) -> dict[str, Any]:
    sc = structured(result, where)
    expect(result.is_error is False, f"{where}: runtime_status isError={result.is_error}: {short(sc)}")
    expect(sc.get("success") is True, f"{where}: runtime_status success is not true: {short(sc)}")
    db = (sc.get("output") or {}).get("database") or {}
    expect(db.get("reachable") is True, f"{where}: output.database.reachable is not true: {short(sc)}")
    return sc


def check_projects(result: Any, project_id: str, where: str) -> dict[str, Any]:
    sc = structured(result, where)
    expect(result.is_error is False, f"{where}: list_projects isError={result.is_error}: {short(sc)}")
    expect(sc.get("success") is True, f"{where}: list_projects failed: {short(sc)}")
    ids = [p.get("id") for p in (sc.get("output") or {}).get("projects", [])]
    expect(project_id in ids, f"{where}: list_projects does not show {project_id}; got {ids}")
    return sc


def check_invalid(result: Any, where: str) -> dict[str, Any]:
    sc = structured(result, where)
    expect(result.is_error is True, f"{where}: list_projects limit=0 isError={result.is_error}: {short(sc)}")
    expect(sc.get("success") is False, f"{where}: list_projects limit=0 succeeded: {short(sc)}")
    err = sc.get("error") or {}
    expect(err.get("kind") == "invalid_arguments", f"{where}: error.kind is {err.get('kind')!r}: {short(sc)}")
    expect(err.get("pointer") == "/limit", f"{where}: error.pointer is {err.get('pointer')!r}: {short(sc)}")
    return sc


def tool_ok(result: Any, where: str) -> dict[str, Any]:
    """The `output` of a successful tool result."""
    sc = structured(result, where)
    expect(result.is_error is False, f"{where}: isError={result.is_error}: {short(sc)}")
    expect(sc.get("success") is True, f"{where}: failed: {short(sc)}")
    out = sc.get("output")
    expect(isinstance(out, dict), f"{where}: no output object: {short(sc)}")
    return out


def tool_refused(result: Any, kind: str, where: str) -> dict[str, Any]:
    """The `error` of a refused tool result, which must be of `kind`."""
    sc = structured(result, where)
    expect(result.is_error is True, f"{where}: isError={result.is_error}: {short(sc)}")
    expect(sc.get("success") is False, f"{where}: succeeded: {short(sc)}")
    err = sc.get("error") or {}
    expect(err.get("kind") == kind, f"{where}: error.kind is {err.get('kind')!r}, expected {kind!r}: {short(sc)}")
    return err


async def expect_unknown_tool(client: Client, where: str) -> None:
    try:
        result = await client.call_tool("no_such_tool", {})
    except MCPError as e:
        expect(e.code == -32602, f"{where}: unknown tool gave JSON-RPC error {e.code} {e.message!r}, expected -32602")
        return
    raise Failed(f"{where}: calling an unknown tool did not fail: {short(result.model_dump())}")


# ---------------------------------------------------------------------------------------------
# scenarios


class Suite:
    def __init__(self, bases: list[str], token: str, project_id: str) -> None:
        self.bases = [httpx2.URL(b.rstrip("/")) for b in bases]
        self.endpoint = f"{bases[0].rstrip('/')}/mcp"
        self.token = token
        self.project_id = project_id
        self.results: list[tuple[str, bool, float, str]] = []

    async def run(self, name: str, body: Callable[[], Awaitable[str | None]]) -> None:
        start = time.monotonic()
        try:
            note = await body() or ""
            ok = True
        except Failed as e:
            ok, note = False, str(e)
        except BaseException as e:  # noqa: BLE001 - report anything, keep going
            if isinstance(e, KeyboardInterrupt):
                raise
            leaves = leaf_exceptions(e)
            ok = False
            checks = [x for x in leaves if isinstance(x, Failed)]
            if checks:
                # A failed check raised inside the SDK's task groups arrives wrapped in a group.
                note = "; ".join(str(x) for x in checks)
            else:
                note = "unexpected exception: " + "; ".join(f"{type(x).__name__}: {x}" for x in leaves)
                note += "\n" + "".join(traceback.format_exception(leaves[0]))
        took = time.monotonic() - start
        self.results.append((name, ok, took, note))
        mark = "PASS" if ok else "FAIL"
        print(f"[{mark}] {name} ({took:.2f}s){(': ' + note) if note else ''}", flush=True)

    def routed(self, wire: Wire, token: str | None = None, fixed: int | None = None, extra=None):
        return http_client(token or self.token, RoutingTransport(self.bases, wire, fixed), extra)

    # -- one client per instance, calls interleaved ------------------------------------------

    async def interleaved(self, mode: str) -> str:
        wire_a, wire_b = Wire(), Wire()
        async with self.routed(wire_a, fixed=0) as hca, self.routed(wire_b, fixed=1) as hcb:
            async with mcp_client(self.endpoint, hca, mode) as a, mcp_client(self.endpoint, hcb, mode) as b:
                expected_version(mode, a.protocol_version)
                expect(
                    a.protocol_version == b.protocol_version,
                    f"A negotiated {a.protocol_version}, B {b.protocol_version}",
                )
                tools_a = check_tools(await a.list_tools(), "A tools/list")
                tools_b = check_tools(await b.list_tools(), "B tools/list")
                expect(tools_a == tools_b, "A and B list different tools or schemas")
                st_b = check_runtime_status(await b.call_tool("runtime_status", {}), "B runtime_status")
                st_a = check_runtime_status(await a.call_tool("runtime_status", {}), "A runtime_status")
                expect(st_a == st_b, f"runtime_status differs: A {short(st_a)} / B {short(st_b)}")
                pr_a = check_projects(await a.call_tool("list_projects", {}), self.project_id, "A list_projects")
                pr_b = check_projects(await b.call_tool("list_projects", {}), self.project_id, "B list_projects")
                expect(pr_a == pr_b, f"list_projects differs: A {short(pr_a)} / B {short(pr_b)}")
                inv_b = check_invalid(await b.call_tool("list_projects", {"limit": 0}), "B list_projects limit=0")
                inv_a = check_invalid(await a.call_tool("list_projects", {"limit": 0}), "A list_projects limit=0")
                expect(inv_a == inv_b, f"invalid-argument results differ: A {short(inv_a)} / B {short(inv_b)}")
                await expect_unknown_tool(a, "A")
                await expect_unknown_tool(b, "B")
                version = a.protocol_version
        expect(set(wire_a.served_by()) == {0} and set(wire_b.served_by()) == {1}, "routing is broken")
        bad = [x for x in wire_a.exchanges + wire_b.exchanges if x[2] >= 400 and "tools/call" not in x[1]]
        expect(not bad, f"unexpected HTTP errors: {bad}")
        return f"protocol {version}; {len(wire_a.exchanges)} requests to A, {len(wire_b.exchanges)} to B"

    # -- one logical client, consecutive requests on alternating instances ---------------------

    async def round_robin(self, mode: str) -> str:
        wire = Wire()
        async with self.routed(wire) as hc:
            async with mcp_client(self.endpoint, hc, mode) as c:
                expected_version(mode, c.protocol_version)
                for round_ in range(2):
                    check_tools(await c.list_tools(), f"round {round_} tools/list")
                    check_runtime_status(await c.call_tool("runtime_status", {}), f"round {round_} runtime_status")
                    check_projects(
                        await c.call_tool("list_projects", {}), self.project_id, f"round {round_} list_projects"
                    )
                    check_invalid(
                        await c.call_tool("list_projects", {"limit": 0}), f"round {round_} list_projects limit=0"
                    )
                    await expect_unknown_tool(c, f"round {round_}")
                version = c.protocol_version
        served = wire.served_by()
        expect(len(served) >= 8, f"too few requests to judge alternation: {wire.exchanges}")
        expect(
            all(x != y for x, y in zip(served, served[1:])),
            f"consecutive requests did not alternate between instances: {served}",
        )
        bad = [x for x in wire.exchanges if x[2] >= 400 and "tools/call" not in x[1]]
        expect(not bad, f"unexpected HTTP errors: {bad}")
        path = " ".join(f"{'AB'[i]}:{m.split(' ', 1)[1]}" for i, m, _ in wire.exchanges[:6])
        return f"protocol {version}; {len(served)} requests alternating A/B ({path} …)"

    # -- a Workflow Session across alternating instances --------------------------------------

    async def session_flow(self, mode: str) -> str:
        wire = Wire()
        instruction = f"python sdk flow ({mode}): add a cache to the resolver"
        async with self.routed(wire) as hc:
            async with mcp_client(self.endpoint, hc, mode) as c:
                expected_version(mode, c.protocol_version)
                check_tools(await c.list_tools(), "tools/list")

                created = tool_ok(
                    await c.call_tool("work_on_project", {"project": self.project_id, "instruction": instruction}),
                    "work_on_project",
                )
                sid = created.get("session_id")
                expect(
                    isinstance(sid, str) and sid.startswith("wc_sess_") and len(sid) >= len("wc_sess_") + 22,
                    f"work_on_project returned session_id {sid!r}",
                )
                expect(created.get("started") == "created", f"started: {short(created)}")
                expect(created.get("project") == self.project_id, f"project: {short(created)}")
                expect(
                    created.get("continuation_feedback") == {"status": "not_applicable", "reason_code": "fresh_session"},
                    f"continuation_feedback of a fresh session: {short(created.get('continuation_feedback'))}",
                )
                expect(created.get("events_observed") == 1, f"events_observed after create: {short(created)}")
                observed = 1

                # Recorded calls: the recorder is a tool argument, nothing else selects it.
                for tool in ("runtime_status", "list_projects"):
                    tool_ok(await c.call_tool(tool, {"recording_session_id": sid}), f"recorded {tool}")
                    observed += 2
                # Unrecorded calls in between change nothing.
                tool_ok(await c.call_tool("runtime_status", {}), "unrecorded runtime_status")
                tool_ok(await c.call_tool("list_projects", {}), "unrecorded list_projects")

                # The handoff, recorded in the session it reads: recorder and business pairs.
                handoff = tool_ok(
                    await c.call_tool("session_handoff_summary", {"session_id": sid, "recording_session_id": sid}),
                    "session_handoff_summary",
                )
                observed += 4
                brief = handoff.get("handoff_brief") or {}
                expect(len(json.dumps(brief, ensure_ascii=False).encode()) <= 8192, "the handoff brief exceeds 8 KiB")
                expect(brief.get("lifecycle") == "active", f"brief lifecycle: {short(brief)}")
                root = (brief.get("instruction") or {}).get("root") or {}
                expect(root.get("text") == instruction, f"brief root instruction: {short(root)}")

                # The ledger, read back on whichever instance serves the request.
                summary = tool_ok(
                    await c.call_tool("session_summary", {"session_id": sid, "limit": 200}), "session_summary"
                )
                expect(
                    summary.get("events_observed") == observed,
                    f"events_observed is {summary.get('events_observed')}, expected {observed}",
                )
                events = list(reversed(summary.get("events") or []))
                seqs = [e.get("seq") for e in events]
                expect(seqs == list(range(1, observed + 1)), f"ledger seqs: {seqs}")
                pairs: dict[str, list[dict[str, Any]]] = {}
                for e in events[1:]:
                    pairs.setdefault(e["call_id"], []).append(e)
                got = sorted(
                    (p[0].get("tool_name"), p[0].get("role"), tuple(e.get("kind") for e in p)) for p in pairs.values()
                )
                pair = ("tool_call_started", "tool_call_finished")
                want = sorted(
                    [
                        ("runtime_status", "recorder", pair),
                        ("list_projects", "recorder", pair),
                        ("session_handoff_summary", "recorder", pair),
                        ("session_handoff_summary", "business", pair),
                    ]
                )
                expect(got == want, f"ledger pairs: {got}")
                handoff_pairs = [p for p in pairs.values() if p[0].get("tool_name") == "session_handoff_summary"]
                expect(
                    len({e["invocation_id"] for p in handoff_pairs for e in p}) == 1,
                    "the handoff's recorder and business pairs do not share one invocation",
                )
                expect(events[0].get("kind") == "task_instruction", f"first event: {short(events[0])}")
                observed += 2  # the summary's own business pair, written after its read

                finished = tool_ok(
                    await c.call_tool("finish_coding_task", {"session_id": sid, "summary": "python flow done"}),
                    "finish_coding_task",
                )
                observed += 3
                expect(finished.get("lifecycle") == "finished", f"finish lifecycle: {short(finished)}")
                state = ((finished.get("handoff_brief") or {}).get("progress") or {}).get("state")
                expect(state == "closed", f"progress after finish: {state!r}")

                # A finished session takes no more work, as business target or as recorder.
                tool_refused(
                    await c.call_tool("work_on_project", {"session_id": sid, "instruction": "once more"}),
                    "session_closed",
                    "resume after finish",
                )
                tool_refused(
                    await c.call_tool("runtime_status", {"recording_session_id": sid}),
                    "session_closed",
                    "recording in a finished session",
                )
                final = tool_ok(await c.call_tool("session_summary", {"session_id": sid}), "final session_summary")
                expect(final.get("lifecycle") == "finished", f"final lifecycle: {short(final)}")
                expect(
                    final.get("events_observed") == observed,
                    f"events_observed is {final.get('events_observed')}, expected {observed} (refusals must write nothing)",
                )
                version = c.protocol_version
        served = wire.served_by()
        expect(
            all(x != y for x, y in zip(served, served[1:])),
            f"consecutive requests did not alternate between instances: {served}",
        )
        expect(set(served) == {0, 1}, f"both instances must serve: {served}")
        bad = [x for x in wire.exchanges if x[2] >= 400 and "tools/call" not in x[1]]
        expect(not bad, f"unexpected HTTP errors: {bad}")
        return f"protocol {version}; session {sid[:12]}…, {observed} ledger events, {len(served)} requests alternating A/B"

    # -- a wrong token is refused on both instances, in every mode ----------------------------

    async def wrong_token(self, mode: str) -> str:
        notes = []
        for index in range(len(self.bases)):
            wire = Wire()
            bad_token = "wcsk_" + uuid.uuid4().hex + uuid.uuid4().hex[:11]
            got: list[BaseException] = []
            try:
                async with self.routed(wire, token=bad_token, fixed=index) as hc:
                    async with mcp_client(self.endpoint, hc, mode) as c:
                        listing = await c.list_tools()
                        raise Failed(
                            f"instance {'AB'[index]}: tools/list succeeded with a wrong token: "
                            f"{[t.name for t in listing.tools]}"
                        )
            except Failed:
                raise
            except BaseException as e:  # noqa: BLE001
                got = leaf_exceptions(e)
                for leaf in got:
                    if isinstance(leaf, Failed):
                        raise leaf from None
            mcp_errors = [e for e in got if isinstance(e, MCPError)]
            expect(
                mcp_errors,
                f"instance {'AB'[index]}: a wrong token raised no MCPError: "
                + "; ".join(f"{type(e).__name__}: {e}" for e in got),
            )
            expect(
                wire.statuses() and all(s == 401 for s in wire.statuses()),
                f"instance {'AB'[index]}: expected only HTTP 401 answers, got {wire.exchanges}",
            )
            notes.append(f"{'AB'[index]}: MCPError {mcp_errors[0].code} after {len(wire.statuses())}×401")
        return "; ".join(notes)

    # -- Mcp-Session-Id from the caller changes nothing ---------------------------------------

    async def session_header_sdk(self, mode: str) -> str:
        """The same SDK flow with a made-up Mcp-Session-Id on every request, alternating instances."""
        wire = Wire()
        async with self.routed(wire, extra={"Mcp-Session-Id": "made-up-" + uuid.uuid4().hex}) as hc:
            async with mcp_client(self.endpoint, hc, mode) as c:
                expected_version(mode, c.protocol_version)
                with_header = (
                    check_tools(await c.list_tools(), "tools/list"),
                    check_runtime_status(await c.call_tool("runtime_status", {}), "runtime_status"),
                    check_projects(await c.call_tool("list_projects", {}), self.project_id, "list_projects"),
                )
        wire2 = Wire()
        async with self.routed(wire2) as hc:
            async with mcp_client(self.endpoint, hc, mode) as c:
                without = (
                    check_tools(await c.list_tools(), "tools/list"),
                    check_runtime_status(await c.call_tool("runtime_status", {}), "runtime_status"),
                    check_projects(await c.call_tool("list_projects", {}), self.project_id, "list_projects"),
                )
        expect(with_header == without, "results differ with a caller-supplied Mcp-Session-Id")
        return f"{len(wire.exchanges)} requests with the header, same answers as without"

    async def session_header_raw(self) -> str:
        """Hand-built JSON-RPC POSTs, legacy and modern era, with and without Mcp-Session-Id."""
        legacy_headers = {"Accept": ACCEPT, "Content-Type": "application/json", "MCP-Protocol-Version": "2025-06-18"}
        modern_meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "wc-suite", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }

        def modern(method: str, params: dict[str, Any], name: str | None = None):
            headers = {
                "Accept": ACCEPT,
                "Content-Type": "application/json",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": method,
            }
            if name:
                headers["Mcp-Name"] = name
            return headers, {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": modern_meta}}

        requests: list[tuple[str, dict[str, str], dict[str, Any]]] = [
            (
                "legacy initialize",
                {"Accept": ACCEPT, "Content-Type": "application/json"},
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "wc-suite", "version": "1"},
                    },
                },
            ),
            ("legacy tools/list", legacy_headers, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            (
                "legacy tools/call runtime_status",
                legacy_headers,
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "runtime_status", "arguments": {}}},
            ),
            (
                "legacy tools/call list_projects",
                legacy_headers,
                {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "list_projects", "arguments": {}}},
            ),
            ("modern server/discover", *modern("server/discover", {})),
            ("modern tools/list", *modern("tools/list", {})),
            ("modern tools/call runtime_status", *modern("tools/call", {"name": "runtime_status", "arguments": {}}, "runtime_status")),
            (
                "modern tools/call list_projects limit=0",
                *modern("tools/call", {"name": "list_projects", "arguments": {"limit": 0}}, "list_projects"),
            ),
        ]
        checked = 0
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"}, timeout=30.0) as hc:
            for label, headers, body in requests:
                answers = []
                # Without the header, then two different made-up ids, on alternating instances.
                for i, sid in enumerate([None, "made-up-" + uuid.uuid4().hex, str(uuid.uuid4())]):
                    base = self.bases[i % len(self.bases)]
                    h = dict(headers)
                    if sid:
                        h["Mcp-Session-Id"] = sid
                    r = await hc.post(f"{base}/mcp", headers=h, content=json.dumps(body))
                    expect(r.status_code == 200, f"{label} (session id {sid!r}): HTTP {r.status_code}: {short(r.text)}")
                    expect(
                        "mcp-session-id" not in r.headers,
                        f"{label}: the server handed out a session id: {r.headers.get('mcp-session-id')!r}",
                    )
                    try:
                        msg = r.json()
                    except ValueError:
                        raise Failed(f"{label}: response is not JSON: {short(r.text)}") from None
                    expect("result" in msg, f"{label} (session id {sid!r}): no result: {short(msg)}")
                    answers.append(msg)
                expect(
                    answers[0] == answers[1] == answers[2],
                    f"{label}: a caller-supplied Mcp-Session-Id changed the answer:\n"
                    + "\n".join(f"  {short(a)}" for a in answers),
                )
                checked += 1
        return f"{checked} request kinds × (no id, 2 made-up ids) on alternating instances: identical"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instance", action="append", required=True, help="base URL of a wc-local (twice)")
    parser.add_argument("--token", required=True)
    parser.add_argument("--project-id", required=True)
    args = parser.parse_args()
    if len(args.instance) < 2:
        parser.error("give --instance twice: the suite alternates between two servers")

    suite = Suite(args.instance, args.token, args.project_id)
    for mode in MODES:
        await suite.run(f"[{mode}] one client per instance, interleaved", lambda m=mode: suite.interleaved(m))
        await suite.run(f"[{mode}] one client alternating instances per request", lambda m=mode: suite.round_robin(m))
        await suite.run(f"[{mode}] wrong token refused by both instances", lambda m=mode: suite.wrong_token(m))
        await suite.run(
            f"[{mode}] workflow session: create, record, hand off, finish, across instances",
            lambda m=mode: suite.session_flow(m),
        )
        await suite.run(
            f"[{mode}] caller Mcp-Session-Id on every request changes nothing",
            lambda m=mode: suite.session_header_sdk(m),
        )
    await suite.run("raw requests with a caller Mcp-Session-Id change nothing", suite.session_header_raw)

    failed = [r for r in suite.results if not r[1]]
    print(f"\nmcp python suite: {len(suite.results) - len(failed)} passed, {len(failed)} failed")
    for name, _, _, note in failed:
        print(f"  FAILED {name}: {note.splitlines()[0] if note else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))

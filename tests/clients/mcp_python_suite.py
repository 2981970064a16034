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

The message board runs in every mode as three windows (three clients, three Workflow Sessions
of one project): a coordinator on one instance posts a todo recorded in its own session and
waits in `observe_session_messages` (wait_ms) while a worker on the other instance takes the
assignment and completes it with a completion key (recorded in the worker's session, so the
answer's author is that session); the retry returns the same result, and a second worker whose
fence predates the completion gets state_changed=false.

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
    "start_session",
    "session_summary",
    "session_handoff_summary",
    "finish_coding_task",
}
BOARD_TOOLS = {
    "post_session_message",
    "list_session_messages",
    "resolve_session_message",
    "get_session_assignment",
    "complete_session_message",
    "observe_session_messages",
}
WRAPPER_FIELDS = ("recording_session_id", "ack_session_message_ids")
# The context_request sidecar is part of the stateless 2026-07-28 contract only.
MODERN_WRAPPER_FIELDS = WRAPPER_FIELDS + ("context_request",)
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


def check_tools(listing: Any, where: str, mode: str) -> dict[str, Any]:
    tools = {t.name: t for t in listing.tools}
    missing = EXPECTED_TOOLS - tools.keys()
    expect(not missing, f"{where}: tools/list lacks {sorted(missing)}; got {sorted(tools)}")
    modern = mode != "legacy"
    for name, tool in tools.items():
        schema = tool.input_schema or {}
        props = schema.get("properties") or {}
        for field in WRAPPER_FIELDS:
            expect(
                field in props,
                f"{where}: inputSchema of {name} lacks wrapper property {field}; has {sorted(props)}",
            )
        expect(
            ("context_request" in props) == modern,
            f"{where} ({mode}): inputSchema of {name} {'lacks' if modern else 'lists'} context_request",
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
                tools_a = check_tools(await a.list_tools(), "A tools/list", mode)
                tools_b = check_tools(await b.list_tools(), "B tools/list", mode)
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
                    check_tools(await c.list_tools(), f"round {round_} tools/list", mode)
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
                check_tools(await c.list_tools(), "tools/list", mode)

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

                # The handoff, recorded in the session it reads: the recorder pair only (a
                # recorded handoff takes no business pair; its session_id is its target).
                handoff = tool_ok(
                    await c.call_tool("session_handoff_summary", {"session_id": sid, "recording_session_id": sid}),
                    "session_handoff_summary",
                )
                observed += 2
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
                    ]
                )
                expect(got == want, f"ledger pairs: {got}")
                handoff_pairs = [p for p in pairs.values() if p[0].get("tool_name") == "session_handoff_summary"]
                expect(len(handoff_pairs) == 1, f"the recorded handoff wrote {len(handoff_pairs)} pairs, not one")
                expect(events[0].get("kind") == "task_instruction", f"first event: {short(events[0])}")
                # The summary read its target and recorded nothing there (no recorder named).

                finished = tool_ok(
                    await c.call_tool("finish_coding_task", {"session_id": sid, "summary": "python flow done"}),
                    "finish_coding_task",
                )
                observed += 1  # session_finished: the effect; a session tool takes no call pair
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

    # -- the message board between windows: a coordinator and two workers --------------------

    async def board_flow(self, mode: str) -> str:
        """Three windows, each its own client and its own Workflow Session on one project.

        The coordinator (on A) posts a todo in its session, recorded there; the worker (on B)
        takes the assignment and completes it while the coordinator is already waiting in an
        observation, then retries the completion; a second worker (on A) whose fence predates
        the completion changes nothing.
        """
        wire_c, wire_w, wire_w2 = Wire(), Wire(), Wire()
        suffix = uuid.uuid4().hex[:12]
        todo_body = f"python board flow ({mode}): rename the resolver cache"
        answer = f"renamed in {suffix}; tests pass"
        key = f"{mode}-worker-{suffix}"
        async with (
            self.routed(wire_c, fixed=0) as hcc,
            self.routed(wire_w, fixed=1) as hcw,
            self.routed(wire_w2, fixed=0) as hcw2,
        ):
            async with (
                mcp_client(self.endpoint, hcc, mode) as coord,
                mcp_client(self.endpoint, hcw, mode) as worker,
                mcp_client(self.endpoint, hcw2, mode) as worker2,
            ):
                expected_version(mode, coord.protocol_version)
                listed = set(check_tools(await coord.list_tools(), "coordinator tools/list", mode))
                missing = BOARD_TOOLS - listed
                expect(not missing, f"tools/list lacks the board tools {sorted(missing)}")

                async def start_session(client: Client, who: str) -> str:
                    created = tool_ok(
                        await client.call_tool(
                            "work_on_project",
                            {"project": self.project_id, "instruction": f"{who} of the board flow ({mode})"},
                        ),
                        f"{who} work_on_project",
                    )
                    sid = created.get("session_id")
                    expect(
                        isinstance(sid, str) and sid.startswith("wc_sess_"),
                        f"{who}: work_on_project returned session_id {sid!r}",
                    )
                    return sid

                # The coordinator's session and its baseline, before anything is posted.
                csid = await start_session(coord, "coordinator")
                base = tool_ok(
                    await coord.call_tool("observe_session_messages", {"session_id": csid}), "baseline observation"
                )
                expect(base.get("baseline") is True, f"baseline observation: {short(base)}")
                expect(base.get("messages") == [], f"a baseline returns no history: {short(base)}")
                token0 = base.get("token")
                expect(isinstance(token0, str) and token0, f"baseline token: {short(base)}")

                wsid = await start_session(worker, "worker")
                w2sid = await start_session(worker2, "second worker")
                expect(len({csid, wsid, w2sid}) == 3, f"sessions are not distinct: {csid} {wsid} {w2sid}")

                # The todo, recorded in the coordinator's own session: it is the author.
                posted = tool_ok(
                    await coord.call_tool(
                        "post_session_message",
                        {"session_id": csid, "kind": "todo", "body": todo_body, "recording_session_id": csid},
                    ),
                    "post todo",
                )
                tid = posted.get("message_id")
                expect(isinstance(tid, str) and tid.startswith("wc_msg_"), f"post returned message_id {tid!r}")
                todo = posted.get("message") or {}
                expect(
                    (todo.get("kind"), todo.get("status"), todo.get("body"), todo.get("author_session_id"))
                    == ("todo", "open", todo_body, csid),
                    f"the posted todo: {short(todo)}",
                )

                seen = tool_ok(
                    await coord.call_tool("observe_session_messages", {"session_id": csid, "token": token0}),
                    "observation after the post",
                )
                expect(
                    [m.get("message_id") for m in seen.get("messages") or []] == [tid],
                    f"the observation after the post shows {short(seen.get('messages'))}, expected only {tid}",
                )
                expect(seen["messages"][0].get("status") == "open", f"todo status: {short(seen['messages'][0])}")
                expect(
                    (seen.get("baseline"), seen.get("has_more"), seen.get("history_lost")) == (False, False, False),
                    f"observation flags: {short(seen)}",
                )
                token1 = seen.get("token")

                # Both workers read the assignment from their own windows, recorded in their sessions.
                async def assignment(client: Client, recorder: str, who: str) -> str:
                    got = tool_ok(
                        await client.call_tool(
                            "get_session_assignment",
                            {"session_id": csid, "message_id": tid, "recording_session_id": recorder},
                        ),
                        f"{who} get_session_assignment",
                    )
                    a = got.get("assignment") or {}
                    expect(
                        a.get("completable") is True
                        and a.get("replies") == []
                        and a.get("non_completable_reason") is None,
                        f"{who}: the fresh todo is not a completable assignment: {short(a)}",
                    )
                    expect(
                        (a.get("todo") or {}).get("message_id") == tid and a["todo"].get("body") == todo_body,
                        f"{who}: assignment todo: {short(a.get('todo'))}",
                    )
                    fence = got.get("assignment_fence")
                    expect(isinstance(fence, str) and fence, f"{who}: no assignment_fence: {short(got)}")
                    return fence

                fence = await assignment(worker, wsid, "worker")
                stale_fence = await assignment(worker2, w2sid, "second worker")

                # The coordinator waits for a change; the worker completes while it waits.
                complete_args = {
                    "session_id": csid,
                    "message_id": tid,
                    "expected_assignment_fence": fence,
                    "completion_key": key,
                    "answer": answer,
                    "recording_session_id": wsid,
                }
                waiting: dict[str, Any] = {}

                async def observe_waiting() -> None:
                    t0 = time.monotonic()
                    waiting["result"] = await coord.call_tool(
                        "observe_session_messages", {"session_id": csid, "token": token1, "wait_ms": 20000}
                    )
                    waiting["elapsed"] = time.monotonic() - t0

                async with anyio.create_task_group() as tg:
                    tg.start_soon(observe_waiting)
                    await anyio.sleep(1.5)
                    expect(
                        "result" not in waiting,
                        f"the observation with wait_ms returned before any change: {short(waiting.get('result'))}",
                    )
                    completed = tool_ok(await worker.call_tool("complete_session_message", complete_args), "complete")
                answer_id = completed.get("answer_message_id")
                expect(
                    completed.get("state_changed") is True and completed.get("status") == "completed",
                    f"the completion did not change the todo: {short(completed)}",
                )
                expect(
                    isinstance(answer_id, str) and answer_id.startswith("wc_msg_") and answer_id != tid,
                    f"answer_message_id {answer_id!r}",
                )
                expect(
                    completed.get("assignment") is None and completed.get("assignment_fence") is None,
                    f"an accepted completion carries no assignment: {short(completed)}",
                )

                observed = tool_ok(waiting["result"], "observation with wait_ms")
                waited_ms = observed.get("waited_ms")
                expect(
                    isinstance(waited_ms, int) and 250 <= waited_ms < 15000 and waiting["elapsed"] < 15,
                    f"the wait did not end on the change: waited_ms={waited_ms}, "
                    f"{waiting['elapsed']:.2f}s on the client for wait_ms=20000",
                )
                changed = observed.get("messages") or []
                changed_ids = [m.get("message_id") for m in changed]
                expect(
                    changed_ids == [tid, answer_id],
                    f"the woken observation shows {changed_ids}, expected the todo and the answer {[tid, answer_id]}",
                )
                done_todo, answer_msg = changed
                expect(
                    (done_todo.get("status"), done_todo.get("answer_message_id"), done_todo.get("author_session_id"))
                    == ("completed", answer_id, csid),
                    f"the observed todo: {short(done_todo)}",
                )
                expect(
                    (
                        answer_msg.get("kind"),
                        answer_msg.get("reply_to"),
                        answer_msg.get("body"),
                        answer_msg.get("author_session_id"),
                    )
                    == ("answer", tid, answer, wsid),
                    f"the observed answer (author must be the worker's session {wsid}): {short(answer_msg)}",
                )
                expect(
                    (observed.get("baseline"), observed.get("has_more"), observed.get("history_lost"))
                    == (False, False, False),
                    f"observation flags: {short(observed)}",
                )
                token2 = observed.get("token")

                # The worker's uncertain retry: the same key and answer return the same result.
                retry = tool_ok(await worker.call_tool("complete_session_message", complete_args), "retried complete")
                expect(
                    retry == completed,
                    f"the retry's output differs:\n  first: {short(completed)}\n  retry: {short(retry)}",
                )

                # The second worker's fence predates the completion: nothing changes.
                stale = tool_ok(
                    await worker2.call_tool(
                        "complete_session_message",
                        {
                            "session_id": csid,
                            "message_id": tid,
                            "expected_assignment_fence": stale_fence,
                            "completion_key": f"{mode}-second-{suffix}",
                            "answer": "the second worker's answer",
                            "recording_session_id": w2sid,
                        },
                    ),
                    "complete with a stale fence",
                )
                expect(
                    stale.get("state_changed") is False
                    and stale.get("answer_message_id") is None
                    and stale.get("status") == "completed",
                    f"a stale fence changed something: {short(stale)}",
                )
                now = stale.get("assignment") or {}
                expect(
                    now.get("completable") is False
                    and now.get("non_completable_reason") == "todo_completed"
                    and stale.get("assignment_fence") is None,
                    f"the current assignment after a stale completion: {short(stale)}",
                )
                expect(
                    (now.get("todo") or {}).get("answer_message_id") == answer_id
                    and [r.get("message_id") for r in now.get("replies") or []] == [answer_id],
                    f"the current assignment does not show the worker's answer: {short(now)}",
                )

                # Neither the retry nor the stale attempt wrote anything to the board.
                after = tool_ok(
                    await coord.call_tool("observe_session_messages", {"session_id": csid, "token": token2}),
                    "observation after the retry and the stale completion",
                )
                expect(after.get("messages") == [], f"the board changed again: {short(after.get('messages'))}")
                listing = tool_ok(
                    await coord.call_tool("list_session_messages", {"session_id": csid}), "list_session_messages"
                )
                expect(
                    [(m.get("message_id"), m.get("status")) for m in listing.get("messages") or []]
                    == [(answer_id, "open"), (tid, "completed")],
                    f"the board holds {short(listing.get('messages'))}",
                )
                counts = listing.get("counts") or {}
                expect(
                    (counts.get("retained"), counts.get("open_todos")) == (2, 0),
                    f"board counts: {short(counts)}",
                )
                version = coord.protocol_version
        expect(
            set(wire_c.served_by()) == {0} and set(wire_w.served_by()) == {1} and set(wire_w2.served_by()) == {0},
            "routing is broken",
        )
        exchanges = wire_c.exchanges + wire_w.exchanges + wire_w2.exchanges
        bad = [x for x in exchanges if x[2] >= 400 and "tools/call" not in x[1]]
        expect(not bad, f"unexpected HTTP errors: {bad}")
        return (
            f"protocol {version}; todo completed on B by {wsid[:14]}…, seen by the coordinator on A after "
            f"waiting {waited_ms} ms; retry identical; stale fence: state_changed=false"
        )

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
                    check_tools(await c.list_tools(), "tools/list", mode),
                    check_runtime_status(await c.call_tool("runtime_status", {}), "runtime_status"),
                    check_projects(await c.call_tool("list_projects", {}), self.project_id, "list_projects"),
                )
        wire2 = Wire()
        async with self.routed(wire2) as hc:
            async with mcp_client(self.endpoint, hc, mode) as c:
                without = (
                    check_tools(await c.list_tools(), "tools/list", mode),
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
            f"[{mode}] message board: coordinator and workers in their own windows and sessions",
            lambda m=mode: suite.board_flow(m),
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

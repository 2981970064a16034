"""Durable MCP tasks (io.modelcontextprotocol/tasks) through a raw Streamable HTTP client.

The pinned Python SDK (mcp 2.3.0) does not speak the tasks extension, so this client writes
the 2026-07-28 wire itself (per-request _meta, Mcp-Method / Mcp-Name headers) with the standard
library only:

  create   run_job as a task on one instance, polled on both alternately until completed: the
           result is the job's (stdout "done"); then a long task is left running and its id
           printed, for the restart step.
  resume   after wc-local restarted, the left task is still readable and ends: its runner
           instance was replaced, so it completes with the tool error `lost`, on either
           instance, identically.
"""

import argparse
import itertools
import json
import sys
import time
import urllib.error
import urllib.request

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"


class Failed(Exception):
    pass


def check(ok, message):
    if not ok:
        raise Failed(message)


class Client:
    def __init__(self, base, token):
        self.base = base.rstrip("/")
        self.token = token
        self.ids = itertools.count(1)

    def request(self, method, params):
        params = dict(params)
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "wc-tasks-raw", "version": "1.0.0"},
        }
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
            "Authorization": f"Bearer {self.token}",
        }
        name = params.get("name") if method == "tools/call" else params.get("taskId")
        if name:
            headers["Mcp-Name"] = name
        req = urllib.request.Request(
            self.base + "/mcp", data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                reply = json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise Failed(f"{method}: HTTP {e.code}: {e.read()[:400]!r}") from e
        check("result" in reply, f"{method}: no result: {reply}")
        return reply["result"]


def poll(clients, task_id, limit_s=60):
    """tasks/get alternating between the instances until terminal; every answer checked."""
    deadline = time.monotonic() + limit_s
    for n in itertools.count():
        client = clients[n % len(clients)]
        t = client.request("tasks/get", {"taskId": task_id})
        check(t.get("resultType") == "complete", f"tasks/get resultType: {t}")
        check(t.get("taskId") == task_id, f"tasks/get answered another task: {t}")
        if t["status"] in ("completed", "failed", "cancelled"):
            return t, n + 1
        check(t["status"] == "working", f"unexpected status: {t}")
        check(time.monotonic() < deadline, f"task {task_id} did not end within {limit_s}s")
        time.sleep(max(t.get("pollIntervalMs", 200), 100) / 1000 / 4)


def create(clients, project):
    a, _ = clients
    made = a.request("tools/call", {"name": "run_job", "arguments": {"project": project, "command": "sleep 2; echo done"}})
    check(made.get("resultType") == "task", f"run_job did not become a task: {made}")
    for field in ("taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"):
        check(field in made, f"CreateTaskResult lacks {field}: {made}")
    done, polls = poll(clients, made["taskId"])
    check(done["status"] == "completed", f"not completed: {done}")
    sc = done["result"]["structuredContent"]
    check(sc["success"] is True and sc["output"]["stdout"] == "done\n", f"wrong result: {sc}")
    check(json.loads(done["result"]["content"][0]["text"]) == sc, "text block and structured content differ")
    left = a.request("tools/call", {"name": "run_job", "arguments": {"project": project, "command": "sleep 60; echo never"}})
    check(left.get("resultType") == "task", f"second run_job did not become a task: {left}")
    # Wait until its runner has it, so the restart happens in the middle of the run.
    for _ in range(200):
        job = a.request("tools/call", {"name": "list_jobs", "arguments": {"project": project}})
        jobs = job["structuredContent"]["output"]["jobs"]
        if any(j["execution_state"] == "running" for j in jobs):
            break
        time.sleep(0.05)
    else:
        raise Failed("the long job never started")
    print(f"created: completed after {polls} polls alternating two instances", file=sys.stderr)
    print(left["taskId"])


def resume(clients, task_id):
    done, polls = poll(clients, task_id)
    check(done["status"] == "completed", f"not completed after the restart: {done}")
    result = done["result"]
    check(result["isError"] is True, f"a job whose runner restarted cannot have succeeded: {result}")
    check(result["structuredContent"]["error"]["kind"] == "lost", f"expected lost: {result}")
    again = [c.request("tasks/get", {"taskId": task_id}) for c in clients]
    check(all(t["result"] == result for t in again), "the instances disagree on the ended task")
    print(f"resumed: ended lost after {polls} polls; readable on both instances", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["create", "resume"])
    p.add_argument("--instance", action="append", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--project-id")
    p.add_argument("--task-id")
    args = p.parse_args()
    clients = [Client(base, args.token) for base in args.instance]
    try:
        if args.step == "create":
            create(clients, args.project_id)
        else:
            resume(clients, args.task_id)
    except Failed as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Durable MCP tasks (io.modelcontextprotocol/tasks) through a raw Streamable HTTP client.

The pinned Python SDK (mcp 2.3.0) does not speak the tasks extension, so this client writes
the 2026-07-28 wire itself (per-request _meta, Mcp-Method / Mcp-Name headers) with the standard
library only:

  create   run_job as a task on one instance, polled on both alternately until completed: the
           result is the job's (stdout "done"); a listener on B is told of a task made on A
           live, through its cancel; then a long task is left running and its id printed, for
           the restart step.
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

    def post(self, method, params):
        """The open HTTP response to one request, and its id."""
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
            return urllib.request.urlopen(req, timeout=30), body["id"]
        except urllib.error.HTTPError as e:
            raise Failed(f"{method}: HTTP {e.code}: {e.read()[:400]!r}") from e

    def request(self, method, params):
        r, _ = self.post(method, params)
        with r:
            reply = json.loads(r.read())
        check("result" in reply, f"{method}: no result: {reply}")
        return reply["result"]

    def stream(self, method, params):
        """The request's id, and its event-stream messages as they arrive."""
        r, rid = self.post(method, params)
        kind = r.headers.get("Content-Type", "")
        if not kind.startswith("text/event-stream"):
            raise Failed(f"{method}: not a stream: {kind} {r.read()[:400]!r}")

        def messages():
            with r:
                for line in r:
                    line = line.decode().strip()
                    if line.startswith("data:") and line[5:].strip():
                        yield json.loads(line[5:])

        return rid, messages()


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
    listen_live(clients, project)
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


def listen_live(clients, project):
    """A listen on B for a task made on A is live: its first notification arrives while the
    task works, a cancel sent through A after it is told on the same stream, and the stream
    then ends with the listen's result. (Were the stream held back until its bound, the
    cancel would come after its end and no `cancelled` would be on it.)"""
    a, b = clients
    made = a.request("tools/call", {"name": "run_job", "arguments": {"project": project, "command": "sleep 60"}})
    task_id = made["taskId"]
    rid, messages = b.stream("subscriptions/listen", {"notifications": {"taskIds": [task_id]}})
    ack = next(messages)
    check(ack.get("method") == "notifications/subscriptions/acknowledged", f"no acknowledgement: {ack}")
    check(ack["params"]["notifications"].get("taskIds") == [task_id], f"task not acknowledged: {ack}")
    first = next(messages)
    check(first.get("method") == "notifications/tasks", f"not a task notification: {first}")
    check(first["params"]["taskId"] == task_id and first["params"]["status"] == "working", f"first: {first}")
    check(first["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == rid, f"subscription id: {first}")
    a.request("tasks/cancel", {"taskId": task_id})
    told = next(messages)
    check(told.get("method") == "notifications/tasks" and told["params"]["status"] == "cancelled", f"after cancel: {told}")
    end = next(messages)
    check(end.get("id") == rid and end["result"]["resultType"] == "complete", f"no final result: {end}")
    check(next(messages, None) is None, "the stream goes on after its result")
    print("listened: working, then cancelled through the other instance, live on one stream", file=sys.stderr)


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

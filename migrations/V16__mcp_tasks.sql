-- Durable MCP tasks (the `io.modelcontextprotocol/tasks` extension): a tool call answered with a
-- task handle whose result any function instance serves later. The row is the truth: its status,
-- the runner work it waits for, the recording it still owes its sessions, and its final result.
-- A terminal row (completed, failed, cancelled) never changes again; upkeep deletes a row once
-- its TTL has passed, and its id never addresses another task.
CREATE DOMAIN wc_task_id AS text CONSTRAINT wc_task_id_format
    CHECK (VALUE ~ '^wc_task_[A-Za-z0-9_-]{22}$');
CREATE DOMAIN wc_task_status AS text CONSTRAINT wc_task_status_values
    CHECK (VALUE IN ('working', 'input_required', 'completed', 'failed', 'cancelled'));

CREATE TABLE mcp_tasks (
    id                          wc_task_id      PRIMARY KEY,
    -- Only the creator's authority group sees the task; anyone else is told it does not exist.
    owner_authority_fingerprint wc_sha256_hex   NOT NULL,
    tool                        text            NOT NULL CHECK (tool ~ '^[a-z][a-z0-9_]{0,63}$'),
    status                      wc_task_status  NOT NULL DEFAULT 'working',
    status_message              text            CHECK (char_length(status_message) <= 1024),
    -- The runner work the call waits for (none for a task the server answers by itself).
    work_id                     uuid,
    -- The Workflow Session the call works in, when it names one.
    session_id                  wc_session_id,
    -- The call's recording, suspended: its `tool_call_finished` events land with the end.
    recording                   jsonb           NOT NULL DEFAULT '{}',
    -- What the task's driver keeps between polls.
    plan                        jsonb           NOT NULL DEFAULT '{}',
    -- Outstanding input requests by key, while input_required; answers received so far.
    input_requests              jsonb,
    input_responses             jsonb           NOT NULL DEFAULT '{}',
    result                      jsonb,
    error                       jsonb,
    cancel_requested_at         timestamptz,
    created_at                  timestamptz     NOT NULL DEFAULT now(),
    updated_at                  timestamptz     NOT NULL DEFAULT now(),
    ended_at                    timestamptz,
    ttl_ms                      bigint          NOT NULL CHECK (ttl_ms > 0),
    expires_at                  timestamptz     NOT NULL,
    poll_interval_ms            integer         NOT NULL CHECK (poll_interval_ms > 0),
    CHECK ((status = 'completed') = (result IS NOT NULL)),
    CHECK ((status = 'failed') = (error IS NOT NULL)),
    CHECK ((status = 'input_required') = (input_requests IS NOT NULL)),
    CHECK ((status IN ('completed', 'failed', 'cancelled')) = (ended_at IS NOT NULL))
);

CREATE INDEX mcp_tasks_open_work ON mcp_tasks (work_id)
    WHERE status IN ('working', 'input_required') AND work_id IS NOT NULL;
CREATE INDEX mcp_tasks_expiry ON mcp_tasks (expires_at);

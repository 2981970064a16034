-- Runner instances are ordered by the server, never by the ids runners choose. Until now the
-- registered instance was replaced only by a larger instance id, so one forged far-future
-- UUIDv7 locked a runner out. Now every instance id a runner registers gets the next number of
-- this table's sequence when it first registers; the newest registration is the current
-- instance, and an id that registered before (and was replaced) can never become current again.
-- A runner keeps only its newest instances here (the store prunes the rest on registration);
-- rotating a runner's token starts its lineage afresh.
CREATE TABLE runner_instances (
    client_id     text        NOT NULL REFERENCES runners (client_id) ON DELETE CASCADE,
    instance_id   uuid        NOT NULL,
    seq           bigint      GENERATED ALWAYS AS IDENTITY,
    registered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_id, instance_id)
);

CREATE INDEX runner_instances_newest ON runner_instances (client_id, seq DESC);

INSERT INTO runner_instances (client_id, instance_id, registered_at)
SELECT client_id, instance_id, coalesce(instance_started_at, now())
FROM runners WHERE instance_id IS NOT NULL;

-- Closing an audit session is a write: it takes the new scope `audit:write`. Shared keys that
-- could close sessions under `audit:read` keep that ability; project credentials that held only
-- `audit:read` now read, and close nothing.
UPDATE credentials SET scopes = array_append(scopes, 'audit:write'), version = version + 1
WHERE kind = 'shared_key' AND 'audit:read' = ANY (scopes) AND NOT ('audit:write' = ANY (scopes));

-- Audit reads of a caller that is not an operator list only that caller's sessions, newest
-- activity first; the caller's idle-open session (for reuse) is found through the same index.
DROP INDEX idx_action_sessions_caller_open;
CREATE INDEX idx_action_sessions_caller
    ON action_sessions (caller_fingerprint, last_event_at DESC, session_id DESC);

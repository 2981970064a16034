-- Action Audit Sessions: operator-facing grouping of audited HTTP requests. Not Workflow
-- Sessions: different ids (UUID or caller-supplied), different storage, no shared state.
CREATE TABLE action_sessions (
    session_id          text        PRIMARY KEY CHECK (char_length(session_id) BETWEEN 1 AND 128),
    -- Domain-separated SHA-256 of the caller that opened it; used only to find the caller's
    -- idle-open session for reuse. Never a raw identity.
    caller_fingerprint  text        NOT NULL CHECK (char_length(caller_fingerprint) = 64),
    status              text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    created_at          timestamptz NOT NULL DEFAULT now(),
    last_event_at       timestamptz NOT NULL DEFAULT now(),
    closed_at           timestamptz,
    event_count         bigint      NOT NULL DEFAULT 0 CHECK (event_count >= 0),
    error_count         bigint      NOT NULL DEFAULT 0 CHECK (error_count >= 0),
    total_duration_ms   bigint      NOT NULL DEFAULT 0 CHECK (total_duration_ms >= 0),
    version             bigint      NOT NULL DEFAULT 0
);

CREATE INDEX idx_action_sessions_status_last_event ON action_sessions (status, last_event_at DESC);
CREATE INDEX idx_action_sessions_caller_open ON action_sessions (caller_fingerprint, last_event_at DESC)
    WHERE status = 'open';
CREATE INDEX idx_action_sessions_last_event ON action_sessions (last_event_at DESC, session_id DESC);

CREATE TABLE action_events (
    id                uuid        PRIMARY KEY,
    session_id        text        NOT NULL REFERENCES action_sessions (session_id) ON DELETE CASCADE,
    seq               bigint      NOT NULL CHECK (seq >= 1),
    occurred_at       timestamptz NOT NULL DEFAULT now(),
    endpoint          text        NOT NULL CHECK (char_length(endpoint) <= 200),
    http_method       text        NOT NULL CHECK (char_length(http_method) <= 16),
    action_name       text        NOT NULL CHECK (char_length(action_name) <= 128),
    operation         text        NOT NULL CHECK (char_length(operation) <= 64),
    status_code       integer     NOT NULL,
    success           boolean     NOT NULL,
    duration_ms       bigint      NOT NULL CHECK (duration_ms >= 0),
    request_id        text        CHECK (char_length(request_id) <= 128),
    -- Bounded, metadata-only summary (transport, model_ergonomics, tool_surface).
    summary           jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (pg_column_size(summary) <= 8192),
    -- Caller attribution snapshotted at write time; never reconstructed later.
    principal_kind    text,
    principal_user_id text,
    oauth_client_id   text,
    UNIQUE (session_id, seq)
);

CREATE INDEX idx_action_events_occurred ON action_events (occurred_at DESC);

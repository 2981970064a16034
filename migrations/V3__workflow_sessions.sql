-- Workflow Sessions: the unit of coding continuity. One row per session (the aggregate root,
-- mutated only by compare-and-swap on version) and a bounded ledger of its events.
CREATE TABLE workflow_sessions (
    id                           text        PRIMARY KEY CHECK (id ~ '^wc_sess_[A-Za-z0-9_-]{22,64}$'),
    project                      text        NOT NULL CHECK (char_length(project) BETWEEN 1 AND 300),
    -- Domain-separated SHA-256 of the creating principal's authority group; never a raw identity.
    owner_authority_fingerprint  text        NOT NULL CHECK (owner_authority_fingerprint ~ '^[0-9a-f]{64}$'),
    mode                         text        NOT NULL CHECK (mode IN ('normal', 'read_only')),
    lifecycle                    text        NOT NULL CHECK (lifecycle IN ('active', 'finished', 'closed')),
    -- Execution defaults: {default_cwd?, default_shell?, resource?}.
    execution_context            jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (pg_column_size(execution_context) <= 4096),
    -- The first task instruction, redacted and bounded, kept here so retention cannot evict it.
    root_instruction             jsonb       CHECK (pg_column_size(root_instruction) <= 8192),
    -- Cumulative count of events ever appended (seq of the newest event).
    events_observed              bigint      NOT NULL DEFAULT 0 CHECK (events_observed >= 0),
    -- Lowest seq still retained; older events were removed by retention.
    retained_from_seq            bigint      NOT NULL DEFAULT 1 CHECK (retained_from_seq >= 1),
    message_observation_revision bigint      NOT NULL DEFAULT 0 CHECK (message_observation_revision >= 0),
    created_at                   timestamptz NOT NULL DEFAULT now(),
    updated_at                   timestamptz NOT NULL DEFAULT now(),
    finished_at                  timestamptz,
    closed_at                    timestamptz,
    version                      bigint      NOT NULL DEFAULT 0
);

CREATE TABLE session_events (
    session_id     text        NOT NULL REFERENCES workflow_sessions (id) ON DELETE CASCADE,
    seq            bigint      NOT NULL CHECK (seq >= 1),
    kind           text        NOT NULL CHECK (char_length(kind) BETWEEN 1 AND 64),
    occurred_at    timestamptz NOT NULL DEFAULT now(),
    call_id        uuid        NOT NULL,
    -- One id per kernel invocation, shared by its recorder pair and its business pair.
    invocation_id  uuid        NOT NULL,
    role           text        NOT NULL CHECK (role IN ('recorder', 'business')),
    tool_name      text        CHECK (char_length(tool_name) <= 128),
    -- Bounded, redacted, structured evidence; never stdout/stderr bodies.
    payload        jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (pg_column_size(payload) <= 8192),
    PRIMARY KEY (session_id, seq)
);

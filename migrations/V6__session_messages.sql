-- The session message board. Each message is its own row (CAS-guarded by `version`); the
-- session row carries the board's shared state: the message observation revision (already in
-- V3), how many messages are retained, how many were ever posted (message numbering), how many
-- open ACK-required messages exist (so recorded calls skip the attention read when there are
-- none), and the low-watermark of observation history removed by retention.
ALTER TABLE workflow_sessions
    ADD COLUMN messages_posted          bigint  NOT NULL DEFAULT 0 CHECK (messages_posted >= 0),
    ADD COLUMN messages_retained        integer NOT NULL DEFAULT 0 CHECK (messages_retained >= 0),
    ADD COLUMN open_ack_required        integer NOT NULL DEFAULT 0 CHECK (open_ack_required >= 0),
    -- The newest observation revision of any message removed by retention: a cursor older
    -- than this may have missed a change that can no longer be shown (`history_lost`).
    ADD COLUMN message_history_lost_through bigint NOT NULL DEFAULT 0 CHECK (message_history_lost_through >= 0);

CREATE TABLE session_messages (
    id                    text        PRIMARY KEY CHECK (id ~ '^wc_msg_[A-Za-z0-9_-]{22}$'),
    session_id            text        NOT NULL REFERENCES workflow_sessions (id) ON DELETE CASCADE,
    -- Position among the session's messages, 1, 2, 3, … in posting order.
    number                bigint      NOT NULL CHECK (number >= 1),
    kind                  text        NOT NULL CHECK (kind IN ('note', 'question', 'todo', 'answer')),
    priority              text        NOT NULL CHECK (priority IN ('low', 'normal', 'high')),
    ack_required          boolean     NOT NULL,
    -- A message of the same session; not a foreign key, since retention may remove the parent.
    reply_to              text        CHECK (reply_to IS NULL OR reply_to ~ '^wc_msg_[A-Za-z0-9_-]{22}$'),
    status                text        NOT NULL CHECK (status IN ('open', 'resolved', 'completed')),
    -- Redacted before it is stored; bounded in characters by the tools (docs/TOOLS.md).
    body                  text        NOT NULL CHECK (octet_length(body) BETWEEN 1 AND 65536),
    body_redacted         boolean     NOT NULL,
    -- Only from an authorized recorder; absent otherwise, never inferred.
    author_session_id     text        CHECK (author_session_id IS NULL OR author_session_id ~ '^wc_sess_'),
    -- Revision of this message's latest observable change (unique within the session).
    observation_revision  bigint      NOT NULL CHECK (observation_revision >= 1),
    -- Todos: bumped by every assignment-local change (its status, its direct replies).
    assignment_revision   bigint      NOT NULL DEFAULT 0 CHECK (assignment_revision >= 0),
    -- Todos: direct replies ever posted, and whether retention removed one of them.
    reply_count           integer     NOT NULL DEFAULT 0 CHECK (reply_count >= 0),
    replies_pruned        boolean     NOT NULL DEFAULT false,
    -- Todos: the answer that completed it.
    answer_message_id     text,
    first_ack_observed_at timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    closed_at             timestamptz,
    version               bigint      NOT NULL DEFAULT 0,
    CHECK (status <> 'completed' OR kind = 'todo'),
    CHECK (kind <> 'answer' OR reply_to IS NOT NULL)
);

CREATE UNIQUE INDEX session_messages_by_number ON session_messages (session_id, number);
CREATE UNIQUE INDEX session_messages_by_revision ON session_messages (session_id, observation_revision);
CREATE INDEX session_messages_replies ON session_messages (session_id, reply_to) WHERE reply_to IS NOT NULL;
CREATE INDEX session_messages_open_ack ON session_messages (session_id, number)
    WHERE ack_required AND status = 'open';
-- Retention's first choice: the oldest closed messages.
CREATE INDEX session_messages_closed ON session_messages (session_id, number)
    WHERE status <> 'open';

-- Accepted completions, by the caller's completion key: the fingerprint of what was asked and
-- the result that was returned, so a replay returns it again with no new effect. Removed with
-- the todo.
CREATE TABLE session_completions (
    session_id     text        NOT NULL REFERENCES workflow_sessions (id) ON DELETE CASCADE,
    completion_key text        NOT NULL CHECK (char_length(completion_key) BETWEEN 1 AND 128),
    todo_id        text        NOT NULL REFERENCES session_messages (id) ON DELETE CASCADE,
    fingerprint    text        NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    result         jsonb       NOT NULL CHECK (pg_column_size(result) <= 8192),
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, completion_key)
);

-- Server secrets generated on first use when configuration supplies none (the key that makes
-- observation tokens and assignment fences tamper-evident, stable across restarts).
CREATE TABLE server_secrets (
    name       text        PRIMARY KEY CHECK (char_length(name) BETWEEN 1 AND 64),
    secret     bytea       NOT NULL CHECK (octet_length(secret) >= 32),
    created_at timestamptz NOT NULL DEFAULT now()
);

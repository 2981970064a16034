-- Runners and their work. A runner is one build host (a stable client id) with a token stored
-- only as a digest; the process currently serving it is its instance. Work is one row per unit,
-- mutated only by guarded single-statement transitions; with the Postgres queue the row itself
-- is the queue (claimed with FOR UPDATE SKIP LOCKED).
CREATE TABLE runners (
    client_id           text        PRIMARY KEY CHECK (client_id ~ '^[A-Za-z0-9._-]{1,64}$'),
    label               text        CHECK (label IS NULL OR char_length(label) <= 200),
    secret_sha256       bytea       NOT NULL UNIQUE CHECK (octet_length(secret_sha256) = 32),
    created_at          timestamptz NOT NULL DEFAULT now(),
    revoked_at          timestamptz,
    -- The registered process; a newer registration replaces it and loses its open work.
    instance_id         uuid,
    instance_started_at timestamptz,
    last_seen_at        timestamptz,
    agent_version       text        CHECK (char_length(agent_version) <= 64),
    queue               text        CHECK (queue IN ('api_poll', 'sqs')),
    max_concurrency     integer     CHECK (max_concurrency BETWEEN 1 AND 256),
    projects            text[]      NOT NULL DEFAULT '{}' CHECK (cardinality(projects) <= 256),
    version             bigint      NOT NULL DEFAULT 0
);

CREATE TABLE runner_work (
    id                          uuid        PRIMARY KEY,
    client_id                   text        NOT NULL CHECK (char_length(client_id) BETWEEN 1 AND 64),
    project_id                  text        NOT NULL CHECK (char_length(project_id) BETWEEN 1 AND 300),
    -- Who may see and stop it: the creating principal's authority-group fingerprint.
    owner_authority_fingerprint text        NOT NULL CHECK (owner_authority_fingerprint ~ '^[0-9a-f]{64}$'),
    session_id                  text,
    tool                        text        NOT NULL CHECK (char_length(tool) BETWEEN 1 AND 64),
    mode                        text        NOT NULL CHECK (mode IN ('sync', 'job')),
    -- The WorkItem as the runner receives it (bounded by the protocol).
    item                        jsonb       NOT NULL CHECK (pg_column_size(item) <= 600000),
    -- {result_expectation, accepted_exit_codes, purpose}: server-side classification only.
    expectation                 jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (pg_column_size(expectation) <= 4096),
    queue                       text        NOT NULL CHECK (queue IN ('postgres', 'sqs')),
    state                       text        NOT NULL DEFAULT 'queued'
                                            CHECK (state IN ('queued', 'leased', 'succeeded', 'failed', 'cancelled', 'lost')),
    instance_id                 uuid,
    lease_token                 uuid,
    lease_expires_at            timestamptz,
    cancel_requested_at         timestamptz,
    -- The runner's WorkOutcome, once terminal by report.
    outcome                     jsonb       CHECK (pg_column_size(outcome) <= 4096),
    -- Why the work ended without a report: expired lease, replaced instance, stopped while queued.
    end_reason                  text        CHECK (char_length(end_reason) <= 64),
    -- Set once, when the terminal evidence was appended to the session (never twice).
    evidence_recorded_at        timestamptz,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    leased_at                   timestamptz,
    finished_at                 timestamptz,
    version                     bigint      NOT NULL DEFAULT 0,
    -- Leased work always has a live lease; terminal work keeps its last token so a repeated
    -- identical result can be recognised.
    CHECK (state <> 'leased' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL))
);

CREATE INDEX runner_work_queued ON runner_work (client_id, created_at) WHERE state = 'queued';
CREATE INDEX runner_work_leased ON runner_work (lease_expires_at) WHERE state = 'leased';
CREATE INDEX runner_work_by_project ON runner_work (project_id, created_at DESC);
CREATE INDEX runner_work_by_session ON runner_work (session_id, created_at DESC) WHERE session_id IS NOT NULL;
CREATE INDEX runner_work_finished ON runner_work (finished_at) WHERE finished_at IS NOT NULL;

-- Kept output, in chunks at byte offsets of each stream. Written only under a live lease.
CREATE TABLE runner_work_output (
    work_id     uuid   NOT NULL REFERENCES runner_work (id) ON DELETE CASCADE,
    stream      text   NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    byte_offset bigint NOT NULL CHECK (byte_offset >= 0),
    data        bytea  NOT NULL CHECK (octet_length(data) BETWEEN 1 AND 65536),
    PRIMARY KEY (work_id, stream, byte_offset)
);

-- SQS publication staged in the enqueuing transaction and sent after commit.
CREATE TABLE runner_outbox (
    id              bigserial   PRIMARY KEY,
    work_id         uuid        NOT NULL REFERENCES runner_work (id) ON DELETE CASCADE,
    queue_url       text        NOT NULL CHECK (char_length(queue_url) BETWEEN 1 AND 2048),
    created_at      timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text        CHECK (char_length(last_error) <= 1000)
);
CREATE INDEX runner_outbox_due ON runner_outbox (next_attempt_at);

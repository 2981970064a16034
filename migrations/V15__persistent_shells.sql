-- Persistent shells: one runner-owned shell process per Workflow Session at a time. The row is
-- the durable truth every function instance reads (its state, and which work it serves), the
-- process lives on the runner instance that opened it. A terminal row (closed, exited, poisoned,
-- lost) never changes again, and its id never addresses another shell.
CREATE DOMAIN wc_shell_id AS text CONSTRAINT wc_shell_id_format
    CHECK (VALUE ~ '^wc_shell_[A-Za-z0-9_-]{22}$');
CREATE DOMAIN wc_shell_state AS text CONSTRAINT wc_shell_state_values
    CHECK (VALUE IN ('opening', 'ready', 'busy', 'closed', 'exited', 'poisoned', 'lost'));

CREATE TABLE persistent_shells (
    id                          wc_shell_id     PRIMARY KEY,
    session_id                  wc_session_id   NOT NULL REFERENCES workflow_sessions (id) ON DELETE CASCADE,
    project_id                  wc_project_id   NOT NULL,
    client_id                   text            NOT NULL CHECK (client_id ~ '^[A-Za-z0-9._-]{1,64}$'),
    -- The runner process that owns it: work for it is answered by that instance only.
    instance_id                 uuid            NOT NULL,
    owner_authority_fingerprint wc_sha256_hex   NOT NULL,
    dialect                     text            NOT NULL CHECK (dialect IN ('sh', 'bash')),
    -- The directory it was opened in, relative to the project root ('' is the root).
    cwd                         text            NOT NULL CHECK (char_length(cwd) <= 1024),
    state                       wc_shell_state  NOT NULL DEFAULT 'opening',
    -- The one operation it serves (its open, or the running command), while opening or busy.
    busy_work_id                uuid,
    -- Why it ended: closed, session_ended, idle_expired, exited, poisoned, open_failed, …
    end_reason                  wc_text_64,
    created_at                  timestamptz     NOT NULL DEFAULT now(),
    last_used_at                timestamptz     NOT NULL DEFAULT now(),
    ended_at                    timestamptz,
    version                     bigint          NOT NULL DEFAULT 0,
    CHECK ((state IN ('opening', 'busy')) = (busy_work_id IS NOT NULL)),
    CHECK ((state IN ('closed', 'exited', 'poisoned', 'lost')) = (ended_at IS NOT NULL))
);

CREATE UNIQUE INDEX persistent_shells_one_open ON persistent_shells (session_id)
    WHERE state IN ('opening', 'ready', 'busy');
CREATE INDEX persistent_shells_by_instance ON persistent_shells (client_id, instance_id)
    WHERE state IN ('opening', 'ready', 'busy');
CREATE INDEX persistent_shells_idle ON persistent_shells (last_used_at) WHERE state = 'ready';
CREATE INDEX persistent_shells_busy ON persistent_shells (busy_work_id) WHERE busy_work_id IS NOT NULL;
CREATE INDEX persistent_shells_ended ON persistent_shells (ended_at) WHERE ended_at IS NOT NULL;

-- Credentials: bearer secrets are stored only as SHA-256 digests.
CREATE TABLE credentials (
    id              uuid        PRIMARY KEY,
    kind            text        NOT NULL CHECK (kind IN ('shared_key', 'project')),
    label           text        CHECK (label IS NULL OR char_length(label) <= 200),
    -- Sessions created through this credential are owned by this group; several credentials
    -- (a rotated key, say) may share one group so that rotation does not orphan sessions.
    authority_group text        NOT NULL CHECK (char_length(authority_group) BETWEEN 1 AND 200),
    scopes          text[]      NOT NULL,
    projects        text[]      NOT NULL DEFAULT '{}',
    secret_sha256   bytea       NOT NULL UNIQUE CHECK (octet_length(secret_sha256) = 32),
    created_at      timestamptz NOT NULL DEFAULT now(),
    revoked_at      timestamptz,
    version         bigint      NOT NULL DEFAULT 0,
    CHECK (kind <> 'project' OR cardinality(projects) > 0)
);

-- Projects known to the control plane. The host root stays with the runner that serves it.
CREATE TABLE projects (
    id            text        PRIMARY KEY CHECK (char_length(id) BETWEEN 1 AND 300),
    name          text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    client_id     text        NOT NULL CHECK (char_length(client_id) BETWEEN 1 AND 200),
    registered_at timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    version       bigint      NOT NULL DEFAULT 0
);

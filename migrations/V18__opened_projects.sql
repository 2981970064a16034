-- Projects a caller opened through a runner: a checkout as itself, or a managed worktree the
-- runner made. The paths are the runner's words for its host, stored as it answered them;
-- the server never builds one. Configured projects keep origin 'configured' and no facts.
ALTER TABLE projects
    ADD COLUMN origin text NOT NULL DEFAULT 'configured'
        CHECK (origin IN ('configured', 'checkout', 'worktree')),
    ADD COLUMN root text CHECK (char_length(root) BETWEEN 1 AND 4096),
    ADD COLUMN source_path text CHECK (char_length(source_path) BETWEEN 1 AND 4096),
    ADD COLUMN base_commit text CHECK (base_commit ~ '^[0-9a-f]{40}([0-9a-f]{24})?$'),
    ADD COLUMN opened_by_kind text CHECK (char_length(opened_by_kind) BETWEEN 1 AND 40),
    ADD COLUMN opened_by_authority text CHECK (char_length(opened_by_authority) BETWEEN 1 AND 200),
    ADD COLUMN opened_at timestamptz,
    ADD COLUMN removed_at timestamptz,
    ADD CONSTRAINT projects_opened_facts CHECK (
        (origin = 'configured') = (opened_at IS NULL)
        AND (origin = 'configured') = (root IS NULL)
        AND (origin = 'configured') = (source_path IS NULL)
        AND (origin = 'configured') = (opened_by_authority IS NULL)),
    ADD CONSTRAINT projects_worktree_base CHECK ((origin = 'worktree') = (base_commit IS NOT NULL)),
    ADD CONSTRAINT projects_removed_worktrees CHECK (removed_at IS NULL OR origin = 'worktree');


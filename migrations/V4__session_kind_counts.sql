-- Cumulative event counts by kind, kept on the session row by every append, so a summary reads
-- them in O(1) instead of grouping the retained ledger. Sessions that already exist start from
-- the counts of their retained events.
ALTER TABLE workflow_sessions
    ADD COLUMN kind_counts jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (pg_column_size(kind_counts) <= 4096);

UPDATE workflow_sessions s
SET kind_counts = coalesce(
    (SELECT jsonb_object_agg(kind, n)
     FROM (SELECT kind, count(*) AS n FROM session_events e WHERE e.session_id = s.id GROUP BY kind) k),
    '{}'::jsonb);

-- kind_counts now counts the retained ledger: every write subtracts the kinds of the events
-- retention deletes. Sessions whose ledger was already truncated held cumulative counts; they
-- start from the counts of their retained events.
UPDATE workflow_sessions s
SET kind_counts = coalesce(
    (SELECT jsonb_object_agg(kind, n)
     FROM (SELECT kind, count(*) AS n FROM session_events e
           WHERE e.session_id = s.id AND e.seq >= s.retained_from_seq
           GROUP BY kind) k),
    '{}'::jsonb)
WHERE s.retained_from_seq > 1;

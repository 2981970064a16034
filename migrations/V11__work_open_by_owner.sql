-- Quotas and fair claims of runner work. Who queued a work item is already on its row: the
-- authority-group fingerprint of the creating principal (`owner_authority_fingerprint`, the
-- same domain-separated SHA-256 a Workflow Session stores as its owner, never a raw identity).
-- These indexes make the questions asked on every enqueue and claim cheap, whatever the number
-- of finished rows kept for a week:
-- - how much open (queued or leased) work one authority group has, and on which runner (the
--   per-caller quota, the fair claim's per-caller leases, `list_runners`' work in flight);
-- - how much open work one project has (the per-project quota).
-- Both are partial indexes over open work only, so they stay as small as the live queue.
CREATE INDEX runner_work_open_by_owner ON runner_work (owner_authority_fingerprint, client_id)
    WHERE state IN ('queued', 'leased');
CREATE INDEX runner_work_open_by_project ON runner_work (project_id)
    WHERE state IN ('queued', 'leased');

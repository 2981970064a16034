-- A caller's open persistent shells, counted when it opens another (its per-caller bound).
CREATE INDEX persistent_shells_open_by_owner ON persistent_shells (owner_authority_fingerprint)
    WHERE state IN ('opening', 'ready', 'busy');

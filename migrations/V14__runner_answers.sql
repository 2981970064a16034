-- Work a runner executes itself (explore, edit and Git operations) ends with a typed answer
-- of up to 2 MiB of JSON. It gets its own column, read only by the call that asked, so the
-- outcome stays small on every other read of a work row. Runners announce the kinds of work
-- they execute; a runner registered before that (NULL) executes processes, shells and scripts.

CREATE DOMAIN wc_work_answer AS jsonb CONSTRAINT wc_work_answer_size
    CHECK (pg_column_size(VALUE) <= 4194304);
CREATE DOMAIN wc_work_kinds AS text[] CONSTRAINT wc_work_kinds_bound
    CHECK (cardinality(VALUE) <= 32);

ALTER TABLE runner_work ADD COLUMN answer wc_work_answer;
ALTER TABLE runners ADD COLUMN work_kinds wc_work_kinds;

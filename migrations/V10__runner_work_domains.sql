-- The work rows' single-column rules become column types, as V9 did for the session, board
-- and audit tables: a work row is written at every step of its life (queued, leased, each
-- heartbeat, the result), and each of those statements rebuilt and re-ran all twelve table
-- rules. The rule over several columns (a leased row has a live lease) stays a table
-- constraint.

CREATE DOMAIN wc_runner_ref AS text CONSTRAINT wc_runner_ref_length
    CHECK (char_length(VALUE) BETWEEN 1 AND 64);
CREATE DOMAIN wc_work_tool AS text CONSTRAINT wc_work_tool_length
    CHECK (char_length(VALUE) BETWEEN 1 AND 64);
CREATE DOMAIN wc_work_mode AS text CONSTRAINT wc_work_mode_values
    CHECK (VALUE IN ('sync', 'job'));
CREATE DOMAIN wc_work_item AS jsonb CONSTRAINT wc_work_item_size
    CHECK (pg_column_size(VALUE) <= 600000);
CREATE DOMAIN wc_work_queue AS text CONSTRAINT wc_work_queue_values
    CHECK (VALUE IN ('postgres', 'sqs'));
CREATE DOMAIN wc_work_state AS text CONSTRAINT wc_work_state_values
    CHECK (VALUE IN ('queued', 'leased', 'succeeded', 'failed', 'cancelled', 'lost'));
CREATE DOMAIN wc_output_stream AS text CONSTRAINT wc_output_stream_values
    CHECK (VALUE IN ('stdout', 'stderr'));
CREATE DOMAIN wc_output_chunk AS bytea CONSTRAINT wc_output_chunk_size
    CHECK (octet_length(VALUE) BETWEEN 1 AND 65536);

ALTER TABLE runner_work
    DROP CONSTRAINT runner_work_client_id_check,
    DROP CONSTRAINT runner_work_project_id_check,
    DROP CONSTRAINT runner_work_owner_authority_fingerprint_check,
    DROP CONSTRAINT runner_work_tool_check,
    DROP CONSTRAINT runner_work_mode_check,
    DROP CONSTRAINT runner_work_item_check,
    DROP CONSTRAINT runner_work_expectation_check,
    DROP CONSTRAINT runner_work_queue_check,
    DROP CONSTRAINT runner_work_state_check,
    DROP CONSTRAINT runner_work_outcome_check,
    DROP CONSTRAINT runner_work_end_reason_check,
    ALTER COLUMN client_id TYPE wc_runner_ref,
    ALTER COLUMN project_id TYPE wc_project_id,
    ALTER COLUMN owner_authority_fingerprint TYPE wc_sha256_hex,
    ALTER COLUMN tool TYPE wc_work_tool,
    ALTER COLUMN mode TYPE wc_work_mode,
    ALTER COLUMN item TYPE wc_work_item,
    ALTER COLUMN expectation TYPE wc_jsonb_4k,
    ALTER COLUMN queue TYPE wc_work_queue,
    ALTER COLUMN state TYPE wc_work_state,
    ALTER COLUMN outcome TYPE wc_jsonb_4k,
    ALTER COLUMN end_reason TYPE wc_text_64;

ALTER TABLE runner_work_output
    DROP CONSTRAINT runner_work_output_stream_check,
    DROP CONSTRAINT runner_work_output_byte_offset_check,
    DROP CONSTRAINT runner_work_output_data_check,
    ALTER COLUMN stream TYPE wc_output_stream,
    ALTER COLUMN byte_offset TYPE wc_count,
    ALTER COLUMN data TYPE wc_output_chunk;

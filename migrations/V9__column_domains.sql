-- Single-column rules of the busiest tables become column types (domains) instead of table
-- CHECK constraints, with the same predicates.
--
-- PostgreSQL evaluates every CHECK constraint of a table on every row an INSERT or UPDATE
-- writes, and rebuilds each one from its stored text (parse, plan, compile) once per statement
-- execution. The session row is updated by every recorded call and every board change, so its
-- seventeen rules were rebuilt and re-run (two regular expressions among them) on each one,
-- even when the statement only advanced counters. A domain's rule is kept compiled by the
-- backend and is checked only when a value of that column is written: an INSERT checks every
-- column as before, an UPDATE only the columns it sets. A value that breaks a rule is refused
-- exactly as before (an error naming the domain's constraint), and a column that is not
-- written keeps a value that was checked when it was.
--
-- Rules over several columns stay table constraints. Parameters assigned straight to one of
-- these columns are cast to the base type in the SQL (`$1::text`), since a client sees the
-- parameter's type as the domain.

CREATE DOMAIN wc_session_id AS text CONSTRAINT wc_session_id_format
    CHECK (VALUE ~ '^wc_sess_[A-Za-z0-9_-]{22,64}$');
CREATE DOMAIN wc_message_id AS text CONSTRAINT wc_message_id_format
    CHECK (VALUE ~ '^wc_msg_[A-Za-z0-9_-]{22}$');
CREATE DOMAIN wc_author_session AS text CONSTRAINT wc_author_session_format
    CHECK (VALUE ~ '^wc_sess_');
CREATE DOMAIN wc_sha256_hex AS text CONSTRAINT wc_sha256_hex_format
    CHECK (VALUE ~ '^[0-9a-f]{64}$');
CREATE DOMAIN wc_project_id AS text CONSTRAINT wc_project_id_length
    CHECK (char_length(VALUE) BETWEEN 1 AND 300);
CREATE DOMAIN wc_count AS bigint CONSTRAINT wc_count_nonnegative CHECK (VALUE >= 0);
CREATE DOMAIN wc_count32 AS integer CONSTRAINT wc_count32_nonnegative CHECK (VALUE >= 0);
CREATE DOMAIN wc_ordinal AS bigint CONSTRAINT wc_ordinal_positive CHECK (VALUE >= 1);
CREATE DOMAIN wc_jsonb_4k AS jsonb CONSTRAINT wc_jsonb_4k_size CHECK (pg_column_size(VALUE) <= 4096);
CREATE DOMAIN wc_jsonb_8k AS jsonb CONSTRAINT wc_jsonb_8k_size CHECK (pg_column_size(VALUE) <= 8192);
CREATE DOMAIN wc_text_16 AS text CONSTRAINT wc_text_16_length CHECK (char_length(VALUE) <= 16);
CREATE DOMAIN wc_text_64 AS text CONSTRAINT wc_text_64_length CHECK (char_length(VALUE) <= 64);
CREATE DOMAIN wc_text_128 AS text CONSTRAINT wc_text_128_length CHECK (char_length(VALUE) <= 128);
CREATE DOMAIN wc_text_200 AS text CONSTRAINT wc_text_200_length CHECK (char_length(VALUE) <= 200);

-- Workflow Sessions.
CREATE DOMAIN wc_session_mode AS text CONSTRAINT wc_session_mode_values
    CHECK (VALUE IN ('normal', 'read_only'));
CREATE DOMAIN wc_session_lifecycle AS text CONSTRAINT wc_session_lifecycle_values
    CHECK (VALUE IN ('active', 'finished', 'closed'));
-- The message board's retention bound (wc_store::board::MAX_RETAINED_MESSAGES), as before: a
-- change that would leave more than 500 messages on one board is refused whole.
CREATE DOMAIN wc_board_retained AS integer
    CONSTRAINT wc_board_retained_nonnegative CHECK (VALUE >= 0)
    CONSTRAINT workflow_sessions_messages_retained_bound CHECK (VALUE <= 500);
CREATE DOMAIN wc_event_kind AS text CONSTRAINT wc_event_kind_length
    CHECK (char_length(VALUE) BETWEEN 1 AND 64);
CREATE DOMAIN wc_event_role AS text CONSTRAINT wc_event_role_values
    CHECK (VALUE IN ('recorder', 'business'));

ALTER TABLE workflow_sessions
    DROP CONSTRAINT workflow_sessions_id_check,
    DROP CONSTRAINT workflow_sessions_project_check,
    DROP CONSTRAINT workflow_sessions_owner_authority_fingerprint_check,
    DROP CONSTRAINT workflow_sessions_mode_check,
    DROP CONSTRAINT workflow_sessions_lifecycle_check,
    DROP CONSTRAINT workflow_sessions_execution_context_check,
    DROP CONSTRAINT workflow_sessions_root_instruction_check,
    DROP CONSTRAINT workflow_sessions_events_observed_check,
    DROP CONSTRAINT workflow_sessions_retained_from_seq_check,
    DROP CONSTRAINT workflow_sessions_message_observation_revision_check,
    DROP CONSTRAINT workflow_sessions_kind_counts_check,
    DROP CONSTRAINT workflow_sessions_messages_posted_check,
    DROP CONSTRAINT workflow_sessions_messages_retained_check,
    DROP CONSTRAINT workflow_sessions_messages_retained_bound,
    DROP CONSTRAINT workflow_sessions_open_ack_required_check,
    DROP CONSTRAINT workflow_sessions_message_history_lost_through_check,
    DROP CONSTRAINT workflow_sessions_messages_low_number_check,
    ALTER COLUMN id TYPE wc_session_id,
    ALTER COLUMN project TYPE wc_project_id,
    ALTER COLUMN owner_authority_fingerprint TYPE wc_sha256_hex,
    ALTER COLUMN mode TYPE wc_session_mode,
    ALTER COLUMN lifecycle TYPE wc_session_lifecycle,
    ALTER COLUMN execution_context TYPE wc_jsonb_4k,
    ALTER COLUMN root_instruction TYPE wc_jsonb_8k,
    ALTER COLUMN events_observed TYPE wc_count,
    ALTER COLUMN retained_from_seq TYPE wc_ordinal,
    ALTER COLUMN message_observation_revision TYPE wc_count,
    ALTER COLUMN kind_counts TYPE wc_jsonb_4k,
    ALTER COLUMN messages_posted TYPE wc_count,
    ALTER COLUMN messages_retained TYPE wc_board_retained,
    ALTER COLUMN open_ack_required TYPE wc_count32,
    ALTER COLUMN message_history_lost_through TYPE wc_count,
    ALTER COLUMN messages_low_number TYPE wc_ordinal;

ALTER TABLE session_events
    DROP CONSTRAINT session_events_seq_check,
    DROP CONSTRAINT session_events_kind_check,
    DROP CONSTRAINT session_events_role_check,
    DROP CONSTRAINT session_events_tool_name_check,
    DROP CONSTRAINT session_events_payload_check,
    ALTER COLUMN seq TYPE wc_ordinal,
    ALTER COLUMN kind TYPE wc_event_kind,
    ALTER COLUMN role TYPE wc_event_role,
    ALTER COLUMN tool_name TYPE wc_text_128,
    ALTER COLUMN payload TYPE wc_jsonb_8k;

-- The message board.
CREATE DOMAIN wc_message_kind AS text CONSTRAINT wc_message_kind_values
    CHECK (VALUE IN ('note', 'question', 'todo', 'answer'));
CREATE DOMAIN wc_message_priority AS text CONSTRAINT wc_message_priority_values
    CHECK (VALUE IN ('low', 'normal', 'high'));
CREATE DOMAIN wc_message_status AS text CONSTRAINT wc_message_status_values
    CHECK (VALUE IN ('open', 'resolved', 'completed'));
CREATE DOMAIN wc_message_body AS text CONSTRAINT wc_message_body_size
    CHECK (octet_length(VALUE) BETWEEN 1 AND 65536);

ALTER TABLE session_messages
    DROP CONSTRAINT session_messages_id_check,
    DROP CONSTRAINT session_messages_number_check,
    DROP CONSTRAINT session_messages_kind_check,
    DROP CONSTRAINT session_messages_priority_check,
    DROP CONSTRAINT session_messages_reply_to_check,
    DROP CONSTRAINT session_messages_status_check,
    DROP CONSTRAINT session_messages_body_check,
    DROP CONSTRAINT session_messages_author_session_id_check,
    DROP CONSTRAINT session_messages_observation_revision_check,
    DROP CONSTRAINT session_messages_assignment_revision_check,
    DROP CONSTRAINT session_messages_reply_count_check,
    ALTER COLUMN id TYPE wc_message_id,
    ALTER COLUMN number TYPE wc_ordinal,
    ALTER COLUMN kind TYPE wc_message_kind,
    ALTER COLUMN priority TYPE wc_message_priority,
    ALTER COLUMN reply_to TYPE wc_message_id,
    ALTER COLUMN status TYPE wc_message_status,
    ALTER COLUMN body TYPE wc_message_body,
    ALTER COLUMN author_session_id TYPE wc_author_session,
    ALTER COLUMN observation_revision TYPE wc_ordinal,
    ALTER COLUMN assignment_revision TYPE wc_count,
    ALTER COLUMN reply_count TYPE wc_count32;

-- Action Audit Sessions.
CREATE DOMAIN wc_audit_session_id AS text CONSTRAINT wc_audit_session_id_length
    CHECK (char_length(VALUE) BETWEEN 1 AND 128);
CREATE DOMAIN wc_audit_caller AS text CONSTRAINT wc_audit_caller_length
    CHECK (char_length(VALUE) = 64);
CREATE DOMAIN wc_audit_status AS text CONSTRAINT wc_audit_status_values
    CHECK (VALUE IN ('open', 'closed'));

ALTER TABLE action_sessions
    DROP CONSTRAINT action_sessions_session_id_check,
    DROP CONSTRAINT action_sessions_caller_fingerprint_check,
    DROP CONSTRAINT action_sessions_status_check,
    DROP CONSTRAINT action_sessions_event_count_check,
    DROP CONSTRAINT action_sessions_error_count_check,
    DROP CONSTRAINT action_sessions_total_duration_ms_check,
    ALTER COLUMN session_id TYPE wc_audit_session_id,
    ALTER COLUMN caller_fingerprint TYPE wc_audit_caller,
    ALTER COLUMN status TYPE wc_audit_status,
    ALTER COLUMN event_count TYPE wc_count,
    ALTER COLUMN error_count TYPE wc_count,
    ALTER COLUMN total_duration_ms TYPE wc_count;

ALTER TABLE action_events
    DROP CONSTRAINT action_events_seq_check,
    DROP CONSTRAINT action_events_endpoint_check,
    DROP CONSTRAINT action_events_http_method_check,
    DROP CONSTRAINT action_events_action_name_check,
    DROP CONSTRAINT action_events_operation_check,
    DROP CONSTRAINT action_events_duration_ms_check,
    DROP CONSTRAINT action_events_request_id_check,
    DROP CONSTRAINT action_events_summary_check,
    ALTER COLUMN seq TYPE wc_ordinal,
    ALTER COLUMN endpoint TYPE wc_text_200,
    ALTER COLUMN http_method TYPE wc_text_16,
    ALTER COLUMN action_name TYPE wc_text_128,
    ALTER COLUMN operation TYPE wc_text_64,
    ALTER COLUMN duration_ms TYPE wc_count,
    ALTER COLUMN request_id TYPE wc_text_128,
    ALTER COLUMN summary TYPE wc_jsonb_8k;

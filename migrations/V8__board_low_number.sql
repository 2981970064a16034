-- The board's low-water number: every message of the session numbered below it has been
-- removed by retention. The oldest-first searches for a message to remove start there instead
-- of stepping over the index entries of every message removed since the table was last
-- vacuumed. Any value at or below the lowest retained number is correct; 1 always is.
ALTER TABLE workflow_sessions
    ADD COLUMN messages_low_number bigint NOT NULL DEFAULT 1 CHECK (messages_low_number >= 1);

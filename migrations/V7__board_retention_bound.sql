-- The message board's retention bound, enforced by the database as well: a change that would
-- leave more than 500 messages (wc_store::board::MAX_RETAINED_MESSAGES) on one session's board
-- is refused whole. A post that finds its board full removes one message in the same
-- transaction; if none could be removed, this refuses the post instead of overfilling.
ALTER TABLE workflow_sessions
    ADD CONSTRAINT workflow_sessions_messages_retained_bound CHECK (messages_retained <= 500);

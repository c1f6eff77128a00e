-- Data lifecycle (issue 29): retention purges in bounded batches, and the
-- erasure and export of one end user's data. Each purge walks an index by
-- age; erasure and export find a user's rows by index.

-- Conversations expire from their last activity; a user's are found by id.
CREATE INDEX conversations_by_last_activity ON conversations (updated_at);
CREATE INDEX conversations_by_user ON conversations (account_id, user_id);
-- Gap events of a conversation (erased or purged with it), and the texts
-- the `text` diagnostic mode kept, oldest first (their own retention).
CREATE INDEX gap_events_by_conversation ON gap_events (conversation_id);
CREATE INDEX gap_events_text_by_age ON gap_events (occurred_at) WHERE message_text IS NOT NULL;
-- Deleting a conversation reaches its platform link without a scan.
CREATE INDEX platform_conversations_by_conversation ON platform_conversations (conversation_id);
-- A platform sender's queued messages (erasure), and finished ones by age.
CREATE INDEX platform_inbound_by_sender ON platform_inbound (account_id, user_pseudonym);
CREATE INDEX platform_inbound_finished_by_age ON platform_inbound (received_at)
    WHERE state IN ('replied', 'dead');
-- Records kept for a stated time, by age.
CREATE INDEX mcp_calls_by_age ON mcp_calls (created_at);
CREATE INDEX capability_tests_by_age ON capability_tests (created_at);
CREATE INDEX prompt_integration_usage_by_age ON prompt_integration_usage (created_at);
CREATE INDEX prompt_integration_quota_by_day ON prompt_integration_quota (day);

-- An erasure's mark: a turn that began before it may not start a
-- conversation for this user afterwards (a turn in flight on a replica).
-- Kept one hour, far longer than any turn's deadline, then purged.
CREATE TABLE erased_users (
    account_id  INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    user_id     TEXT    NOT NULL,
    erased_at   INTEGER NOT NULL,
    PRIMARY KEY (account_id, user_id)
);
CREATE INDEX erased_users_by_age ON erased_users (erased_at);

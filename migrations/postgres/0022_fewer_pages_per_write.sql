-- Fewer indexes maintained by the two writes every request under load
-- makes (docs/benchmarks.md, "Fewer pages a write"); the same shape as
-- SQLite's migration 0022.
--
-- conversation_messages: the message id is never looked up (messages are
-- read by conversation, in `seq` order), so its UNIQUE index goes.
--
-- capability_tests: the primary key becomes the key its reader asks for
-- (a capability's newest records), which replaces the id's index and
-- `capability_tests_by_capability`. The record id (a random UUID, never
-- looked up alone) stays in the key as its tie-breaker.

ALTER TABLE conversation_messages DROP CONSTRAINT conversation_messages_id_key;

ALTER TABLE capability_tests DROP CONSTRAINT capability_tests_pkey;
ALTER TABLE capability_tests ADD PRIMARY KEY (capability_id, created_at, id);
DROP INDEX capability_tests_by_capability;

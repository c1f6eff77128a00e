-- Fewer B-trees touched by the two writes every request under load makes
-- (docs/benchmarks.md, "Fewer pages a write"): each B-tree a row goes into
-- is at least one more page in the commit's WAL frames, written twice
-- (frame header and page) and copied again by the checkpoint.
--
-- conversation_messages: the message id is never looked up (messages are
-- read by conversation, in `seq` order), so its UNIQUE index, a random
-- key and the table's busiest B-tree (2.7 pages a turn), goes; and `seq`
-- is a plain rowid, not AUTOINCREMENT, which rewrote `sqlite_sequence` on
-- every turn. A rowid is still larger than every row in the table when
-- it is made, so `seq` still orders each conversation's messages; it may
-- reuse the number of a message deleted since, which nothing reads.
--
-- capability_tests: a WITHOUT ROWID table clustered by the key its reader
-- asks for (a capability's newest records), which replaces both the rowid
-- table and `capability_tests_by_capability`. The record id (a random
-- UUID, never looked up alone) stays in the key as its tie-breaker.
--
-- Both tables are child tables no other table references, so they are
-- copied, dropped and renamed inside this migration's transaction.

CREATE TABLE conversation_messages_rebuilt (
    seq              INTEGER PRIMARY KEY,
    id               TEXT    NOT NULL,
    conversation_id  TEXT    NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role             TEXT    NOT NULL,
    body             TEXT    NOT NULL,
    metadata         TEXT,
    created_at       INTEGER NOT NULL
);
INSERT INTO conversation_messages_rebuilt (seq, id, conversation_id, role, body, metadata, created_at)
    SELECT seq, id, conversation_id, role, body, metadata, created_at FROM conversation_messages;
DROP TABLE conversation_messages;
ALTER TABLE conversation_messages_rebuilt RENAME TO conversation_messages;
CREATE INDEX conversation_messages_in_order ON conversation_messages (conversation_id, seq);
DELETE FROM sqlite_sequence WHERE name = 'conversation_messages';

CREATE TABLE capability_tests_rebuilt (
    id             TEXT    NOT NULL,
    account_id     INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    capability_id  TEXT    NOT NULL REFERENCES capabilities (id) ON DELETE CASCADE,
    revision       INTEGER NOT NULL,
    status         TEXT    NOT NULL,
    reason         TEXT,
    http_status    INTEGER,
    attempts       INTEGER NOT NULL,
    duration_ms    INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (capability_id, created_at, id)
) WITHOUT ROWID;
INSERT INTO capability_tests_rebuilt (id, account_id, capability_id, revision, status, reason,
        http_status, attempts, duration_ms, created_at)
    SELECT id, account_id, capability_id, revision, status, reason,
        http_status, attempts, duration_ms, created_at FROM capability_tests;
DROP TABLE capability_tests;
ALTER TABLE capability_tests_rebuilt RENAME TO capability_tests;
CREATE INDEX capability_tests_by_age ON capability_tests (created_at);

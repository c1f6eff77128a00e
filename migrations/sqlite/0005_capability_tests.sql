-- Contract-test records (contract 3.1: independent of revisions and state).
-- Only the sanitized outcome is kept: never arguments or endpoint output.
CREATE TABLE capability_tests (
    id             TEXT    PRIMARY KEY,
    account_id     INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    capability_id  TEXT    NOT NULL REFERENCES capabilities (id) ON DELETE CASCADE,
    revision       INTEGER NOT NULL,
    status         TEXT    NOT NULL,
    reason         TEXT,
    http_status    INTEGER,
    attempts       INTEGER NOT NULL,
    duration_ms    INTEGER NOT NULL,
    created_at     INTEGER NOT NULL
);
CREATE INDEX capability_tests_by_capability ON capability_tests (capability_id, created_at);

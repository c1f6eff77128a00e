-- Contract-test records (contract 3.1: independent of revisions and state).
-- Only the sanitized outcome is kept: never arguments or endpoint output.
CREATE TABLE capability_tests (
    id             TEXT    PRIMARY KEY,
    account_id     BIGINT  NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    capability_id  TEXT    NOT NULL REFERENCES capabilities (id) ON DELETE CASCADE,
    revision       BIGINT  NOT NULL,
    status         TEXT    NOT NULL,
    reason         TEXT,
    http_status    BIGINT,
    attempts       BIGINT  NOT NULL,
    duration_ms    BIGINT  NOT NULL,
    created_at     BIGINT  NOT NULL
);
CREATE INDEX capability_tests_by_capability ON capability_tests (capability_id, created_at);

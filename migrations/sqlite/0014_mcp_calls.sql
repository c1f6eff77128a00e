-- The audit trail of MCP tool calls (issue 27): one row per call that
-- reached the executor. Never arguments or results.
CREATE TABLE mcp_calls (
    id             TEXT    PRIMARY KEY,
    account_id     INTEGER  NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    -- The key that made the call; kept as text (no reference) so a record
    -- outlives its key.
    key_id         TEXT,
    capability_id  TEXT    NOT NULL,
    revision       INTEGER  NOT NULL,
    status         TEXT    NOT NULL,
    reason         TEXT,
    attempts       INTEGER  NOT NULL,
    duration_ms    INTEGER  NOT NULL,
    created_at     INTEGER  NOT NULL
);
CREATE INDEX mcp_calls_by_account ON mcp_calls (account_id, created_at);

-- The order MCP call records were written in, per account: two calls
-- finished within the same millisecond kept no order (the list fell back to
-- their random ids). Records from before this migration are numbered by
-- time, then id.
ALTER TABLE mcp_calls ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE mcp_calls SET seq = numbered.n
FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY account_id ORDER BY created_at, id) AS n
      FROM mcp_calls) AS numbered
WHERE mcp_calls.id = numbered.id;
DROP INDEX mcp_calls_by_account;
CREATE INDEX mcp_calls_by_account ON mcp_calls (account_id, seq);

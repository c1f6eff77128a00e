-- The records a request appends (a contract test's, a gap event, an MCP
-- call's audit row) no longer carry foreign keys to `accounts` and
-- `capabilities` on PostgreSQL (docs/benchmarks.md, "Records without
-- their parents' keys").
--
-- Those keys guarded nothing and cascaded nothing: no path deletes an
-- account or a capability (a capability is retired by its state), and
-- every writer of these rows has, in the same request, just read the
-- account's key and the capability the row names. Their check did cost:
-- for every row inserted the server ran a locking read of each parent
-- (`SELECT … FOR KEY SHARE`), which writes the lock into the parent's
-- tuple and the WAL, and makes a MultiXact when two transactions (two
-- writers, or two replicas') lock the same account at once. A code path
-- that one day deletes an account or a capability deletes these rows
-- itself (ARCHITECTURE.md, "Architecture invariants").
--
-- Keys that cascade stay: a conversation's own rows, which erasure and
-- retention delete with it. So does a conversation's key to its account:
-- dropped too in a trial, it moved a turn's cost less than the machine's
-- noise. SQLite keeps these three tables' keys: there a check is a
-- look-up in the same process that writes no lock, and dropping one
-- would rebuild the table.

ALTER TABLE capability_tests DROP CONSTRAINT capability_tests_account_id_fkey;
ALTER TABLE capability_tests DROP CONSTRAINT capability_tests_capability_id_fkey;
ALTER TABLE gap_events DROP CONSTRAINT gap_events_account_id_fkey;
ALTER TABLE mcp_calls DROP CONSTRAINT mcp_calls_account_id_fkey;

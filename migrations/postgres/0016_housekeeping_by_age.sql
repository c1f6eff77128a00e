-- Housekeeping purges in bounded batches (issue 28 item 3): each purge
-- walks an index by age instead of reading its whole table; the query-plan
-- test (tests/api/query_plans.rs) found these four tables read whole.
CREATE INDEX idempotency_records_by_expiry ON idempotency_records (expires_at);
CREATE INDEX channel_events_by_age ON channel_events (received_at);
CREATE INDEX pending_operations_by_expiry ON pending_operations (expires_at);
CREATE INDEX prompt_integration_bursts_by_age ON prompt_integration_bursts (t3);

-- The W3C `traceparent` of the webhook request that queued a platform
-- message (issue 26), when tracing is on: the worker's turn is a trace of
-- its own, linked back to it. Ids only, never content.
ALTER TABLE platform_inbound ADD COLUMN trace_parent TEXT;

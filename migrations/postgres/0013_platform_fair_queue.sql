-- Fair claiming and a bounded queue per number (issue 24).
--
-- `claim_round`: the message's turn in a round-robin over numbers. A new
-- message takes its number's last unfinished round + 1, but never less than
-- the highest round claimed so far; workers claim the lowest round first
-- (then arrival). Each number with a backlog is served once per round, so
-- a quiet number's message waits behind about one message per other busy
-- number, whatever their backlogs. Rows from before this migration are
-- round 0: an old backlog is served first, in arrival order.
ALTER TABLE platform_inbound ADD COLUMN claim_round BIGINT NOT NULL DEFAULT 0;

-- Only unfinished messages ('queued', 'answered') are indexed: the claim
-- walks rounds in order without reading the finished history, the per-user
-- order check and the per-number cap count only the live backlog. The
-- queries repeat this predicate literally so both planners use them.
CREATE INDEX platform_inbound_claim_order ON platform_inbound (claim_round, seq)
    WHERE state IN ('queued', 'answered');
CREATE INDEX platform_inbound_unfinished_by_user ON platform_inbound (phone_number_id, user_pseudonym, seq)
    WHERE state IN ('queued', 'answered');
CREATE INDEX platform_inbound_unfinished_rounds ON platform_inbound (phone_number_id, claim_round)
    WHERE state IN ('queued', 'answered');
-- The highest round claimed so far (every claim counts an attempt).
CREATE INDEX platform_inbound_claimed_rounds ON platform_inbound (claim_round)
    WHERE attempts > 0;
-- The claim's old indexes: without statistics SQLite preferred the first
-- and sorted the whole ready backlog on every claim; the second read each
-- user's finished history in the per-user order check.
DROP INDEX platform_inbound_ready;
DROP INDEX platform_inbound_by_user;

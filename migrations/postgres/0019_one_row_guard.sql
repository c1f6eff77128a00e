-- A write transaction's guard (src/store/pg_lane.rs): a step that must
-- touch exactly one row (a lease still held, a conversation not erased) is
-- sent as `WITH touched AS (… RETURNING 1) SELECT
-- warden_expect_one_row(count(*)) FROM touched`, so that when it does not,
-- the server itself fails the transaction and the COMMIT sent in the same
-- pipeline rolls it back: one round trip for the whole transaction instead
-- of a second one for COMMIT or ROLLBACK. SQLSTATE WG001 is Warden's own
-- (PostgreSQL's classes never use WG).
CREATE FUNCTION warden_expect_one_row(touched BIGINT) RETURNS BIGINT
LANGUAGE plpgsql AS $$
BEGIN
    IF touched <> 1 THEN
        RAISE EXCEPTION 'a guarded step touched % rows, not one', touched
            USING ERRCODE = 'WG001';
    END IF;
    RETURN touched;
END
$$;

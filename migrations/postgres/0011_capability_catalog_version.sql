-- A counter per account that moves with every change to its capabilities,
-- kept by the database itself (a trigger), so no write path can forget it.
-- A turn reads this one value and reuses the active set it parsed before
-- when it has not moved, instead of listing every capability's head (with
-- 1,000 capabilities that listing was most of a turn's CPU).

ALTER TABLE accounts ADD COLUMN capability_version BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION bump_capability_version() RETURNS trigger AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE accounts SET capability_version = capability_version + 1 WHERE id = OLD.account_id;
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.account_id IS DISTINCT FROM OLD.account_id) THEN
        UPDATE accounts SET capability_version = capability_version + 1 WHERE id = NEW.account_id;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER capabilities_version AFTER INSERT OR UPDATE OR DELETE ON capabilities
    FOR EACH ROW EXECUTE FUNCTION bump_capability_version();

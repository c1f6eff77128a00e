-- A counter per account that moves with every change to its capabilities,
-- kept by the database itself (triggers), so no write path can forget it.
-- A turn reads this one value and reuses the active set it parsed before
-- when it has not moved, instead of listing every capability's head (with
-- 1,000 capabilities that listing was most of a turn's CPU).

ALTER TABLE accounts ADD COLUMN capability_version INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER capabilities_version_on_insert AFTER INSERT ON capabilities
BEGIN
    UPDATE accounts SET capability_version = capability_version + 1 WHERE id = NEW.account_id;
END;

CREATE TRIGGER capabilities_version_on_update AFTER UPDATE ON capabilities
BEGIN
    UPDATE accounts SET capability_version = capability_version + 1
    WHERE id IN (OLD.account_id, NEW.account_id);
END;

CREATE TRIGGER capabilities_version_on_delete AFTER DELETE ON capabilities
BEGIN
    UPDATE accounts SET capability_version = capability_version + 1 WHERE id = OLD.account_id;
END;

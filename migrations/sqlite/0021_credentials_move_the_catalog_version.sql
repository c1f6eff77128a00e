-- The account's capability version also moves with every change to its
-- credentials (configured, rotated, revoked, re-sealed under a new master
-- key), kept by the same kind of triggers as its capabilities': a turn's
-- catalog keeps the credential rows its active capabilities name beside
-- them (src/agent/catalog.rs) and reads them again only when the version
-- has moved, instead of reading the credential on every call.

CREATE TRIGGER credentials_version_on_insert AFTER INSERT ON capability_credentials
BEGIN
    UPDATE accounts SET capability_version = capability_version + 1 WHERE id = NEW.account_id;
END;

CREATE TRIGGER credentials_version_on_update AFTER UPDATE ON capability_credentials
BEGIN
    UPDATE accounts SET capability_version = capability_version + 1
    WHERE id IN (OLD.account_id, NEW.account_id);
END;

CREATE TRIGGER credentials_version_on_delete AFTER DELETE ON capability_credentials
BEGIN
    UPDATE accounts SET capability_version = capability_version + 1 WHERE id = OLD.account_id;
END;

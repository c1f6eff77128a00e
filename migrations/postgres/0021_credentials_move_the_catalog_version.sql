-- The account's capability version also moves with every change to its
-- credentials (configured, rotated, revoked, re-sealed under a new master
-- key), by the capabilities' own trigger function (migration 0011): a
-- turn's catalog keeps the credential rows its active capabilities name
-- beside them (src/agent/catalog.rs) and reads them again only when the
-- version has moved, instead of a round trip for the credential on every
-- call.

CREATE TRIGGER credentials_version AFTER INSERT OR UPDATE OR DELETE ON capability_credentials
    FOR EACH ROW EXECUTE FUNCTION bump_capability_version();

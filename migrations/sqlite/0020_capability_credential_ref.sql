-- The credential a capability's definition names (`auth.credential_ref`),
-- kept beside the definition so that a contract test reads the key, the
-- capability and its credential in one statement (src/store/capabilities.rs,
-- `Store::authenticate_for_call`). Written with the definition on publish and
-- revise; NULL only for a row an older build wrote, which the reader treats
-- as "not known here" and reads the credential on its own.
ALTER TABLE capabilities ADD COLUMN credential_ref TEXT;
UPDATE capabilities SET credential_ref = json_extract(definition, '$.auth.credential_ref');

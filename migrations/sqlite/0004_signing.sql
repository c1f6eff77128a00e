-- Capability-context signing keys (Ed25519; the private half sealed under
-- the master keyring) and each account's opaque subject and pseudonym salt.
CREATE TABLE signing_keys (
    kid              TEXT    PRIMARY KEY,
    public_key       BLOB    NOT NULL,
    master_key_id    TEXT    NOT NULL,
    nonce            BLOB    NOT NULL,
    ciphertext       BLOB    NOT NULL,
    created_at       INTEGER NOT NULL,
    activated_at     INTEGER NOT NULL,
    retired_at       INTEGER,
    published_until  INTEGER
);

ALTER TABLE accounts ADD COLUMN subject TEXT;
ALTER TABLE accounts ADD COLUMN pseudonym_salt TEXT;
UPDATE accounts SET subject = 'sub_' || lower(hex(randomblob(16))), pseudonym_salt = lower(hex(randomblob(32)))
    WHERE subject IS NULL;
CREATE UNIQUE INDEX accounts_subject ON accounts (subject);

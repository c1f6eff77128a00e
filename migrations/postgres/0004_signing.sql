-- Capability-context signing keys (Ed25519; the private half sealed under
-- the master keyring) and each account's opaque subject and pseudonym salt.
CREATE TABLE signing_keys (
    kid              TEXT   PRIMARY KEY,
    public_key       BYTEA  NOT NULL,
    master_key_id    TEXT   NOT NULL,
    nonce            BYTEA  NOT NULL,
    ciphertext       BYTEA  NOT NULL,
    created_at       BIGINT NOT NULL,
    activated_at     BIGINT NOT NULL,
    retired_at       BIGINT,
    published_until  BIGINT
);

ALTER TABLE accounts ADD COLUMN subject TEXT;
ALTER TABLE accounts ADD COLUMN pseudonym_salt TEXT;
UPDATE accounts SET subject = 'sub_' || md5(random()::text || clock_timestamp()::text || id::text),
                    pseudonym_salt = md5(random()::text || id::text) || md5(clock_timestamp()::text || random()::text)
    WHERE subject IS NULL;
CREATE UNIQUE INDEX accounts_subject ON accounts (subject);

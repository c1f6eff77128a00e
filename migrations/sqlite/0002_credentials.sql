-- Endpoint credentials (contract 2.8). The secret is sealed (AES-256-GCM):
-- only the master key id, nonce and ciphertext are stored, and revocation
-- erases them.
CREATE TABLE capability_credentials (
    account_id      INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    credential_ref  TEXT    NOT NULL,
    auth_type       TEXT    NOT NULL,
    header_name     TEXT,
    status          TEXT    NOT NULL,
    master_key_id   TEXT,
    nonce           BLOB,
    ciphertext      BLOB,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (account_id, credential_ref)
);

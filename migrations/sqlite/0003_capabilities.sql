-- Capabilities (contract 2.5, 2.7, 3.1), their revision history, and the
-- idempotency records of the publishing routes (contract 4.8).

CREATE TABLE capabilities (
    id                TEXT    PRIMARY KEY,
    account_id        INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name              TEXT    NOT NULL,
    domain            TEXT    NOT NULL,
    lifecycle_status  TEXT    NOT NULL,
    revision          INTEGER NOT NULL,
    definition        TEXT    NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    UNIQUE (account_id, name)
);

CREATE TABLE capability_revisions (
    capability_id     TEXT    NOT NULL REFERENCES capabilities (id) ON DELETE CASCADE,
    revision          INTEGER NOT NULL,
    change            TEXT    NOT NULL,
    lifecycle_status  TEXT    NOT NULL,
    domain            TEXT    NOT NULL,
    definition        TEXT    NOT NULL,
    created_at        INTEGER NOT NULL,
    PRIMARY KEY (capability_id, revision)
);

CREATE TABLE idempotency_records (
    account_id       INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    idempotency_key  TEXT    NOT NULL,
    request_hash     TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    response_status  INTEGER,
    response_body    TEXT,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    PRIMARY KEY (account_id, idempotency_key)
);

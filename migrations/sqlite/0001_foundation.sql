-- Accounts, API keys, agent policies and diagnostic settings.
-- Timestamps are Unix milliseconds.

CREATE TABLE accounts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
);

CREATE TABLE api_keys (
    key_id       TEXT    PRIMARY KEY,
    account_id   INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key_hash     TEXT    NOT NULL UNIQUE,
    environment  TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);

CREATE TABLE agent_policies (
    account_id  INTEGER PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    policy      TEXT    NOT NULL,
    revision    INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE diagnostic_settings (
    account_id  INTEGER PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    mode        TEXT    NOT NULL,
    writes      INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

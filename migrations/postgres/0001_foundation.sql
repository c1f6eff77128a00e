-- Accounts, API keys, agent policies and diagnostic settings.
-- Timestamps are Unix milliseconds.

CREATE TABLE accounts (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        TEXT   NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL
);

CREATE TABLE api_keys (
    key_id       TEXT   PRIMARY KEY,
    account_id   BIGINT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key_hash     TEXT   NOT NULL UNIQUE,
    environment  TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    revoked_at   BIGINT
);

CREATE TABLE agent_policies (
    account_id  BIGINT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    policy      TEXT   NOT NULL,
    revision    BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE diagnostic_settings (
    account_id  BIGINT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    mode        TEXT   NOT NULL,
    writes      BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

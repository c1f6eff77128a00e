-- Prompt integrations (contract 2.13, 3.5, 4.4): browser-callable JSON
-- forms. The manifest (prompt and both schemas) is the operator's and is
-- never served; the public bundle is derived from these columns.
CREATE TABLE prompt_integrations (
    id                TEXT    PRIMARY KEY,
    account_id        BIGINT  NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name              TEXT    NOT NULL,
    origin            TEXT    NOT NULL,
    challenge_action  TEXT    NOT NULL,
    status            TEXT    NOT NULL,
    revision          BIGINT  NOT NULL,
    manifest          TEXT    NOT NULL,
    created_at        BIGINT  NOT NULL,
    updated_at        BIGINT  NOT NULL
);
CREATE INDEX prompt_integrations_by_account ON prompt_integrations (account_id, created_at);

-- The per-client burst limit: the times of the client's last three
-- admitted requests (t1 oldest). One row per integration and client, so
-- one upsert admits or refuses atomically. `client` is a keyed hash of the
-- client's IP address, never the address.
CREATE TABLE prompt_integration_bursts (
    integration_id  TEXT    NOT NULL REFERENCES prompt_integrations (id) ON DELETE CASCADE,
    client          TEXT    NOT NULL,
    t1              BIGINT,
    t2              BIGINT,
    t3              BIGINT  NOT NULL,
    PRIMARY KEY (integration_id, client)
);

-- Challenge tokens seen (their SHA-256, never the token): single use.
CREATE TABLE prompt_integration_tokens (
    token_hash      TEXT    PRIMARY KEY,
    integration_id  TEXT    NOT NULL REFERENCES prompt_integrations (id) ON DELETE CASCADE,
    used_at         BIGINT  NOT NULL
);
CREATE INDEX prompt_integration_tokens_by_age ON prompt_integration_tokens (used_at);

-- Reservations of the daily quota per integration and UTC day; a failed
-- execution gives its reservation back, so what stays counts successes.
CREATE TABLE prompt_integration_quota (
    integration_id  TEXT    NOT NULL REFERENCES prompt_integrations (id) ON DELETE CASCADE,
    day             TEXT    NOT NULL,
    reserved        BIGINT  NOT NULL,
    PRIMARY KEY (integration_id, day)
);

-- One record per execution that reached the quota: whose, which day, how
-- it ended. No input or output text.
CREATE TABLE prompt_integration_usage (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    integration_id  TEXT    NOT NULL REFERENCES prompt_integrations (id) ON DELETE CASCADE,
    account_id      BIGINT  NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    day             TEXT    NOT NULL,
    outcome         TEXT    NOT NULL,
    created_at      BIGINT  NOT NULL
);
CREATE INDEX prompt_integration_usage_by_account ON prompt_integration_usage (account_id, day);

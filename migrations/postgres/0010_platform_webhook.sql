-- The messaging-platform channel (contract 2.12, 4.3).

-- A platform number routed to an account. The access token for replies is
-- sealed under the master keyring (NULL: the server's configured fallback).
CREATE TABLE platform_numbers (
    phone_number_id  TEXT    PRIMARY KEY,
    account_id       BIGINT  NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    master_key_id    TEXT,
    nonce            BYTEA,
    ciphertext       BYTEA,
    created_at       BIGINT  NOT NULL
);
CREATE INDEX platform_numbers_by_account ON platform_numbers (account_id);

-- The durable inbound queue. A platform message id is accepted once.
-- `recipient` (the sender's platform id, needed to reply) is erased once the
-- message is replied or dead; conversations only ever see `user_pseudonym`.
-- `reply` is the turn's answer, recorded before the send so a retry never
-- runs the turn again. A claim is `lease_owner` + `lease_until`.
CREATE TABLE platform_inbound (
    seq                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    platform_message_id  TEXT    NOT NULL UNIQUE,
    account_id           BIGINT  NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    phone_number_id      TEXT    NOT NULL,
    user_pseudonym       TEXT    NOT NULL,
    recipient            TEXT,
    body                 TEXT,
    state                TEXT    NOT NULL,
    reply                TEXT,
    attempts             BIGINT  NOT NULL DEFAULT 0,
    next_attempt_at      BIGINT  NOT NULL,
    lease_owner          TEXT,
    lease_until          BIGINT,
    last_error           TEXT,
    received_at          BIGINT  NOT NULL,
    updated_at           BIGINT  NOT NULL
);
CREATE INDEX platform_inbound_ready ON platform_inbound (state, next_attempt_at);
CREATE INDEX platform_inbound_by_user ON platform_inbound (phone_number_id, user_pseudonym, seq);

-- One conversation per platform user and number, continued across messages.
CREATE TABLE platform_conversations (
    phone_number_id  TEXT    NOT NULL,
    user_pseudonym   TEXT    NOT NULL,
    conversation_id  TEXT    NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    PRIMARY KEY (phone_number_id, user_pseudonym)
);

-- Conversations of the HTTP channel (contract 1, 2.1-2.3, 4.2).
-- Never stored: images or anything extracted from them, opaque interaction
-- references, raw endpoint results, credentials (rules 10, 11).

CREATE TABLE conversations (
    id          TEXT    PRIMARY KEY,
    account_id  BIGINT  NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    user_id     TEXT,
    created_at  BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL
);

-- seq orders messages written in the same millisecond.
CREATE TABLE conversation_messages (
    seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               TEXT    NOT NULL UNIQUE,
    conversation_id  TEXT    NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role             TEXT    NOT NULL,
    body             TEXT    NOT NULL,
    metadata         TEXT,
    created_at       BIGINT  NOT NULL
);
CREATE INDEX conversation_messages_in_order ON conversation_messages (conversation_id, seq);

-- Rule 4: one bounded name-like value per (producer capability, field).
CREATE TABLE conversation_references (
    conversation_id  TEXT    NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    capability       TEXT    NOT NULL,
    field            TEXT    NOT NULL,
    value            TEXT    NOT NULL,
    created_at       BIGINT  NOT NULL,
    PRIMARY KEY (conversation_id, capability, field)
);

-- Rule 12: an operation waiting for a clarification. The arguments gathered
-- so far are sealed under the master keyring and expire.
CREATE TABLE pending_operations (
    conversation_id  TEXT    PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    capability_id    TEXT    NOT NULL,
    revision         BIGINT  NOT NULL,
    master_key_id    TEXT    NOT NULL,
    nonce            BYTEA   NOT NULL,
    ciphertext       BYTEA   NOT NULL,
    created_at       BIGINT  NOT NULL,
    expires_at       BIGINT  NOT NULL
);

-- Host-owned interactions (2.3): the opaque references are not here.
CREATE TABLE interactions (
    id               TEXT    PRIMARY KEY,
    account_id       BIGINT  NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    conversation_id  TEXT    NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind             TEXT    NOT NULL,
    operation        TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    expires_at       BIGINT  NOT NULL,
    created_at       BIGINT  NOT NULL,
    closed_at        BIGINT
);
CREATE INDEX interactions_by_conversation ON interactions (conversation_id);

-- Client event identifiers of the channel: a repeat is a duplicate delivery.
CREATE TABLE channel_events (
    account_id   BIGINT  NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    event_id     TEXT    NOT NULL,
    received_at  BIGINT  NOT NULL,
    PRIMARY KEY (account_id, event_id)
);

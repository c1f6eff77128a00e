-- Capability-gap diagnostics (contract 2.10, 4.6): unresolved events per
-- account. Message text is kept only when the account's mode was `text`
-- when the event happened.
CREATE TABLE gap_events (
    id               TEXT    PRIMARY KEY,
    account_id       BIGINT  NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    kind             TEXT    NOT NULL,
    reason_code      TEXT    NOT NULL,
    conversation_id  TEXT,
    capability       TEXT,
    message_text     TEXT,
    occurred_at      BIGINT  NOT NULL
);
CREATE INDEX gap_events_newest_first ON gap_events (account_id, occurred_at DESC, id DESC);

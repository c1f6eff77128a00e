-- What a conversation keeps between turns beyond its messages (issue 13):
-- the language it was started in, kept for every fixed text (NULL for
-- conversations older than this column: the message decides then), and the
-- name of the capability its last call used, so a short follow-up can stay
-- with the same family of capabilities. A capability name, never an id.
ALTER TABLE conversations ADD COLUMN language TEXT;
ALTER TABLE conversations ADD COLUMN last_capability TEXT;

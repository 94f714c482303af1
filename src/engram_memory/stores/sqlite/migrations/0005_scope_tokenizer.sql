-- engram-memory embedded store, schema 5: which tokenizer built each scope's lexical index.
-- The index holds the engine's tokens (engine/text.py), not text: a scope indexed by another tokenizer
-- is re-indexed before it is searched again (engram-memory reindex; serve does it when it starts).
-- NULL: the first tokenizer, which predates this column, or nothing indexed yet; a scope with no
-- index entry takes the tokenizer of its next one.
ALTER TABLE scopes ADD COLUMN tokenizer TEXT;

"""The embedded default store: SQLite in WAL mode with FTS5."""

"""What the SQLite and PostgreSQL stores share: the portable statements of the store port and the migration ledger."""

"""How promises are kept: lifecycle, journal, idempotency, sealing, admission, ranking, recall."""

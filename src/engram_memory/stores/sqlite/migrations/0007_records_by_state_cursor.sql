-- engram-memory embedded store, schema 7: the records of a scope that changed state after a cursor.
-- A process's semantic index catches up by what changed since the records cursor it last saw
-- (engine/recall/vector_index.py) instead of reading every vector of the scope again.
CREATE INDEX records_by_state_cursor ON records (tenant, workspace, state_cursor);

-- engram-memory embedded store, schema 2: what the host's operations need.

-- The trust class the host's binding gave the capturing agent (asserted, earned, signed).
ALTER TABLE candidates ADD COLUMN trust_class TEXT NOT NULL DEFAULT 'asserted';
ALTER TABLE records ADD COLUMN trust_class TEXT NOT NULL DEFAULT 'asserted';

-- Why a candidate waits in the review queue (JSON list of reason codes; no content).
ALTER TABLE candidates ADD COLUMN review_reasons TEXT NOT NULL DEFAULT '[]';

-- The record that superseded this one, so a rewind can swap the two back atomically.
ALTER TABLE records ADD COLUMN superseded_by TEXT;

CREATE INDEX records_by_expiry ON records (expires_at_ms) WHERE expires_at_ms IS NOT NULL;
CREATE INDEX candidates_for_review ON candidates (adjudication, captured_at_ms);

-- A human's review decision rewrites the agent's earlier admission answers for that candidate.
CREATE INDEX idempotency_by_target ON idempotency (tenant, workspace, tool, target);

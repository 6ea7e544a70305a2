-- 018: flag workflows that have been forked at least once, so fork lookups
-- can skip the many that never were.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN was_forked_from boolean NOT NULL DEFAULT false;

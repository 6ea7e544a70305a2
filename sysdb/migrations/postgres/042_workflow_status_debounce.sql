-- 042: debouncing. A debounced workflow waits DELAYED with its debounce key
-- as deduplication id; each new call pushes the delay out, but never past
-- debounce_deadline_epoch_ms. is_debounced says the deduplication id is such
-- a key, to be cleared when the workflow becomes ENQUEUED.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN IF NOT EXISTS debounce_deadline_epoch_ms bigint;
ALTER TABLE {{schema}}.workflow_status ADD COLUMN IF NOT EXISTS is_debounced boolean NOT NULL DEFAULT false;

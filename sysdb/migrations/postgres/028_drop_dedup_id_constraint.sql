-- 028: the constraint of 001 is superseded by the partial index of 027.
-- Dropping a constraint is a quick catalog change.

ALTER TABLE {{schema}}.workflow_status
    DROP CONSTRAINT IF EXISTS uq_workflow_status_queue_name_dedup_id;

-- dbos:online
-- 027: deduplication ids are unique per queue only where one is set. Built
-- under a new name before 028 drops the old full-table constraint.
CREATE UNIQUE INDEX {{concurrently}} IF NOT EXISTS uq_workflow_status_dedup_id
    ON {{schema}}.workflow_status (queue_name, deduplication_id)
    WHERE deduplication_id IS NOT NULL;

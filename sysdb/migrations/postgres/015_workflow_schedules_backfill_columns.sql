-- 015: schedules remember when they last fired (ISO 8601 text), whether to
-- fire missed runs after downtime, and the time zone of a cron expression.

ALTER TABLE {{schema}}.workflow_schedules ADD COLUMN last_fired_at text;
ALTER TABLE {{schema}}.workflow_schedules ADD COLUMN automatic_backfill boolean NOT NULL DEFAULT false;
ALTER TABLE {{schema}}.workflow_schedules ADD COLUMN cron_timezone text;

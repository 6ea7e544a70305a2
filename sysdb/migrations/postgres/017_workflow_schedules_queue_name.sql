-- 017: a schedule may start its workflows on a queue of the user's choice
-- (NULL: the internal queue).

ALTER TABLE {{schema}}.workflow_schedules ADD COLUMN queue_name text;

-- 121: record which recv step consumed a message, so rewinding a workflow
-- can delete the messages the discarded steps received.

ALTER TABLE {{schema}}.notifications ADD COLUMN IF NOT EXISTS consumed_by_function_id integer;

-- 011: tag every stored payload with the format it was written in, so that
-- readers in other languages know whether they can decode it.

ALTER TABLE {{schema}}.workflow_status ADD COLUMN serialization text;
ALTER TABLE {{schema}}.notifications ADD COLUMN serialization text;
ALTER TABLE {{schema}}.workflow_events ADD COLUMN serialization text;
ALTER TABLE {{schema}}.workflow_events_history ADD COLUMN serialization text;
ALTER TABLE {{schema}}.operation_outputs ADD COLUMN serialization text;
ALTER TABLE {{schema}}.streams ADD COLUMN serialization text;

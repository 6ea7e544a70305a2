-- 009: durable cron/interval schedules, so that any runtime sharing the
-- database can fire them.

CREATE TABLE {{schema}}.workflow_schedules (
    schedule_id         text NOT NULL,
    schedule_name       text NOT NULL,
    workflow_name       text NOT NULL,
    workflow_class_name text,
    schedule            text NOT NULL,
    status              text NOT NULL DEFAULT 'ACTIVE',
    context             text NOT NULL,
    CONSTRAINT workflow_schedules_pkey PRIMARY KEY (schedule_id),
    CONSTRAINT workflow_schedules_schedule_name_key UNIQUE (schedule_name)
);

-- 109: workflow inputs and outcomes get tables of their own, keeping
-- workflow_status rows small and letting payloads be swept by age
-- (retention_timestamp). Readers fall back to the old columns for rows
-- written before.

CREATE TABLE IF NOT EXISTS {{schema}}.workflow_input (
    workflow_uuid       text NOT NULL,
    inputs              text,
    retention_timestamp bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000.0)::bigint,
    CONSTRAINT workflow_input_pkey PRIMARY KEY (workflow_uuid)
);

CREATE TABLE IF NOT EXISTS {{schema}}.workflow_output (
    workflow_uuid       text NOT NULL,
    output              text,
    error               text,
    retention_timestamp bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000.0)::bigint,
    CONSTRAINT workflow_output_pkey PRIMARY KEY (workflow_uuid)
);

CREATE INDEX IF NOT EXISTS idx_workflow_input_retention
    ON {{schema}}.workflow_input (retention_timestamp);

CREATE INDEX IF NOT EXISTS idx_workflow_output_retention
    ON {{schema}}.workflow_output (retention_timestamp);

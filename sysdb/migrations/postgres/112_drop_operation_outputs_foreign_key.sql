-- 112: steps no longer cascade from workflow_status (they are swept on their
-- own). Databases created by the Python or TypeScript SDKs name the key
-- operation_outputs_workflow_uuid_foreign, ours operation_outputs_workflow_uuid_fkey.

ALTER TABLE {{schema}}.operation_outputs
    DROP CONSTRAINT IF EXISTS operation_outputs_workflow_uuid_foreign;
ALTER TABLE {{schema}}.operation_outputs
    DROP CONSTRAINT IF EXISTS operation_outputs_workflow_uuid_fkey;

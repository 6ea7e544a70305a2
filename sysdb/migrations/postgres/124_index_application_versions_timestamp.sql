-- dbos:online
-- 124: find the latest application version without a sort.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_application_versions_timestamp
    ON {{schema}}.application_versions (version_timestamp DESC);

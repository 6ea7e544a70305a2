-- dbos:online
-- 125: find an application's latest version without a sort.
CREATE INDEX {{concurrently}} IF NOT EXISTS idx_application_versions_owner_timestamp
    ON {{schema}}.application_versions (application_name, version_timestamp DESC);

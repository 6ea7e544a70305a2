-- dbos:online
-- 107: unclaimed versions count as one more owner. Every pre-existing row is
-- unclaimed, so this index covers them all and is built online.
CREATE UNIQUE INDEX {{concurrently}} IF NOT EXISTS uq_application_versions_unclaimed_version
    ON {{schema}}.application_versions (version_name)
    WHERE application_name IS NULL;

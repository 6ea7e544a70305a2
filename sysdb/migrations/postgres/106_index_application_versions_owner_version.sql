-- 106: a version name is unique per owning application, not globally. With
-- 107 this pair of partial keys takes over from the global unique
-- constraint, which stays until every SDK on the database is past 107. No
-- existing row is claimed yet, so this index is empty and builds instantly.

CREATE UNIQUE INDEX IF NOT EXISTS uq_application_versions_owner_version
    ON {{schema}}.application_versions (application_name, version_name)
    WHERE application_name IS NOT NULL;

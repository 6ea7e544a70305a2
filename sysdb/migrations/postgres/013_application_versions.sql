-- 013: the registry of application versions; the most recent one decides
-- who may run workflows that carry no version.

CREATE TABLE {{schema}}.application_versions (
    version_id        text NOT NULL,
    version_name      text NOT NULL,
    version_timestamp bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000)::bigint,
    created_at        bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000)::bigint,
    CONSTRAINT application_versions_pkey PRIMARY KEY (version_id),
    CONSTRAINT application_versions_version_name_key UNIQUE (version_name)
);

-- 103: each application keeps its own version history (NULL: unclaimed).

ALTER TABLE {{schema}}.application_versions ADD COLUMN IF NOT EXISTS application_name text;

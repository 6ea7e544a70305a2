-- 039: wake stream readers as soon as a value is written, like the
-- notifications trigger of 001. Dropped again by 043.

CREATE OR REPLACE FUNCTION {{schema}}.streams_function() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    PERFORM pg_notify('dbos_streams_channel', NEW.workflow_uuid || '::' || NEW.key);
    RETURN NEW;
END;
$body$;

DROP TRIGGER IF EXISTS dbos_streams_trigger ON {{schema}}.streams;

CREATE TRIGGER dbos_streams_trigger
    AFTER INSERT ON {{schema}}.streams
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.streams_function();

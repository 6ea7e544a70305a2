-- 020: pin the search_path of the functions created so far, so a caller's
-- search_path (or an object planted in a schema it can write) cannot change
-- what their unqualified names resolve to.

ALTER FUNCTION {{schema}}.enqueue_workflow(text, text, json[], json, text, text, text, text, bigint, bigint, text, integer, text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION {{schema}}.send_message(text, json, text, text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION {{schema}}.notifications_function()
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION {{schema}}.workflow_events_function()
    SET search_path = pg_catalog, pg_temp;

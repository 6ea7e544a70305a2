-- 043: notifying inside the writing transaction serialises every stream
-- write on the server's notification queue lock. Writers now NOTIFY after
-- commit themselves, so the trigger of 039 goes.

DROP TRIGGER IF EXISTS dbos_streams_trigger ON {{schema}}.streams;
DROP FUNCTION IF EXISTS {{schema}}.streams_function();

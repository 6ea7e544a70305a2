-- 010: databases made by an early DBOS release have a notifications table
-- without a primary key (send_message's ON CONFLICT needs one). 001 creates
-- the key, so on any other database this is a no-op.

DO $migration$
BEGIN
    IF NOT EXISTS (
        SELECT FROM pg_catalog.pg_constraint
        WHERE conrelid = $rel${{schema}}.notifications$rel$::regclass
          AND contype = 'p'
    ) THEN
        ALTER TABLE {{schema}}.notifications ADD PRIMARY KEY (message_uuid);
    END IF;
END
$migration$;

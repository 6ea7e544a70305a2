-- 033: mark workflows started under a queue's rate limiter, so the limiter
-- can count recent starts through a small partial index (034).

ALTER TABLE {{schema}}.workflow_status
    ADD COLUMN IF NOT EXISTS rate_limited boolean NOT NULL DEFAULT false;

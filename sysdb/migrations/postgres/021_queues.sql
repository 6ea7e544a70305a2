-- 021: registered queues and their settings, stored so they can be read and
-- changed independently of the processes that run them.

CREATE TABLE {{schema}}.queues (
    queue_id              text NOT NULL DEFAULT gen_random_uuid()::text,
    name                  text NOT NULL,
    concurrency           integer,
    worker_concurrency    integer,
    rate_limit_max        integer,
    rate_limit_period_sec double precision,
    priority_enabled      boolean NOT NULL DEFAULT false,
    partition_queue       boolean NOT NULL DEFAULT false,
    polling_interval_sec  double precision NOT NULL DEFAULT 1.0,
    created_at            bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000.0)::bigint,
    updated_at            bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000.0)::bigint,
    CONSTRAINT queues_pkey PRIMARY KEY (queue_id),
    CONSTRAINT queues_name_key UNIQUE (name)
);

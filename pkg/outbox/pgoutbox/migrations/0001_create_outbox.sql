-- The outbox table: one row per job written in a business transaction and not yet accepted by
-- SQS. Sent rows are deleted; dead rows stay until a person retries or deletes them.
CREATE TABLE IF NOT EXISTS {{table}} (
    -- Insertion order: relays claim and FIFO groups are sent in this order.
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The job id, fixed at enqueue: a re-send after a relay crash is the same job.
    id           text        NOT NULL UNIQUE,
    queue_url    text        NOT NULL,
    kind         text        NOT NULL,
    job_key      text        NOT NULL,
    -- FIFO message group and deduplication id (NULL on standard queues).
    group_id     text,
    dedup_id     text,
    -- The group a FIFO row is ordered in (NULL on standard queues, whose rows are not ordered).
    group_key    text GENERATED ALWAYS AS (
                     CASE WHEN right(queue_url, 5) = '.fifo' THEN queue_url || ' ' || coalesce(group_id, '') END
                 ) STORED,
    -- The complete envelope v1 JSON, kept byte for byte, and the job's own SQS message
    -- attributes ({"name": {"type": "String", "string": "…"} or {"type": "Binary", "binary": "<base64>"}}).
    body         text        NOT NULL,
    attributes   jsonb,
    -- When the job may first run (a delay), or NULL for at once.
    run_at       timestamptz,
    state        text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'dead')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- The earliest time a relay may claim the row: created_at, later when a retry is due.
    available_at timestamptz NOT NULL DEFAULT now(),
    -- Claims so far, the current one included; the claim: relay id and the end of its lease.
    attempts     integer     NOT NULL DEFAULT 0,
    locked_by    text,
    locked_until timestamptz,
    last_error   text
);
-- Due standard rows, oldest first.
CREATE INDEX IF NOT EXISTS {{name}}_standard_idx ON {{table}} (seq) WHERE state = 'pending' AND group_key IS NULL;
-- Due FIFO rows, oldest first, and each group's rows in order.
CREATE INDEX IF NOT EXISTS {{name}}_fifo_idx ON {{table}} (seq) WHERE state = 'pending' AND group_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS {{name}}_group_idx ON {{table}} (group_key, seq) WHERE state = 'pending' AND group_key IS NOT NULL;
-- Dead rows, for listing.
CREATE INDEX IF NOT EXISTS {{name}}_dead_idx ON {{table}} (seq) WHERE state = 'dead';
-- A queue table: every row is inserted, updated about twice and deleted within seconds, so let
-- autovacuum clean up after a small fraction of the table instead of the default 20 %.
ALTER TABLE {{table}} SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 500,
    autovacuum_vacuum_insert_scale_factor = 0.05, fillfactor = 85);

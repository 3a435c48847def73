-- The webhook outbox (migration 11): transitions write events into it by
-- trigger; the one active sender delivers them, records each outcome on
-- the job's timeline, and deletes an event once delivered or given up.

-- name: WebhookConfigure :exec
-- The event types that transitions record, for every process of the
-- database (direct workers included). worker_offline_since is kept while
-- worker.offline stays enabled.
UPDATE webhook_settings
SET events = p.events,
    worker_offline_since = CASE WHEN 'worker.offline' = ANY(p.events)
                                THEN COALESCE(webhook_settings.worker_offline_since, now()) END,
    updated_at = now()
FROM (SELECT @events::text[] AS events) p;

-- name: WebhookClaimDue :many
-- Takes up to @max due events, other than the @busy ones still being
-- sent, and holds them for @hold_ms: no lock outlives this statement, so
-- a slow request holds back nothing but its own event, and a sender that
-- dies in the middle of a request leaves it due again once the hold ends.
-- Counts the attempt now, so that an attempt cut short is counted too.
WITH p AS (
    SELECT @hold_ms::bigint AS hold_ms
), due AS MATERIALIZED (
    SELECT id FROM webhook_outbox
    WHERE next_at <= now() AND id <> ALL (COALESCE(@busy::bigint[], '{}'))
    ORDER BY next_at, id
    LIMIT @max
    FOR UPDATE SKIP LOCKED
)
UPDATE webhook_outbox o
SET next_at = now() + p.hold_ms * interval '1 millisecond', attempts = o.attempts + 1
FROM p
WHERE o.id = ANY (ARRAY(SELECT id FROM due))
RETURNING o.id, o.event_id::text AS event_id, o.type, o.job_id, o.worker_id, o.at, o.attempts, o.body;

-- name: WebhookNextDue :one
-- How long until the next event other than the @busy ones is due, by the
-- database clock; +Infinity for none.
SELECT COALESCE((SELECT EXTRACT(EPOCH FROM min(next_at) - clock_timestamp()) * 1000 FROM webhook_outbox
                 WHERE id <> ALL (COALESCE(@busy::bigint[], '{}'))),
                'Infinity')::float8 AS wait_ms;

-- name: WebhookDelivered :exec
-- A 2xx: the event is done. Its job's timeline says so.
WITH done AS (
    DELETE FROM webhook_outbox WHERE webhook_outbox.id = @outbox_id::bigint RETURNING job_id, event_id, type, attempts
)
INSERT INTO events (job_id, type, attempt, detail)
SELECT j.id, 'webhook.delivered', NULL,
       jsonb_build_object('event_id', done.event_id, 'event', done.type, 'status', @status::integer,
                          'attempt', done.attempts)
FROM done JOIN jobs j ON j.id = done.job_id;

-- name: WebhookFailed :one
-- A failed attempt: the event is due again after delay_ms, or given up
-- (deleted) when that would be past max_age_ms after the event. The body
-- sent is kept, so that every attempt sends the same. The timeline keeps
-- one webhook.failed row per event: the first failure writes it, later
-- ones update it (attempt, status, error, last_at, next_at); giving up
-- adds a webhook.given_up row. A receiver failing for 24 h leaves two.
WITH p AS (
    SELECT @outbox_id::bigint AS id, @delay_ms::bigint AS delay_ms,
           @max_age_ms::bigint AS max_age_ms, @sent_body::text AS sent_body,
           sqlc.narg('status')::integer AS status, @error::text AS error
), cur AS MATERIALIZED (
    SELECT o.id, o.job_id, o.timeline_id,
           now() + p.delay_ms * interval '1 millisecond' AS next_at,
           now() + p.delay_ms * interval '1 millisecond' > o.at + p.max_age_ms * interval '1 millisecond' AS given_up,
           jsonb_build_object('event_id', o.event_id, 'event', o.type, 'status', p.status,
                              'error', p.error, 'attempt', o.attempts, 'last_at', clock_timestamp()) AS detail
    FROM webhook_outbox o, p
    WHERE o.id = p.id
    FOR UPDATE OF o
), summarized AS (
    UPDATE events e
    SET detail = cur.detail || jsonb_build_object('next_at', cur.next_at)
    FROM cur
    WHERE e.id = cur.timeline_id AND NOT cur.given_up
    RETURNING e.id
), recorded AS (
    INSERT INTO events (job_id, type, attempt, detail)
    SELECT j.id, CASE WHEN cur.given_up THEN 'webhook.given_up' ELSE 'webhook.failed' END, NULL,
           cur.detail || jsonb_build_object('next_at', CASE WHEN NOT cur.given_up THEN cur.next_at END)
    FROM cur JOIN jobs j ON j.id = cur.job_id
    WHERE cur.given_up OR NOT EXISTS (SELECT 1 FROM summarized)
    RETURNING id
), retry AS (
    UPDATE webhook_outbox o
    SET next_at = cur.next_at, body = COALESCE(o.body, p.sent_body), last_status = p.status, last_error = p.error,
        timeline_id = COALESCE((SELECT id FROM recorded), o.timeline_id)
    FROM cur, p
    WHERE o.id = cur.id AND NOT cur.given_up
), gone AS (
    DELETE FROM webhook_outbox o USING cur
    WHERE o.id = cur.id AND cur.given_up
)
SELECT cur.given_up::boolean AS given_up FROM cur;

-- name: WebhookRelease :exec
-- An attempt cut short by shutdown: due again at once, for the next
-- sender, rather than after its hold.
UPDATE webhook_outbox SET next_at = now() WHERE id = @outbox_id::bigint;

-- name: WebhookPending :one
-- Events waiting for delivery (metrics).
SELECT count(*)::bigint AS pending FROM webhook_outbox;

-- name: WebhookWorkersOffline :many
-- Announces workers not seen for offline_ms, once per going offline: a
-- worker is announced for its last_seen, and again only once it was seen
-- later. Workers already gone when worker.offline was enabled are not
-- announced.
WITH p AS (
    SELECT @offline_ms::bigint AS offline_ms
), s AS (
    SELECT worker_offline_since AS since FROM webhook_settings WHERE 'worker.offline' = ANY(events)
), gone AS MATERIALIZED (
    SELECT w.id, w.last_seen, w.last_seen + p.offline_ms * interval '1 millisecond' AS offline_at
    FROM workers w, p, s
    WHERE w.last_seen < now() - p.offline_ms * interval '1 millisecond'
      AND w.last_seen + p.offline_ms * interval '1 millisecond' >= s.since
      AND NOT EXISTS (SELECT 1 FROM webhook_worker_offline o WHERE o.worker_id = w.id AND o.last_seen >= w.last_seen)
    ORDER BY w.last_seen
    LIMIT 1000
), marked AS (
    INSERT INTO webhook_worker_offline (worker_id, last_seen)
    SELECT id, last_seen FROM gone
    ON CONFLICT (worker_id) DO UPDATE SET last_seen = EXCLUDED.last_seen
), queued AS (
    INSERT INTO webhook_outbox (type, worker_id, at)
    SELECT 'worker.offline', id, offline_at FROM gone
)
SELECT id FROM gone;

-- name: WebhookNextOffline :one
-- How long until the next worker seen now would count as offline, by the
-- database clock; +Infinity when worker.offline is off or no worker is
-- online.
WITH p AS (
    SELECT @offline_ms::bigint AS offline_ms
)
SELECT COALESCE((SELECT EXTRACT(EPOCH FROM min(w.last_seen) + p.offline_ms * interval '1 millisecond' - clock_timestamp()) * 1000
                 FROM workers w
                 WHERE w.last_seen >= now() - p.offline_ms * interval '1 millisecond'
                   AND EXISTS (SELECT 1 FROM webhook_settings WHERE 'worker.offline' = ANY(events))),
                'Infinity')::float8 AS wait_ms
FROM p;

-- name: WebhookWorkerGet :one
SELECT id, device, queues, started_at, last_seen FROM workers WHERE id = @id;

-- name: ListenWebhooks :exec
LISTEN leasehold_webhooks;

-- Availability windows (SPEC "Availability windows"): a device label or a
-- worker may have a weekly window in its owner's time zone, outside of
-- which the claim statements take nothing for it. The text is parsed by
-- package window; the spans it gives are stored with it, as minutes since
-- Monday 00:00 of a week (wall-clock time in zone): starts[i] to ends[i],
-- ends[i] past a week for the span that runs on into the next week, and
-- 0 for a window open all the time (one span that never closes).
CREATE TABLE availability_windows (
    scope      text NOT NULL CHECK (scope IN ('device', 'worker')),
    name       text NOT NULL,
    spec       text NOT NULL,
    zone       text NOT NULL,
    starts     integer[] NOT NULL,
    ends       integer[] NOT NULL CHECK (cardinality(ends) = cardinality(starts) AND cardinality(starts) > 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text,
    PRIMARY KEY (scope, name)
);

-- When the window (zone, starts, ends) that is open at @at closes:
-- 'infinity' for one that never does, NULL when it is closed at @at. The
-- Go twin is window.Window.ClosesAt; queue's tests hold the two to the
-- same answers, across clock changes.
CREATE FUNCTION availability_closes(zone text, starts integer[], ends integer[], at timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN s.e = 0 THEN 'infinity'::timestamptz
                ELSE (date_trunc('week', l.t) + s.e * interval '1 minute') AT TIME ZONE zone END
    FROM (SELECT at AT TIME ZONE zone AS t) l,
         unnest(starts, ends) AS s(b, e)
    WHERE s.e = 0
       OR (s.b <= (extract(isodow FROM l.t)::int - 1) * 1440 + extract(hour FROM l.t)::int * 60 + extract(minute FROM l.t)::int
           AND (extract(isodow FROM l.t)::int - 1) * 1440 + extract(hour FROM l.t)::int * 60 + extract(minute FROM l.t)::int < s.e)
    LIMIT 1
$$;

-- What a claim of @worker_id with labels @devices may take at @at: one row
-- per label that is open (with when it closes, the earliest of its own
-- window and the worker's), and one with device NULL for jobs that name
-- no device, which run on the worker's phones: open while the worker's
-- window and every one of its labels' windows are. Nothing at all while
-- the worker's own window is closed. Without windows (the common case)
-- every label and NULL come back, never closing: two probes of the
-- primary key.
CREATE FUNCTION availability_claimable(worker_id text, devices text[], at timestamptz)
RETURNS TABLE (device text, closes timestamptz) LANGUAGE sql STABLE AS $$
    WITH w AS (
        SELECT coalesce((SELECT availability_closes(a.zone, a.starts, a.ends, at)
                         FROM availability_windows a WHERE a.scope = 'worker' AND a.name = worker_id),
                        CASE WHEN EXISTS (SELECT 1 FROM availability_windows a WHERE a.scope = 'worker' AND a.name = worker_id)
                             THEN NULL ELSE 'infinity'::timestamptz END) AS closes
    ), d AS (
        SELECT l.l AS device,
               CASE WHEN a.name IS NULL THEN 'infinity'::timestamptz
                    ELSE availability_closes(a.zone, a.starts, a.ends, at) END AS closes
        FROM unnest(devices) AS l(l)
        LEFT JOIN availability_windows a ON a.scope = 'device' AND a.name = l.l
    )
    SELECT d.device, LEAST(d.closes, w.closes) FROM d, w
    WHERE w.closes IS NOT NULL AND d.closes IS NOT NULL
    UNION ALL
    SELECT NULL, LEAST(w.closes, (SELECT min(d.closes) FROM d))
    FROM w
    WHERE w.closes IS NOT NULL AND NOT EXISTS (SELECT 1 FROM d WHERE d.closes IS NULL)
$$;

-- Whether a job with @timeout_ms may start at @at in a window that closes
-- at @closes: it must be open, and long enough for the whole timeout. A
-- job without a timeout only needs it open.
CREATE FUNCTION availability_fits(closes timestamptz, timeout_ms integer, at timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT closes IS NOT NULL AND (timeout_ms IS NULL OR closes >= at + timeout_ms * interval '1 millisecond')
$$;

-- fairlane schema for PostgreSQL, version 4: the same writes for less of the server's time
-- (docs/performance.md, "PostgreSQL beside SQLite"), with the same effects as versions 1 to 3:
-- the jobs' counters kept once per statement, page transitions applied a set at a time, and
-- page texts compressed with lz4.
--
-- The jobs' counters: the row trigger of version 1 ran one UPDATE of jobs per page whose state
-- changed. A statement trigger with transition tables does the same arithmetic once per
-- statement, from the deltas of all the rows it changed, summed per job. (PostgreSQL takes no
-- column list on a trigger with transition tables, so it fires on every UPDATE of pages and
-- itself skips the rows whose state did not change.) The result is the row trigger's:
-- counts and usage add up whatever the order of the rows; the first dispatch stamps started_at
-- and, once nothing is left queued or in flight, the end stamps finished_at (a statement
-- stamps one time: the earliest dispatch, the latest end among its rows; fairlane_apply's are
-- all its p_now).
DROP TRIGGER pages_follow_state ON pages;
DROP FUNCTION pages_follow_state();

CREATE FUNCTION pages_follow_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE jobs SET
    queued        = jobs.queued + d.queued,
    in_flight     = jobs.in_flight + d.in_flight,
    done          = jobs.done + d.done,
    failed        = jobs.failed + d.failed,
    cancelled     = jobs.cancelled + d.cancelled,
    input_tokens  = jobs.input_tokens + d.input_tokens,
    output_tokens = jobs.output_tokens + d.output_tokens,
    started_at    = CASE WHEN d.dispatched_at IS NOT NULL
                         THEN coalesce(jobs.started_at, d.dispatched_at) ELSE jobs.started_at END,
    finished_at   = CASE WHEN jobs.queued + jobs.in_flight + d.queued + d.in_flight = 0
                         THEN coalesce(jobs.finished_at, d.finished_at)
                         ELSE NULL END
  FROM (
    SELECT n.job_id,
           sum((n.state = 'queued')::int    - (o.state = 'queued')::int)    AS queued,
           sum((n.state = 'in_flight')::int - (o.state = 'in_flight')::int) AS in_flight,
           sum((n.state = 'done')::int      - (o.state = 'done')::int)      AS done,
           sum((n.state = 'failed')::int    - (o.state = 'failed')::int)    AS failed,
           sum((n.state = 'cancelled')::int - (o.state = 'cancelled')::int) AS cancelled,
           sum(coalesce(n.input_tokens, 0) - coalesce(o.input_tokens, 0))   AS input_tokens,
           sum(coalesce(n.output_tokens, 0) - coalesce(o.output_tokens, 0)) AS output_tokens,
           min(n.dispatched_at) FILTER (WHERE n.state = 'in_flight')        AS dispatched_at,
           max(n.finished_at) FILTER (WHERE n.state NOT IN ('queued', 'in_flight'))
             AS finished_at
      FROM old_pages o JOIN new_pages n ON n.id = o.id
      WHERE o.state IS DISTINCT FROM n.state
      GROUP BY n.job_id) AS d
  WHERE jobs.id = d.job_id;
  RETURN NULL;
END;
$$;

CREATE TRIGGER pages_follow_state AFTER UPDATE ON pages
  REFERENCING OLD TABLE AS old_pages NEW TABLE AS new_pages
  FOR EACH STATEMENT EXECUTE FUNCTION pages_follow_state();

-- fairlane_apply of version 3, the same arguments, checks and answers, with a statement per
-- step of the batch rather than per transition.
--
-- Transitions of different pages do not interact, except through a cancellation (which
-- cancels its job's queued pages and makes a later failed attempt or requeue of them cancel
-- the page): the jobs' counters only add up. So the batch is cut at each cancellation into
-- stretches, each cancellation on its own, and a stretch into rounds: round k holds the k-th
-- transition of each page in the stretch, so that a round names every page at most once and
-- a page's transitions run in their order. A round is then two statements: its dispatches
-- (an UPDATE of pages and an INSERT of their spend), and its other transitions (an UPDATE of
-- their calls' spend and one of their pages, each transition's conditions and columns
-- picked by its kind). A cancellation runs as before. A batch of dispatches and completions,
-- as GroupCommit sends them, is two rounds: the first of each page's transitions, then the
-- second.
--
-- What each transition changed is collected as (transition, value) pairs; the answer has one
-- element per transition, 0 for one that no longer applied, as before. The jobs changed are
-- notified once each, in the order of their first transition, as before.
CREATE OR REPLACE FUNCTION fairlane_apply(p_kinds text[], p_pages bigint[], p_jobs bigint[],
                                          p_reserved bigint[], p_outputs text[],
                                          p_input_tokens bigint[], p_output_tokens bigint[],
                                          p_errors text[], p_not_before bigint[],
                                          p_calls bigint[], p_now bigint, p_prune_before bigint,
                                          p_instance text, p_epoch bigint)
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
  total bigint := coalesce(cardinality(p_kinds), 0);
  bad_kind text;
  segments bigint[];
  cur record;
  cnt bigint;
  done_at bigint[] := '{}';     -- the transitions that changed something ...
  done_value bigint[] := '{}';  -- ... and what they changed
  touched_at bigint[] := '{}';  -- the transitions that touched a job ...
  touched_job bigint[] := '{}'; -- ... and which
  changed bigint[];
  held lease%ROWTYPE;
BEGIN
  IF coalesce(p_epoch, 0) > 0
     AND EXISTS (SELECT 1 FROM unnest(p_kinds) AS k WHERE k IS DISTINCT FROM 'job_cancelled') THEN
    SELECT * INTO held FROM lease FOR SHARE;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'instance % (epoch %) does not lead the cluster: no instance has '
                      'claimed the lease', p_instance, p_epoch USING ERRCODE = 'FL001';
    ELSIF held.holder <> p_instance OR held.epoch <> p_epoch THEN
      RAISE EXCEPTION 'instance % (epoch %) no longer leads the cluster: % leads it (epoch %)',
                      p_instance, p_epoch, held.holder, held.epoch
                      USING ERRCODE = 'FL001';
    ELSIF held.expires_at <= clock_timestamp() THEN
      RAISE EXCEPTION 'instance % (epoch %) no longer leads the cluster: its lease expired',
                      p_instance, p_epoch USING ERRCODE = 'FL001';
    END IF;
  END IF;
  -- A kind this function does not know fails the whole batch (version 3 failed it on
  -- reaching it, which rolled back whatever came before all the same).
  SELECT u.kind INTO bad_kind
    FROM unnest(p_kinds) WITH ORDINALITY AS u(kind, i)
    WHERE u.kind IS NULL OR u.kind NOT IN ('dispatched', 'completed', 'attempt_failed',
                                           'requeued', 'failed', 'job_cancelled')
    ORDER BY u.i LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'unknown page transition %', bad_kind USING ERRCODE = '22023';
  END IF;

  -- Each transition's step: stretches (a cancellation starts one, and is its round 0), then
  -- rounds within a stretch, numbered in order.
  SELECT array_agg(r.step ORDER BY r.i) INTO segments
    FROM (SELECT s.i, dense_rank() OVER (ORDER BY s.stretch, s.round) AS step
            FROM (SELECT c.i, c.stretch,
                         CASE WHEN c.kind = 'job_cancelled' THEN 0
                              ELSE row_number() OVER (PARTITION BY c.stretch,
                                                      c.kind = 'job_cancelled', c.page
                                                      ORDER BY c.i) END AS round
                    FROM (SELECT u.i, u.kind, u.page,
                                 sum((u.kind = 'job_cancelled')::int) OVER (ORDER BY u.i)
                                   AS stretch
                            FROM unnest(p_kinds, p_pages) WITH ORDINALITY AS u(kind, page, i))
                         AS c) AS s) AS r;

  FOR cur IN
    SELECT u.step, min(u.i) AS first,
           bool_or(u.kind = 'job_cancelled') AS cancels,
           bool_or(u.kind = 'dispatched') AS dispatches,
           bool_or(u.kind NOT IN ('dispatched', 'job_cancelled')) AS ends
      FROM unnest(segments, p_kinds) WITH ORDINALITY AS u(step, kind, i)
      GROUP BY u.step ORDER BY u.step
  LOOP
    IF cur.cancels THEN
      -- A cancellation, alone in its step: marks the job, cancels its queued pages.
      cnt := 0;
      UPDATE jobs SET cancelled_at = coalesce(cancelled_at, p_now) WHERE id = p_jobs[cur.first];
      IF FOUND THEN
        UPDATE pages SET state = 'cancelled', finished_at = p_now
          WHERE job_id = p_jobs[cur.first] AND state = 'queued';
        GET DIAGNOSTICS cnt = ROW_COUNT;
        touched_at := touched_at || cur.first;
        touched_job := touched_job || p_jobs[cur.first];
      END IF;
      done_at := done_at || cur.first;
      done_value := done_value || cnt;
      CONTINUE;
    END IF;

    IF cur.dispatches THEN
      -- Dispatches of queued pages: each call numbered, its spend written.
      WITH t AS (
        SELECT u.i, u.page, u.reserved
          FROM unnest(segments, p_kinds, p_pages, p_reserved) WITH ORDINALITY
               AS u(step, kind, page, reserved, i)
          WHERE u.step = cur.step AND u.kind = 'dispatched'),
      dispatched AS (
        UPDATE pages p SET state = 'in_flight', dispatches = p.dispatches + 1,
                           dispatched_at = p_now, not_before = NULL
          FROM t
          WHERE p.id = t.page AND p.state = 'queued'
          RETURNING t.i, p.id, p.dispatches, p.job_id, t.reserved),
      spent AS (
        INSERT INTO spend (page_id, dispatch, at, tokens)
          SELECT d.id, d.dispatches, p_now, d.reserved FROM dispatched d)
      SELECT done_at || coalesce(array_agg(d.i), '{}'),
             done_value || coalesce(array_agg(d.dispatches), '{}'),
             touched_at || coalesce(array_agg(d.i), '{}'),
             touched_job || coalesce(array_agg(d.job_id), '{}')
        INTO done_at, done_value, touched_at, touched_job
        FROM dispatched d;
    END IF;

    IF cur.ends THEN
      -- Completions, failed attempts, requeues and failures, each only of a page in flight on
      -- the call it names (0: its latest), or for a failure also of a queued page. The call
      -- that ends has its spend become the tokens it used (none unless completed). Both
      -- UPDATEs read the pages as they were before this statement (t reads them first, so
      -- that each UPDATE is driven by the batch's rows whatever the planner guesses of their
      -- number).
      WITH t AS (
        SELECT u.i, u.kind, u.page, u.output, u.input_tokens, u.output_tokens, u.error,
               u.not_before, coalesce(u.call, 0) AS wanted, q.state AS was, q.dispatches AS call
          FROM unnest(segments, p_kinds, p_pages, p_outputs, p_input_tokens, p_output_tokens,
                      p_errors, p_not_before, p_calls) WITH ORDINALITY
               AS u(step, kind, page, output, input_tokens, output_tokens, error, not_before,
                    call, i)
          JOIN pages q ON q.id = u.page
          WHERE u.step = cur.step AND u.kind NOT IN ('dispatched', 'job_cancelled')),
      ended AS (
        UPDATE spend s SET tokens = CASE WHEN t.kind = 'completed'
                                         THEN t.input_tokens + t.output_tokens ELSE 0 END,
                           ended_at = p_now
          FROM t
          WHERE t.was = 'in_flight' AND (t.wanted = 0 OR t.call = t.wanted)
            AND s.page_id = t.page AND s.dispatch = t.call),
      moved AS (
        UPDATE pages p SET
            state = CASE t.kind WHEN 'completed' THEN 'done'
                                WHEN 'failed' THEN 'failed'
                                ELSE CASE WHEN j.cancelled_at IS NULL THEN 'queued'
                                          ELSE 'cancelled' END END,
            output = CASE WHEN t.kind = 'completed' THEN t.output ELSE p.output END,
            input_tokens = CASE WHEN t.kind = 'completed' THEN t.input_tokens
                                ELSE p.input_tokens END,
            output_tokens = CASE WHEN t.kind = 'completed' THEN t.output_tokens
                                 ELSE p.output_tokens END,
            finished_at = CASE WHEN t.kind IN ('completed', 'failed') THEN p_now
                               WHEN j.cancelled_at IS NULL THEN NULL
                               ELSE p_now END,
            error = CASE t.kind WHEN 'completed' THEN NULL
                                WHEN 'requeued' THEN p.error
                                ELSE t.error END,
            attempts = p.attempts + (t.kind = 'attempt_failed')::int,
            requeues = p.requeues + (t.kind = 'requeued')::int,
            not_before = CASE WHEN t.kind = 'attempt_failed' THEN t.not_before
                              ELSE p.not_before END
          FROM t, jobs j
          WHERE p.id = t.page AND j.id = p.job_id
            AND ((p.state = 'in_flight' AND (t.wanted = 0 OR p.dispatches = t.wanted))
                 OR (t.kind = 'failed' AND p.state = 'queued'))
          RETURNING t.i, p.job_id)
      SELECT done_at || coalesce(array_agg(m.i), '{}'),
             done_value || coalesce(array_agg(1::bigint), '{}'),
             touched_at || coalesce(array_agg(m.i), '{}'),
             touched_job || coalesce(array_agg(m.job_id), '{}')
        INTO done_at, done_value, touched_at, touched_job
        FROM moved m;
    END IF;
  END LOOP;

  DELETE FROM spend WHERE at < p_prune_before;
  PERFORM pg_notify('fairlane_job_changed', f.job::text)
    FROM (SELECT u.job FROM unnest(touched_job, touched_at) AS u(job, i)
            GROUP BY u.job ORDER BY min(u.i)) AS f;
  SELECT coalesce(array_agg(coalesce(d.value, 0) ORDER BY g.i), '{}') INTO changed
    FROM generate_series(1, total) AS g(i)
    LEFT JOIN unnest(done_at, done_value) AS d(i, value) ON d.i = g.i;
  RETURN changed;
END;
$$;

-- A page's text (3 KB is typical) is over PostgreSQL's threshold for compressing a value, and
-- its default method, pglz, cost a third of an enqueue's time in the server; lz4 compresses
-- such text about five times as fast, to much the same size. Values already stored keep their
-- method (both read back the same), and a server built without lz4 keeps pglz. PostgreSQL 13
-- knows no SET COMPRESSION, and keeps pglz too: the statement is run by EXECUTE, since
-- PL/pgSQL checks a block's statements before running it, and one that does not parse fails
-- the whole block whatever its handlers.
DO $$
BEGIN
  IF current_setting('server_version_num')::int >= 140000 THEN
    EXECUTE 'ALTER TABLE page_texts ALTER COLUMN text SET COMPRESSION lz4';
  END IF;
EXCEPTION WHEN feature_not_supported THEN
  NULL;
END;
$$;

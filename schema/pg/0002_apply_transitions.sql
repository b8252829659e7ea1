-- fairlane schema for PostgreSQL, version 2: page transitions applied on the server, a whole
-- batch in one call (one round trip, one transaction), with the SQLite store's statements
-- (src/store/queries.hpp: dispatched, insert_spend, correct_spend, completed, attempt_failed,
-- requeued, failed, mark_job_cancelled, cancel_job, prune_spend) in the same order and with
-- the same effects. The trigger pages_follow_state keeps the jobs' counters as in SQLite.
--
-- The arrays are the batch's transitions as columns, element i of each being transition i's:
-- its kind ('dispatched', 'completed', 'attempt_failed', 'requeued', 'failed',
-- 'job_cancelled'), page, job, reserved tokens, output, usage, error, not_before and call (0:
-- the page's latest call). Returns, per transition: 0 when it no longer applied; for a
-- dispatch, the call's number; else the pages it changed. Spend dispatched before
-- p_prune_before is then deleted.
--
-- Fencing (DESIGN.md section 10, issue 17): the leader's epoch will be one more argument,
-- checked first against the lease row (read FOR SHARE, so that a takeover waits for this
-- batch or this batch for it); a stale epoch raises before anything is written, so a deposed
-- leader's transitions change nothing. Election does not exist yet.
CREATE FUNCTION fairlane_apply(p_kinds text[], p_pages bigint[], p_jobs bigint[],
                               p_reserved bigint[], p_outputs text[], p_input_tokens bigint[],
                               p_output_tokens bigint[], p_errors text[], p_not_before bigint[],
                               p_calls bigint[], p_now bigint, p_prune_before bigint)
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
  changed bigint[] := '{}';
  n bigint;
  call_number bigint;
  page bigint;
  wanted bigint;
BEGIN
  FOR i IN 1 .. coalesce(cardinality(p_kinds), 0) LOOP
    page := p_pages[i];
    wanted := coalesce(p_calls[i], 0);
    IF p_kinds[i] = 'dispatched' THEN
      call_number := NULL;
      UPDATE pages SET state = 'in_flight', dispatches = dispatches + 1, dispatched_at = p_now,
                       not_before = NULL
        WHERE id = page AND state = 'queued' RETURNING dispatches INTO call_number;
      IF call_number IS NULL THEN
        changed := changed || 0::bigint;
      ELSE
        INSERT INTO spend (page_id, dispatch, at, tokens)
          VALUES (page, call_number, p_now, p_reserved[i]);
        changed := changed || call_number;
      END IF;
    ELSIF p_kinds[i] = 'job_cancelled' THEN
      UPDATE jobs SET cancelled_at = coalesce(cancelled_at, p_now) WHERE id = p_jobs[i];
      GET DIAGNOSTICS n = ROW_COUNT;
      IF n > 0 THEN
        UPDATE pages SET state = 'cancelled', finished_at = p_now
          WHERE job_id = p_jobs[i] AND state = 'queued';
        GET DIAGNOSTICS n = ROW_COUNT;
      END IF;
      changed := changed || n;
    ELSE
      -- The call that ends: its spend becomes the tokens it used (none unless completed),
      -- while the page is in flight on that call.
      UPDATE spend SET tokens = CASE WHEN p_kinds[i] = 'completed'
                                     THEN p_input_tokens[i] + p_output_tokens[i] ELSE 0 END,
                       ended_at = p_now
        WHERE page_id = page AND dispatch =
          (SELECT dispatches FROM pages
            WHERE id = page AND state = 'in_flight' AND (wanted = 0 OR dispatches = wanted));
      IF p_kinds[i] = 'completed' THEN
        UPDATE pages SET state = 'done', output = p_outputs[i],
                         input_tokens = p_input_tokens[i], output_tokens = p_output_tokens[i],
                         finished_at = p_now, error = NULL
          WHERE id = page AND state = 'in_flight' AND (wanted = 0 OR dispatches = wanted);
      ELSIF p_kinds[i] = 'attempt_failed' THEN
        UPDATE pages SET
            state = CASE WHEN jobs.cancelled_at IS NULL THEN 'queued' ELSE 'cancelled' END,
            finished_at = CASE WHEN jobs.cancelled_at IS NULL THEN NULL ELSE p_now END,
            attempts = pages.attempts + 1, error = p_errors[i], not_before = p_not_before[i]
          FROM jobs
          WHERE pages.id = page AND pages.state = 'in_flight'
            AND (wanted = 0 OR pages.dispatches = wanted) AND jobs.id = pages.job_id;
      ELSIF p_kinds[i] = 'requeued' THEN
        UPDATE pages SET
            state = CASE WHEN jobs.cancelled_at IS NULL THEN 'queued' ELSE 'cancelled' END,
            finished_at = CASE WHEN jobs.cancelled_at IS NULL THEN NULL ELSE p_now END,
            requeues = pages.requeues + 1
          FROM jobs
          WHERE pages.id = page AND pages.state = 'in_flight'
            AND (wanted = 0 OR pages.dispatches = wanted) AND jobs.id = pages.job_id;
      ELSIF p_kinds[i] = 'failed' THEN
        UPDATE pages SET state = 'failed', error = p_errors[i], finished_at = p_now
          WHERE id = page AND (state = 'queued'
                               OR (state = 'in_flight' AND (wanted = 0 OR dispatches = wanted)));
      ELSE
        RAISE EXCEPTION 'unknown page transition %', p_kinds[i] USING ERRCODE = '22023';
      END IF;
      GET DIAGNOSTICS n = ROW_COUNT;
      changed := changed || n;
    END IF;
  END LOOP;
  DELETE FROM spend WHERE at < p_prune_before;
  RETURN changed;
END;
$$;


-- fairlane schema for PostgreSQL, version 6: a batch locks its jobs before it reads them.
--
-- A cancellation (any instance, a user's act) marks its job and cancels the job's queued
-- pages; the leader's batches end pages in flight, and put a requeued or retried page back in
-- the queue unless its job was cancelled. Under READ COMMITTED each statement reads the jobs
-- as they were when it began, so a requeue whose statement had begun when another instance's
-- cancellation committed read the job as not cancelled and put its page back in the queue,
-- after the cancellation had cancelled the queued ones: a page of a cancelled job was left
-- queued, its job never finished, and the next leader would have sent it. The same held for
-- the takeover's requeue. And the two took their locks in opposite orders (a cancellation
-- the job, then its pages; a batch its pages, then, through the counters' trigger, their
-- jobs), so they could deadlock, one of them failing after a second.
--
-- Now every batch and the takeover's requeue first lock the rows of the jobs they touch, in
-- id order (FOR NO KEY UPDATE, which an UPDATE of a job's counters takes anyway), before any
-- of their statements reads a job: a cancellation under way is waited for, and then seen; a
-- cancellation that comes after waits for the batch, and then finds the page queued and
-- cancels it. fairlane_apply_locked takes fairlane_apply's arguments, locks, and calls it;
-- the store calls it instead.
-- Locks the jobs of pages `p_pages` and the jobs `p_jobs` (0s ignored), in id order.
CREATE FUNCTION fairlane_lock_jobs(p_pages bigint[], p_jobs bigint[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM jobs
    WHERE id IN (SELECT job_id FROM pages WHERE id = ANY(p_pages)
                 UNION SELECT unnest(p_jobs))
    ORDER BY id
    FOR NO KEY UPDATE;
END;
$$;

CREATE FUNCTION fairlane_apply_locked(p_kinds text[], p_pages bigint[], p_jobs bigint[],
                                      p_reserved bigint[], p_outputs text[],
                                      p_input_tokens bigint[], p_output_tokens bigint[],
                                      p_errors text[], p_not_before bigint[], p_calls bigint[],
                                      p_now bigint, p_prune_before bigint, p_instance text,
                                      p_epoch bigint)
RETURNS bigint[] LANGUAGE plpgsql AS $$
BEGIN
  PERFORM fairlane_lock_jobs(p_pages, p_jobs);
  RETURN fairlane_apply(p_kinds, p_pages, p_jobs, p_reserved, p_outputs, p_input_tokens,
                        p_output_tokens, p_errors, p_not_before, p_calls, p_now,
                        p_prune_before, p_instance, p_epoch);
END;
$$;

-- The takeover's requeue of version 5, its fence first, then the jobs of the pages in flight
-- locked before it reads whether they were cancelled.
CREATE OR REPLACE FUNCTION fairlane_requeue_in_flight(p_now bigint, p_instance text,
                                                      p_epoch bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  held lease%ROWTYPE;
  n bigint;
BEGIN
  IF coalesce(p_epoch, 0) > 0 THEN
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
  PERFORM fairlane_lock_jobs(ARRAY(SELECT id FROM pages WHERE state = 'in_flight'), '{}');
  UPDATE pages SET state = CASE WHEN jobs.cancelled_at IS NULL THEN 'queued' ELSE 'cancelled' END,
                   finished_at = CASE WHEN jobs.cancelled_at IS NULL THEN NULL ELSE p_now END
    FROM jobs
    WHERE pages.state = 'in_flight' AND jobs.id = pages.job_id;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END;
$$;

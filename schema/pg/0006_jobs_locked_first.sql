-- fairlane schema for PostgreSQL, version 6: a batch locks its jobs before it reads them.
--
-- A cancellation (any instance, a user's act) marks its job and cancels the job's queued
-- pages; the leader's batches end pages in flight, and put a requeued or retried page back in
-- the queue unless its job was cancelled. Under READ COMMITTED each statement reads the jobs
-- as they were when it began, so a requeue whose statement had begun when another instance's
-- cancellation committed read the job as not cancelled and put its page back in the queue,
-- after the cancellation had cancelled the queued ones: a page of a cancelled job was left
-- queued, its job never finished, and the next leader would have sent it. And the two took
-- their locks in opposite orders (a cancellation the job, then its pages; a batch its pages,
-- then, through the counters' trigger, their jobs), so they could deadlock, one of them
-- failing after a second.
--
-- Now every batch first locks the rows of the jobs it touches, in id order (FOR NO KEY
-- UPDATE, which an UPDATE of a job's counters takes anyway; fairlane_lock_jobs, version 5,
-- whose requeue does the same), before any of its statements reads a job: a cancellation
-- under way is waited for, and then seen; a cancellation that comes after waits for the
-- batch, and then finds the page queued and cancels it. fairlane_apply_locked takes
-- fairlane_apply's arguments, locks, and calls it; the store calls it instead.
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


-- fairlane schema for PostgreSQL, version 5: the takeover's requeue is fenced, and locks the
-- jobs it reads.
--
-- A new leader's first write puts the pages the previous leader left in flight back in their
-- lanes (PgStore::load_lanes). Until version 5 that UPDATE carried no fence: an instance that
-- claimed the lease and then stalled past it (a pause longer than the lease, while another
-- instance claimed it and began to dispatch) would, when it woke, requeue the pages the leader
-- of the moment had in flight. Their completions would then find them queued and change
-- nothing, and the pages would stay queued where no leader's lanes held them, until the next
-- takeover. fairlane_requeue_in_flight checks the fence as fairlane_apply does (the lease row
-- read FOR SHARE, SQLSTATE FL001 before anything is written: fairlane_check_fence), then
-- requeues, and returns how many pages it put back. p_epoch 0 requeues unfenced (a single
-- node, the tests).
--
-- It also locks the jobs of the pages in flight (fairlane_lock_jobs, in id order, FOR NO KEY
-- UPDATE) before it reads whether they were cancelled: under READ COMMITTED a statement reads
-- the jobs as they were when it began, so a cancellation another instance committed meanwhile
-- would not be seen, and its page would go back to the queue after the cancellation had
-- cancelled the queued ones (version 6 does the same for the batches of transitions).

-- Raises FL001 unless the lease names p_instance with p_epoch and has not expired; nothing
-- with p_epoch 0. The lease row is read FOR SHARE: a takeover waits for the caller's
-- transaction, and the caller for a takeover under way.
CREATE FUNCTION fairlane_check_fence(p_instance text, p_epoch bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  held lease%ROWTYPE;
BEGIN
  IF coalesce(p_epoch, 0) = 0 THEN
    RETURN;
  END IF;
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
END;
$$;

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

CREATE FUNCTION fairlane_requeue_in_flight(p_now bigint, p_instance text, p_epoch bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  PERFORM fairlane_check_fence(p_instance, p_epoch);
  PERFORM fairlane_lock_jobs(ARRAY(SELECT id FROM pages WHERE state = 'in_flight'), '{}');
  UPDATE pages SET state = CASE WHEN jobs.cancelled_at IS NULL THEN 'queued' ELSE 'cancelled' END,
                   finished_at = CASE WHEN jobs.cancelled_at IS NULL THEN NULL ELSE p_now END
    FROM jobs
    WHERE pages.state = 'in_flight' AND jobs.id = pages.job_id;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END;
$$;

-- fairlane schema for PostgreSQL, version 3: what the instances of a cluster share beyond the
-- Store (DESIGN.md section 10, include/fairlane/store/cluster.hpp): the leader's lease, the
-- fencing of every page transition by the leader's epoch, and the notifications that let the
-- other instances follow what one wrote.
--
-- The lease is one row: who holds it, the epoch (incremented at every change of holder), and
-- when it runs out, in the server's time (clock_timestamp()), so that no instance's clock
-- matters. A lease rather than an advisory lock: a session lock is held for as long as its
-- connection lives, so a leader that is paused (stopped, swapping, partitioned but connected)
-- would keep it forever; a lease runs out unless renewed, and the epoch tells a deposed
-- leader's late writes from the new leader's.
CREATE TABLE lease (
  id          BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),  -- one row at most
  holder      TEXT NOT NULL,
  epoch       BIGINT NOT NULL CHECK (epoch > 0),
  expires_at  TIMESTAMPTZ NOT NULL
);

-- Takes the lease for p_instance for p_lease_ms from now if it is free, expired or already
-- p_instance's (a renewal), in one statement: the row is locked while it is decided, so two
-- instances claiming at once are ordered. The epoch goes up only when the holder changes.
-- Returns the lease as it stands afterwards: its holder, epoch and milliseconds left.
CREATE FUNCTION fairlane_claim_lease(p_instance text, p_lease_ms bigint)
RETURNS TABLE (holder text, epoch bigint, remaining_ms bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
    INSERT INTO lease AS l (id, holder, epoch, expires_at)
      VALUES (true, p_instance, 1, clock_timestamp() + p_lease_ms * interval '1 millisecond')
    ON CONFLICT (id) DO UPDATE
      SET holder = EXCLUDED.holder,
          epoch = CASE WHEN l.holder = EXCLUDED.holder THEN l.epoch ELSE l.epoch + 1 END,
          expires_at = clock_timestamp() + p_lease_ms * interval '1 millisecond'
      WHERE l.holder = EXCLUDED.holder OR l.expires_at <= clock_timestamp()
    RETURNING l.holder, l.epoch, p_lease_ms;
  IF NOT FOUND THEN
    -- Held by another instance, and not expired: who, until when. (The INSERT locked the
    -- row and this statement's snapshot sees its latest version.)
    RETURN QUERY
      SELECT l.holder, l.epoch,
             greatest(0, floor(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000))::bigint
        FROM lease l;
  END IF;
END;
$$;

-- fairlane_apply of version 2 with two more arguments, p_instance and p_epoch, the fence:
-- with p_epoch > 0, a batch holding anything but cancellations goes through only while the
-- lease row names p_instance with p_epoch and has not expired. The row is read FOR SHARE, so
-- that a takeover (which updates it) waits for this batch to commit, and this batch for a
-- takeover under way. A stale fence raises SQLSTATE FL001 before anything is written, which
-- the store reports as StatusCode::fenced. A cancellation is a user's act, written by any
-- instance: a batch of cancellations only is never fenced. p_epoch 0 writes unfenced.
--
-- Each job the batch changed is notified once on fairlane_job_changed (payload: its id in
-- decimal), delivered when the batch commits; the channel's name is kJobChangedChannel in
-- include/fairlane/store/cluster.hpp.
DROP FUNCTION fairlane_apply(text[], bigint[], bigint[], bigint[], text[], bigint[], bigint[],
                             text[], bigint[], bigint[], bigint, bigint);
CREATE FUNCTION fairlane_apply(p_kinds text[], p_pages bigint[], p_jobs bigint[],
                               p_reserved bigint[], p_outputs text[], p_input_tokens bigint[],
                               p_output_tokens bigint[], p_errors text[], p_not_before bigint[],
                               p_calls bigint[], p_now bigint, p_prune_before bigint,
                               p_instance text, p_epoch bigint)
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
  changed bigint[] := '{}';
  touched bigint[] := '{}';
  n bigint;
  call_number bigint;
  page bigint;
  wanted bigint;
  job bigint;
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
  FOR i IN 1 .. coalesce(cardinality(p_kinds), 0) LOOP
    page := p_pages[i];
    wanted := coalesce(p_calls[i], 0);
    job := NULL;
    IF p_kinds[i] = 'dispatched' THEN
      call_number := NULL;
      UPDATE pages SET state = 'in_flight', dispatches = dispatches + 1, dispatched_at = p_now,
                       not_before = NULL
        WHERE id = page AND state = 'queued' RETURNING dispatches, job_id INTO call_number, job;
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
        job := p_jobs[i];
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
          WHERE id = page AND state = 'in_flight' AND (wanted = 0 OR dispatches = wanted)
          RETURNING job_id INTO job;
      ELSIF p_kinds[i] = 'attempt_failed' THEN
        UPDATE pages SET
            state = CASE WHEN jobs.cancelled_at IS NULL THEN 'queued' ELSE 'cancelled' END,
            finished_at = CASE WHEN jobs.cancelled_at IS NULL THEN NULL ELSE p_now END,
            attempts = pages.attempts + 1, error = p_errors[i], not_before = p_not_before[i]
          FROM jobs
          WHERE pages.id = page AND pages.state = 'in_flight'
            AND (wanted = 0 OR pages.dispatches = wanted) AND jobs.id = pages.job_id
          RETURNING pages.job_id INTO job;
      ELSIF p_kinds[i] = 'requeued' THEN
        UPDATE pages SET
            state = CASE WHEN jobs.cancelled_at IS NULL THEN 'queued' ELSE 'cancelled' END,
            finished_at = CASE WHEN jobs.cancelled_at IS NULL THEN NULL ELSE p_now END,
            requeues = pages.requeues + 1
          FROM jobs
          WHERE pages.id = page AND pages.state = 'in_flight'
            AND (wanted = 0 OR pages.dispatches = wanted) AND jobs.id = pages.job_id
          RETURNING pages.job_id INTO job;
      ELSIF p_kinds[i] = 'failed' THEN
        UPDATE pages SET state = 'failed', error = p_errors[i], finished_at = p_now
          WHERE id = page AND (state = 'queued'
                               OR (state = 'in_flight' AND (wanted = 0 OR dispatches = wanted)))
          RETURNING job_id INTO job;
      ELSE
        RAISE EXCEPTION 'unknown page transition %', p_kinds[i] USING ERRCODE = '22023';
      END IF;
      GET DIAGNOSTICS n = ROW_COUNT;
      changed := changed || n;
    END IF;
    IF job IS NOT NULL AND NOT job = ANY (touched) THEN
      touched := touched || job;
    END IF;
  END LOOP;
  DELETE FROM spend WHERE at < p_prune_before;
  PERFORM pg_notify('fairlane_job_changed', t::text) FROM unnest(touched) AS t;
  RETURN changed;
END;
$$;

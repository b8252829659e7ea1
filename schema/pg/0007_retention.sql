-- fairlane schema for PostgreSQL, version 7: finished jobs can be pruned, as the SQLite
-- schema's version 6 (schema/sql/0006_retention.sql says what the index and the table are for).

CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE retention (
  id            BIGINT PRIMARY KEY CHECK (id = 1),
  first_job_at  BIGINT NOT NULL
);

-- Deletes the jobs that finished before p_before, oldest finish first, with their pages,
-- texts, images and spend, as many as fit in p_budget (a text page counts 1, an image page
-- p_image_weight; at least one job), but never the newest job, as the SQLite store keeps it.
-- Returns the jobs and pages deleted, and whether more jobs are due.
--
-- No fence: pruning changes nothing a leader decides on, and any instance may run it. The
-- jobs are locked as they are taken, FOR UPDATE SKIP LOCKED: a job another transaction holds
-- is left for the next call. The one wait left is for spend rows, which the leader's batches
-- also delete once they are an hour old (fairlane_apply), in another order: so that the two
-- never deadlock, and a batch never waits behind a prune for long, a prune waits at most
-- 100 ms for any lock (lock_timeout, for this transaction only) and otherwise fails with
-- SQLSTATE 55P03, to be tried again later. No trigger fires on a delete.
CREATE FUNCTION fairlane_prune(p_before bigint, p_budget bigint, p_image_weight bigint)
RETURNS TABLE (pruned_jobs bigint, pruned_pages bigint, more boolean)
LANGUAGE plpgsql AS $$
DECLARE
  newest bigint;
  taken bigint[] := '{}';
  weight bigint := 0;
  due boolean := false;
  job record;
BEGIN
  PERFORM set_config('lock_timeout', '100ms', true);
  SELECT max(id) INTO newest FROM jobs;
  FOR job IN
    SELECT j.id, j.page_count + (p_image_weight - 1) * j.image_pages AS w
    FROM jobs j
    WHERE j.finished_at IS NOT NULL AND j.finished_at < p_before AND j.id < newest
    ORDER BY j.finished_at, j.id
    -- A job weighs at least a page: more than p_budget never fit, and one more tells whether
    -- any is left.
    LIMIT greatest(p_budget, 1) + 1
    FOR UPDATE SKIP LOCKED
  LOOP
    IF cardinality(taken) > 0 AND weight + job.w > p_budget THEN
      due := true;
      EXIT;
    END IF;
    taken := taken || job.id;
    weight := weight + job.w;
  END LOOP;
  IF cardinality(taken) = 0 THEN
    RETURN QUERY SELECT 0::bigint, 0::bigint, false;
    RETURN;
  END IF;
  -- The first job's creation is kept before the first job can go.
  INSERT INTO retention (id, first_job_at)
    SELECT 1, created_at FROM jobs ORDER BY id LIMIT 1
    ON CONFLICT (id) DO NOTHING;
  DELETE FROM spend WHERE page_id IN (SELECT id FROM pages WHERE job_id = ANY (taken));
  DELETE FROM page_texts WHERE page_id IN (SELECT id FROM pages WHERE job_id = ANY (taken));
  DELETE FROM page_images WHERE page_id IN (SELECT id FROM pages WHERE job_id = ANY (taken));
  DELETE FROM pages WHERE job_id = ANY (taken);
  GET DIAGNOSTICS pruned_pages = ROW_COUNT;
  DELETE FROM jobs WHERE id = ANY (taken);
  GET DIAGNOSTICS pruned_jobs = ROW_COUNT;
  more := due;
  RETURN NEXT;
END;
$$;

-- fairlane schema, version 6: finished jobs can be pruned (Store::prune, `fairlane prune`,
-- `serve --retain`; docs/operations.md, "Retention").

-- Pruning reads the jobs that finished longest ago first.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;

-- retention: what pruning must not forget of the jobs it deletes. One row, written by the
-- first prune. first_job_at is when the store's first job was accepted: the estimator asks
-- it after a restart (recent_jobs) to tell a store that has taken uploads for a whole window
-- from one that began within it, and the first job may be long gone.
CREATE TABLE retention (
  id            INTEGER PRIMARY KEY CHECK (id = 1),
  first_job_at  INTEGER NOT NULL            -- created_at of the first job ever accepted
) STRICT;

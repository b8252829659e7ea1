-- fairlane schema, version 1: users, their jobs, and the pages that wait in lanes.
--
-- Times are integers: milliseconds since the Unix epoch (UTC). Every table is STRICT, so a
-- value of the wrong type is an error rather than a silent conversion.

-- users: the people and services allowed to enqueue work. A user's queued pages form one
-- lane, and the fair scheduler gives each backlogged lane a share in proportion to its
-- weight. The API key itself is never stored, only its SHA-256, so a copy of the database
-- does not leak keys; the plaintext key is shown once, when the user is created.
CREATE TABLE users (
  id          INTEGER PRIMARY KEY,            -- internal id; lanes are keyed by it
  name        TEXT NOT NULL UNIQUE,           -- the name jobs and logs show
  key_sha256  BLOB NOT NULL UNIQUE,           -- SHA-256 of the API key, 32 bytes
  weight      INTEGER NOT NULL DEFAULT 1      -- fair-share weight, 1 to 1000
              CHECK (weight BETWEEN 1 AND 1000),
  created_at  INTEGER NOT NULL                -- when the user was added
) STRICT;

-- jobs: one upload (a book) and what became of it. A job is written together with all its
-- pages in one transaction, so it either exists whole or not at all. Its page counters
-- and token totals are kept by the pages_follow_state trigger below, and its state is
-- derived from them: queued until a page is first dispatched, running while any page is
-- queued or in flight, then cancelled (if any page was cancelled), failed (if any page
-- failed) or done.
CREATE TABLE jobs (
  id              INTEGER PRIMARY KEY,        -- internal id; also the order of creation
  public_id       TEXT NOT NULL UNIQUE,       -- opaque random id shown to users ("job_...")
  user_id         INTEGER NOT NULL            -- owner; only they (and admins) see the job
                  REFERENCES users (id),
  name            TEXT NOT NULL,              -- what the uploader called it (file name)
  max_tokens      INTEGER NOT NULL            -- output tokens asked of the provider per page
                  CHECK (max_tokens > 0),
  idempotency_key TEXT,                       -- the upload's Idempotency-Key, or NULL
  page_count      INTEGER NOT NULL            -- pages in the job, fixed at creation
                  CHECK (page_count > 0),
  queued          INTEGER NOT NULL,           -- pages waiting in the lane
  in_flight       INTEGER NOT NULL DEFAULT 0, -- pages at the provider now
  done            INTEGER NOT NULL DEFAULT 0, -- pages with an output
  failed          INTEGER NOT NULL DEFAULT 0, -- pages that ran out of attempts
  cancelled       INTEGER NOT NULL DEFAULT 0, -- pages cancelled before dispatch
  input_tokens    INTEGER NOT NULL DEFAULT 0, -- provider-reported input tokens, all pages
  output_tokens   INTEGER NOT NULL DEFAULT 0, -- provider-reported output tokens, all pages
  created_at      INTEGER NOT NULL,           -- when the upload was accepted
  started_at      INTEGER,                    -- first dispatch of any page, or NULL
  cancelled_at    INTEGER,                    -- when its owner cancelled it, or NULL
  finished_at     INTEGER,                    -- when the last page ended, or NULL
  state           TEXT GENERATED ALWAYS AS (  -- queued|running|done|failed|cancelled
                    CASE
                      WHEN queued + in_flight > 0 THEN
                        CASE WHEN started_at IS NULL THEN 'queued' ELSE 'running' END
                      WHEN cancelled > 0 THEN 'cancelled'
                      WHEN failed > 0 THEN 'failed'
                      ELSE 'done'
                    END) VIRTUAL,
  UNIQUE (user_id, idempotency_key)
) STRICT;

-- A user's jobs, newest first (GET /v1/jobs).
CREATE INDEX jobs_by_user ON jobs (user_id, id);

-- pages: one provider call each. A page is queued in its owner's lane, in flight at the
-- provider, then done, failed (after max_attempts) or cancelled; a page of a cancelled job
-- that comes back from the provider unanswered is cancelled, not queued. Lanes are FIFO in id
-- order: ids grow with enqueue order, and the dispatcher takes a lane's pages in that
-- order, so a page that returns to queued (a provider 429, a failed attempt, a restart
-- while it was in flight) keeps its id and is back at the head of its lane. A page's id is
-- also its idempotency key: its output is written once, by the first completion.
CREATE TABLE pages (
  id               INTEGER PRIMARY KEY,       -- lane order and idempotency key
  job_id           INTEGER NOT NULL           -- the job it belongs to
                   REFERENCES jobs (id),
  user_id          INTEGER NOT NULL           -- the lane: the job's owner, copied here
                   REFERENCES users (id),
  seq              INTEGER NOT NULL,          -- 0-based position in the job
  estimated_tokens INTEGER NOT NULL           -- input estimate + max_tokens: the TPM reservation
                   CHECK (estimated_tokens >= 0),
  state            TEXT NOT NULL DEFAULT 'queued' -- queued|in_flight|done|failed|cancelled
                   CHECK (state IN ('queued', 'in_flight', 'done', 'failed', 'cancelled')),
  attempts         INTEGER NOT NULL DEFAULT 0, -- failed attempts, counted against max_attempts
  requeues         INTEGER NOT NULL DEFAULT 0, -- returns without an attempt spent (429s)
  dispatches       INTEGER NOT NULL DEFAULT 0, -- calls made so far; the latest call's number
  not_before       INTEGER,                   -- backoff: not dispatched before this time
  dispatched_at    INTEGER,                   -- the latest dispatch
  finished_at      INTEGER,                   -- when it became done, failed or cancelled
  input_tokens     INTEGER,                   -- provider-reported input tokens of the result
  output_tokens    INTEGER,                   -- provider-reported output tokens of the result
  output           TEXT,                      -- the provider's answer (done pages)
  error            TEXT,                      -- the last failure's reason, or NULL
  UNIQUE (job_id, seq)                        -- results in page order
) STRICT;

-- The lanes: queued pages by owner in lane order, covering everything load_lanes reads so
-- the restart never touches the table rows (or the texts). `state` is listed too because
-- SQLite counts an index as covering only if it holds every column the query names.
CREATE INDEX pages_queued
  ON pages (user_id, id, job_id, estimated_tokens, not_before, attempts, state)
  WHERE state = 'queued';

-- Pages at the provider, for the restart to put back in their lanes.
CREATE INDEX pages_in_flight ON pages (state) WHERE state = 'in_flight';

-- page_texts: the text of each page, apart from its row in pages so that the frequent
-- state changes never rewrite kilobytes of text. Written once at enqueue, read once per
-- dispatch.
CREATE TABLE page_texts (
  page_id  INTEGER PRIMARY KEY                -- the page
           REFERENCES pages (id),
  text     TEXT NOT NULL                      -- what the provider is asked to process
) STRICT;

-- Keeps a job's counters, token totals and times in step with its pages: every change of
-- a page's state moves one count from the old state to the new, adds the usage the page
-- gained, stamps the job's first dispatch, and stamps its end when nothing is left queued
-- or in flight.
CREATE TRIGGER pages_follow_state AFTER UPDATE OF state ON pages
WHEN OLD.state IS NOT NEW.state
BEGIN
  UPDATE jobs SET
    queued        = queued    - (OLD.state = 'queued')    + (NEW.state = 'queued'),
    in_flight     = in_flight - (OLD.state = 'in_flight') + (NEW.state = 'in_flight'),
    done          = done      - (OLD.state = 'done')      + (NEW.state = 'done'),
    failed        = failed    - (OLD.state = 'failed')    + (NEW.state = 'failed'),
    cancelled     = cancelled - (OLD.state = 'cancelled') + (NEW.state = 'cancelled'),
    input_tokens  = input_tokens  + coalesce(NEW.input_tokens, 0)  - coalesce(OLD.input_tokens, 0),
    output_tokens = output_tokens + coalesce(NEW.output_tokens, 0) - coalesce(OLD.output_tokens, 0),
    started_at    = CASE WHEN NEW.state = 'in_flight' THEN coalesce(started_at, NEW.dispatched_at)
                         ELSE started_at END,
    finished_at   = CASE WHEN queued + in_flight
                              - (OLD.state IN ('queued', 'in_flight'))
                              + (NEW.state IN ('queued', 'in_flight')) = 0
                         THEN coalesce(finished_at, NEW.finished_at)
                         ELSE NULL END
  WHERE id = NEW.job_id;
END;

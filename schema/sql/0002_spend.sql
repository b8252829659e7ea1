-- fairlane schema, version 2: the provider spend of recent calls.

-- spend: one row per call made to the provider, for the budgets' warm start. A restart
-- must not hand the provider a fresh minute of budget that it has already counted, so the
-- buckets start from the requests and tokens spent in the last minute. A row is written
-- with the tokens reserved at dispatch, corrected to the provider-reported usage when the
-- call completes, and set to 0 when it fails before any usage (the request still counts).
-- Rows older than an hour are pruned.
CREATE TABLE spend (
  page_id   INTEGER NOT NULL                  -- the page whose call this was
            REFERENCES pages (id),
  dispatch  INTEGER NOT NULL,                 -- which call of the page (pages.dispatches)
  at        INTEGER NOT NULL,                 -- when the call was dispatched
  tokens    INTEGER NOT NULL,                 -- reserved, then actual, tokens of the call
  PRIMARY KEY (page_id, dispatch)
) STRICT, WITHOUT ROWID;

-- recent_spend and pruning read by time.
CREATE INDEX spend_by_time ON spend (at);

-- fairlane schema for PostgreSQL, version 8: what an upload under an Idempotency-Key was, as
-- the SQLite schema's version 7 (schema/sql/0007_upload_digest.sql says what each holds).
ALTER TABLE jobs ADD COLUMN upload_head TEXT;
ALTER TABLE jobs ADD COLUMN upload_digest TEXT;

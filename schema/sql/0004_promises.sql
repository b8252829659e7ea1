-- fairlane schema, version 4: the ETA a job was promised at the door, and its revision.

-- promised_eta_at: when the door said the job would be done (ms since the epoch, as every
-- time here); NULL for jobs of an older fairlane, or taken through an idempotency key.
-- eta_revised_at / eta_revised_reason: the later finish the service announced once the
-- promise could no longer be kept, and why (the provider paused, lowered its limits, slowed
-- down, was unreachable, or more work arrived than expected). NULL until revised.
ALTER TABLE jobs ADD COLUMN promised_eta_at INTEGER;
ALTER TABLE jobs ADD COLUMN eta_revised_at INTEGER;
ALTER TABLE jobs ADD COLUMN eta_revised_reason TEXT;

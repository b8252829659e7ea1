-- fairlane schema, version 3: when each call ended.

-- spend.ended_at: when the call's answer (or its failure) was recorded, NULL while it is out
-- or when it never came back (the process died). At start, the longest call of the last ten
-- minutes (ended_at - at) is how long the calls the previous process left at the provider
-- may still run there: they hold places under the in-flight cap until then (docs/
-- architecture.md, "Restart").
ALTER TABLE spend ADD COLUMN ended_at INTEGER;

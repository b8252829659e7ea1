-- fairlane schema, version 7: what an upload under an Idempotency-Key was, so that the key
-- sent again with another upload is refused (422 idempotency_key_reused) rather than
-- answered with the first job (docs/api.md, "Idempotency-Key").
--
-- upload_head:   the request's media type and Content-Length ("application/pdf 48213"), or
--                NULL when it came chunked: an upload sent again with the same head is
--                answered from its headers, without its body.
-- upload_digest: SHA-256 of what the upload held, in hex: the PDF's bytes (raw, or the
--                multipart part's) or the JSON body. An upload sent again with another head
--                (a multipart boundary of another length, chunked) is read, and this decides.
-- Both NULL for jobs of an older fairlane, or without a key: their key answers as before.
ALTER TABLE jobs ADD COLUMN upload_head TEXT;
ALTER TABLE jobs ADD COLUMN upload_digest TEXT;

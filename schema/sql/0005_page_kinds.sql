-- fairlane schema, version 5: pages that go to the provider as images, and blank pages that
-- make no call.

-- kind: what the page is sent as. 'text' (its text, in page_texts), 'image' (its rendered
-- image, in page_images: a scan, or any page under --page-input image) or 'blank' (neither
-- text nor ink: written done, with an empty output, and never dispatched). Pages of an older
-- fairlane are text.
ALTER TABLE pages ADD COLUMN kind TEXT NOT NULL DEFAULT 'text'
  CHECK (kind IN ('text', 'image', 'blank'));

-- page_images: the encoded image of each image page, apart from its row in pages for the same
-- reason as page_texts (state changes never rewrite it). Written once at enqueue, read once
-- per dispatch; the PDF itself is not kept (docs/architecture.md, "Scanned pages").
CREATE TABLE page_images (
  page_id     INTEGER PRIMARY KEY             -- the page
              REFERENCES pages (id),
  media_type  TEXT NOT NULL                   -- how the bytes are encoded
              CHECK (media_type IN ('image/png', 'image/jpeg')),
  width       INTEGER NOT NULL CHECK (width > 0),   -- pixels, as the image's header says
  height      INTEGER NOT NULL CHECK (height > 0),
  bytes       BLOB NOT NULL                   -- the encoded image
) STRICT;

-- How many of a job's pages went as images, and how many were blank (counted done from the
-- start), fixed at creation like page_count.
ALTER TABLE jobs ADD COLUMN image_pages INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN blank_pages INTEGER NOT NULL DEFAULT 0;

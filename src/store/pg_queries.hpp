// Every SQL statement the PostgreSQL layer and store run, in one place (as queries.hpp is for
// SQLite). Parameters are $1, $2, ..., cast where first used so that nothing is left to the
// server's guess.
#pragma once

#include <string_view>

namespace fairlane::store {

// The columns of a job view, in the order pg_store.cpp's read_job reads them (those of
// queries.hpp's FAIRLANE_JOB_VIEW), and where they come from.
#define FAIRLANE_PG_JOB_COLUMNS                                                     \
  "j.id, j.public_id, j.user_id, u.name, j.name, j.state, j.page_count, j.queued, " \
  "j.in_flight, j.done, j.failed, j.cancelled, j.input_tokens, j.output_tokens, "   \
  "j.max_tokens, j.created_at, j.started_at, j.finished_at, j.promised_eta_at, "    \
  "j.eta_revised_at, j.eta_revised_reason, j.image_pages, j.blank_pages "
#define FAIRLANE_PG_JOB_FROM "FROM jobs j JOIN users u ON u.id = j.user_id "
#define FAIRLANE_PG_JOB_VIEW FAIRLANE_PG_JOB_COLUMNS FAIRLANE_PG_JOB_FROM

struct PgSql {
  // Orders migrating processes: an advisory lock held until the transaction ends, keyed by
  // "fairlane" read as a big-endian 64-bit integer.
  static constexpr std::string_view lock_migrations =
      "SELECT pg_advisory_xact_lock(7377293604775095909)";
  static constexpr std::string_view create_schema_migrations =
      "CREATE TABLE IF NOT EXISTS schema_migrations ("
      " version    INTEGER PRIMARY KEY,"
      " name       TEXT NOT NULL,"
      " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())";
  // Whether the first migration was ever attempted (a query naming a table that does not
  // exist fails before it runs, so this comes first).
  static constexpr std::string_view has_schema_migrations =
      "SELECT to_regclass('schema_migrations') IS NOT NULL";
  // The highest version applied.
  static constexpr std::string_view schema_version =
      "SELECT coalesce(max(version), 0) FROM schema_migrations";
  static constexpr std::string_view record_migration =
      "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)";

  // Every commit waits for its WAL to reach the server's disk (the default, said out loud:
  // an accepted job is a promise).
  static constexpr std::string_view synchronous_commit = "SET synchronous_commit = on";

  static constexpr std::string_view insert_user =
      "INSERT INTO users (name, key_sha256, weight, created_at) "
      "VALUES ($1::text, $2::bytea, $3::bigint, $4::bigint) RETURNING id";
  static constexpr std::string_view user_by_key =
      "SELECT id, name, weight FROM users WHERE key_sha256 = $1::bytea";
  static constexpr std::string_view user_by_name =
      "SELECT id, name, weight FROM users WHERE name = $1::text";
  static constexpr std::string_view all_users = "SELECT id, name, weight FROM users ORDER BY id";

  // A job and all its pages, texts and images in one statement (one round trip, one
  // transaction). $1 public id, $2 user, $3 name, $4 max_tokens, $5 idempotency key or NULL,
  // $6 pages, $7 created_at, $8 promised_eta_at or NULL, $9 blank pages, $10 image pages;
  // then one array per page column, in page order: $11 estimated tokens, $12 kinds, $13
  // texts, $14 media types, $15 widths, $16 heights, $17 image bytes (NULL where the kind
  // has none); $18 the upload's head and $19 its digest, or NULL. Page ids are drawn from the
  // pages' sequence and handed out in page order, so that lane order (page id) is page order; and,
  // the user's uploads taking turns (`lane`: an advisory lock keyed by "flan" and the user, held
  // until commit), a job's ids are one stretch, after those of the user's jobs committed before it,
  // even when several instances take the user's uploads at once. A repeated idempotency key inserts
  // nothing and returns no row. Otherwise: one row per page that enters a lane (job id, owner's
  // name, page id, seq), in page order, or a single row with a NULL page when every page is blank;
  // and the new job's id is notified on fairlane_job_enqueued (kJobEnqueuedChannel), delivered
  // at commit (`notified`: a CTE calling a volatile function is evaluated once, not inlined).
  static constexpr std::string_view enqueue_job =
      "WITH lane AS ("
      "  SELECT pg_advisory_xact_lock(1718378862, ($2::bigint % 2147483647)::int4) AS turn),"
      " job AS ("
      "  INSERT INTO jobs (public_id, user_id, name, max_tokens, idempotency_key, page_count,"
      "                    queued, done, created_at, finished_at, promised_eta_at, image_pages,"
      "                    blank_pages, upload_head, upload_digest)"
      "  SELECT $1::text, $2::bigint, $3::text, $4::bigint, $5::text, $6::bigint,"
      "         $6::bigint - $9::bigint, $9::bigint, $7::bigint,"
      "         CASE WHEN $6::bigint = $9::bigint THEN $7::bigint END, $8::bigint, $10::bigint,"
      "         $9::bigint, $18::text, $19::text"
      "  FROM lane"
      "  ON CONFLICT (user_id, idempotency_key) DO NOTHING"
      "  RETURNING id),"
      " input AS ("
      "  SELECT i - 1 AS seq, tokens, kind, text, media_type, width, height, bytes"
      "  FROM unnest($11::bigint[], $12::text[], $13::text[], $14::text[], $15::bigint[],"
      "              $16::bigint[], $17::bytea[])"
      "       WITH ORDINALITY AS u(tokens, kind, text, media_type, width, height, bytes, i)),"
      " ids AS ("
      "  SELECT row_number() OVER (ORDER BY id) - 1 AS seq, id FROM ("
      "    SELECT nextval(pg_get_serial_sequence('pages', 'id')) AS id"
      "    FROM job, generate_series(1, $6::bigint)) AS drawn),"
      " page_rows AS ("
      "  INSERT INTO pages (id, job_id, user_id, seq, estimated_tokens, kind, state, output,"
      "                     finished_at)"
      "  SELECT ids.id, job.id, $2::bigint, input.seq, input.tokens, input.kind,"
      "         CASE WHEN input.kind = 'blank' THEN 'done' ELSE 'queued' END,"
      "         CASE WHEN input.kind = 'blank' THEN '' END,"
      "         CASE WHEN input.kind = 'blank' THEN $7::bigint END"
      "  FROM job, input JOIN ids ON ids.seq = input.seq"
      "  RETURNING id, seq, kind),"
      " texts AS ("
      "  INSERT INTO page_texts (page_id, text)"
      "  SELECT ids.id, input.text FROM job, input JOIN ids ON ids.seq = input.seq"
      "  WHERE input.kind = 'text'),"
      " images AS ("
      "  INSERT INTO page_images (page_id, media_type, width, height, bytes)"
      "  SELECT ids.id, input.media_type, input.width, input.height, input.bytes"
      "  FROM job, input JOIN ids ON ids.seq = input.seq WHERE input.kind = 'image'),"
      " notified AS (SELECT id, pg_notify('fairlane_job_enqueued', id::text) FROM job)"
      " SELECT job.id, u.name, p.id, p.seq FROM notified job JOIN users u ON u.id = $2::bigint"
      " LEFT JOIN page_rows p ON p.kind <> 'blank' ORDER BY p.seq";
  static constexpr std::string_view job_by_idempotency_key =
      "SELECT id, upload_head, upload_digest FROM jobs"
      " WHERE user_id = $1::bigint AND idempotency_key = $2::text";
  static constexpr std::string_view job_by_id =
      "SELECT " FAIRLANE_PG_JOB_VIEW "WHERE j.id = $1::bigint";
  static constexpr std::string_view jobs_by_ids =
      "SELECT " FAIRLANE_PG_JOB_VIEW "WHERE j.id = ANY($1::bigint[]) ORDER BY j.id";
  static constexpr std::string_view job_by_public_id =
      "SELECT " FAIRLANE_PG_JOB_VIEW "WHERE j.public_id = $1::text AND j.user_id = $2::bigint";
  static constexpr std::string_view job_id_by_public_id =
      "SELECT id FROM jobs WHERE public_id = $1::text AND user_id = $2::bigint";
  // A user's jobs, newest first, $2 of them, after the job of id $3 (0: from the newest).
  static constexpr std::string_view jobs_of =
      "SELECT " FAIRLANE_PG_JOB_VIEW
      "WHERE j.user_id = $1::bigint "
      "AND ($3::bigint = 0 OR j.id < $3::bigint) ORDER BY j.id DESC LIMIT $2::bigint";
  static constexpr std::string_view results =
      "SELECT seq, state, output, error, input_tokens, output_tokens, attempts, kind FROM pages "
      "WHERE job_id = $1::bigint AND seq >= $2::bigint ORDER BY seq LIMIT $3::bigint";
  static constexpr std::string_view page_call =
      "SELECT p.kind, t.text, j.max_tokens, i.media_type, i.width, i.height, i.bytes "
      "FROM pages p JOIN jobs j ON j.id = p.job_id LEFT JOIN page_texts t ON t.page_id = p.id "
      "LEFT JOIN page_images i ON i.page_id = p.id WHERE p.id = $1::bigint";
  static constexpr std::string_view set_weight =
      "UPDATE users SET weight = $2::bigint WHERE name = $1::text";
  // Notifies the job on fairlane_job_changed (kJobChangedChannel).
  static constexpr std::string_view revise_eta =
      "UPDATE jobs SET eta_revised_at = $2::bigint, eta_revised_reason = $3::text "
      "WHERE id = $1::bigint RETURNING pg_notify('fairlane_job_changed', id::text)";
  // Notifies the job on fairlane_job_changed (kJobChangedChannel).
  static constexpr std::string_view set_promise =
      "UPDATE jobs SET promised_eta_at = $2::bigint "
      "WHERE id = $1::bigint RETURNING pg_notify('fairlane_job_changed', id::text)";
  // The job view and, after its columns, its queued pages in lane order (page id, estimated
  // tokens, not_before, attempts), one row per page, or one row with a NULL page when none
  // is queued.
  static constexpr std::string_view queued_job =
      "SELECT " FAIRLANE_PG_JOB_COLUMNS
      ", p.id, p.estimated_tokens, p.not_before, p.attempts " FAIRLANE_PG_JOB_FROM
      "LEFT JOIN pages p ON p.job_id = j.id AND p.state = 'queued' "
      "WHERE j.id = $1::bigint ORDER BY p.id";
  static constexpr std::string_view in_flight_by_user =
      "SELECT user_id, count(*) FROM pages WHERE state = 'in_flight' "
      "GROUP BY user_id ORDER BY user_id";
  static constexpr std::string_view recent_spend =
      "SELECT count(*), coalesce(sum(tokens), 0) FROM spend WHERE at > $1::bigint";
  // Calls sent since $1 that have not ended: their spend rows, which outlive a requeue of
  // their pages (load_lanes, at a start that may then fail), and the longest call that ended
  // since $1.
  static constexpr std::string_view calls_out =
      "SELECT at FROM spend WHERE at > $1::bigint AND ended_at IS NULL";
  static constexpr std::string_view longest_call =
      "SELECT max(ended_at - at) FROM spend WHERE at > $1::bigint AND ended_at IS NOT NULL";
  // The last $1 calls that ended with usage, newest first, with their pages' reservations.
  static constexpr std::string_view recent_calls =
      "SELECT s.tokens, p.estimated_tokens, s.ended_at - s.at FROM spend s JOIN pages p ON "
      "p.id = s.page_id WHERE s.ended_at IS NOT NULL AND s.tokens > 0 ORDER BY s.at DESC "
      "LIMIT $1::bigint";
  // The jobs created after $1 among the $2 newest (ids follow creation), oldest first; and
  // when the first job was created.
  static constexpr std::string_view recent_jobs =
      "SELECT id, user_id, page_count, created_at, finished_at FROM jobs WHERE id > (SELECT "
      "max(id) FROM jobs) - $2::bigint AND created_at > $1::bigint ORDER BY id";
  static constexpr std::string_view first_job_at =
      "SELECT coalesce((SELECT first_job_at FROM retention WHERE id = 1), "
      "(SELECT created_at FROM jobs WHERE id = (SELECT min(id) FROM jobs)))";

  // Retention: one batch of the jobs finished before $1 (schema/pg/0007_retention.sql), and
  // what all of them come to.
  static constexpr std::string_view prune =
      "SELECT pruned_jobs, pruned_pages, more::int FROM fairlane_prune($1::bigint, $2::bigint, "
      "$3::bigint)";
  static constexpr std::string_view prunable =
      "SELECT count(*), coalesce(sum(page_count), 0) FROM jobs WHERE finished_at IS NOT NULL "
      "AND finished_at < $1::bigint AND id < (SELECT max(id) FROM jobs)";

  // At start (or when a leader takes over): calls in flight were lost with their process, so
  // their pages go back to their lanes, or are cancelled if their job was; fenced
  // (schema/pg/0005_fenced_requeue.sql): $1 now, $2 and $3 the fence's instance and epoch
  // (0: unfenced). How many pages went back, or SQLSTATE FL001.
  static constexpr std::string_view requeue_in_flight =
      "SELECT fairlane_requeue_in_flight($1::bigint, $2::text, $3::bigint)";
  // A batch of page transitions in one statement (schema/pg/0003_cluster.sql and 0004, its
  // jobs locked first by 0006's fairlane_apply_locked): $1 kinds, $2 pages, $3 jobs, $4
  // reserved tokens, $5 outputs, $6 input tokens, $7 output tokens, $8 errors, $9
  // not_before, $10 calls, one element per transition; $11 now, $12 the oldest spend kept;
  // $13 and $14 the fence's instance and epoch (0: unfenced). One bigint[] back: what each
  // transition changed.
  static constexpr std::string_view apply =
      "SELECT fairlane_apply_locked($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], "
      "$5::text[], $6::bigint[], $7::bigint[], $8::text[], $9::bigint[], $10::bigint[], "
      "$11::bigint, $12::bigint, $13::text, $14::bigint)";

  // The leader's lease (schema/pg/0003_cluster.sql): $1 instance, $2 milliseconds. One row
  // back: the holder, epoch and milliseconds left afterwards.
  static constexpr std::string_view claim_lease =
      "SELECT holder, epoch, remaining_ms FROM fairlane_claim_lease($1::text, $2::bigint)";
  // Expires the lease now if $1 holds it.
  static constexpr std::string_view release_lease =
      "UPDATE lease SET expires_at = clock_timestamp() "
      "WHERE holder = $1::text AND expires_at > clock_timestamp()";
  // Rewrites the newest migration's row as it is: a write, committed, that changes nothing.
  static constexpr std::string_view probe_write =
      "UPDATE schema_migrations SET name = name "
      "WHERE version = (SELECT max(version) FROM schema_migrations)";
  // The lanes, with their owners' weights, in one read.
  static constexpr std::string_view queued_pages =
      "SELECT p.user_id, u.weight, p.id, p.job_id, p.estimated_tokens, p.not_before, p.attempts "
      "FROM pages p JOIN users u ON u.id = p.user_id WHERE p.state = 'queued' "
      "ORDER BY p.user_id, p.id";
};

#undef FAIRLANE_PG_JOB_VIEW
#undef FAIRLANE_PG_JOB_FROM
#undef FAIRLANE_PG_JOB_COLUMNS

}  // namespace fairlane::store

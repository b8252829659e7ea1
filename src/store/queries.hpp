// Every SQL statement the store runs, in one place: store.cpp prepares them once at open,
// and a test asks SQLite's planner about each (no full scan of pages on any of them).
#pragma once

#include <array>
#include <string_view>

namespace fairlane::store {

// The columns of a job view, in the order SqliteStore::read_job reads them.
#define FAIRLANE_JOB_VIEW                                                           \
  "j.id, j.public_id, j.user_id, u.name, j.name, j.state, j.page_count, j.queued, " \
  "j.in_flight, j.done, j.failed, j.cancelled, j.input_tokens, j.output_tokens, "   \
  "j.max_tokens, j.created_at, j.started_at, j.finished_at, j.promised_eta_at, "    \
  "j.eta_revised_at, j.eta_revised_reason, j.image_pages, j.blank_pages "           \
  "FROM jobs j JOIN users u ON u.id = j.user_id "

struct Sql {
  static constexpr std::string_view insert_user =
      "INSERT INTO users (name, key_sha256, weight, created_at) VALUES (?1, ?2, ?3, ?4)";
  static constexpr std::string_view user_by_key =
      "SELECT id, name, weight FROM users WHERE key_sha256 = ?1";
  static constexpr std::string_view user_by_name =
      "SELECT id, name, weight FROM users WHERE name = ?1";
  static constexpr std::string_view all_users = "SELECT id, name, weight FROM users ORDER BY id";
  static constexpr std::string_view in_flight_by_user =
      "SELECT user_id, count(*) FROM pages INDEXED BY pages_in_flight WHERE state = 'in_flight' "
      "GROUP BY user_id ORDER BY user_id";
  static constexpr std::string_view user_by_id = "SELECT id, name, weight FROM users WHERE id = ?1";
  static constexpr std::string_view set_weight = "UPDATE users SET weight = ?2 WHERE name = ?1";
  static constexpr std::string_view job_by_idempotency_key =
      "SELECT id, upload_head, upload_digest FROM jobs WHERE user_id = ?1 AND idempotency_key = ?2";
  static constexpr std::string_view insert_job =
      // Blank pages (?9) are done from the start; a job of nothing else has finished.
      "INSERT INTO jobs (public_id, user_id, name, max_tokens, idempotency_key, page_count, "
      "queued, done, created_at, finished_at, promised_eta_at, image_pages, blank_pages, "
      "upload_head, upload_digest) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6 - ?9, ?9, ?7, iif(?6 = ?9, ?7, NULL), ?8, ?10, ?9, ?11, "
      "?12)";
  static constexpr std::string_view revise_eta =
      "UPDATE jobs SET eta_revised_at = ?2, eta_revised_reason = ?3 WHERE id = ?1";
  static constexpr std::string_view set_promise =
      "UPDATE jobs SET promised_eta_at = ?2 WHERE id = ?1";
  static constexpr std::string_view insert_page =
      // A blank page (?5) is written done, with an empty output: it makes no call.
      "INSERT INTO pages (job_id, user_id, seq, estimated_tokens, kind, state, output, "
      "finished_at) VALUES (?1, ?2, ?3, ?4, ?5, iif(?5 = 'blank', 'done', 'queued'), "
      "iif(?5 = 'blank', '', NULL), iif(?5 = 'blank', ?6, NULL))";
  static constexpr std::string_view insert_text =
      "INSERT INTO page_texts (page_id, text) VALUES (?1, ?2)";
  static constexpr std::string_view insert_image =
      "INSERT INTO page_images (page_id, media_type, width, height, bytes) "
      "VALUES (?1, ?2, ?3, ?4, ?5)";
  static constexpr std::string_view requeue_in_flight =
      // At start, calls in flight were lost with the process: their pages go back to their
      // lanes, or are cancelled if their job was.
      "UPDATE pages SET state = iif(jobs.cancelled_at IS NULL, 'queued', 'cancelled'), "
      "finished_at = iif(jobs.cancelled_at IS NULL, NULL, ?1) "
      "FROM jobs WHERE pages.state = 'in_flight' AND jobs.id = pages.job_id";
  static constexpr std::string_view queued_pages =
      "SELECT user_id, id, job_id, estimated_tokens, not_before, attempts FROM pages INDEXED BY "
      "pages_queued WHERE state = 'queued' ORDER BY user_id, id";
  static constexpr std::string_view weights = "SELECT id, weight FROM users";
  static constexpr std::string_view dispatched =
      "UPDATE pages SET state = 'in_flight', dispatches = dispatches + 1, dispatched_at = ?2, "
      "not_before = NULL WHERE id = ?1 AND state = 'queued' RETURNING dispatches";
  static constexpr std::string_view insert_spend =
      "INSERT INTO spend (page_id, dispatch, at, tokens) "
      "SELECT id, dispatches, ?2, ?3 FROM pages WHERE id = ?1";
  // The spend of the page's latest call, while that call is in flight.
  static constexpr std::string_view correct_spend =
      // The spend of the call that ends: the page's call ?3 (0: its latest), while in flight.
      "UPDATE spend SET tokens = ?2, ended_at = ?4 WHERE page_id = ?1 AND dispatch = "
      "(SELECT dispatches FROM pages WHERE id = ?1 AND state = 'in_flight' "
      "AND (?3 = 0 OR dispatches = ?3))";
  static constexpr std::string_view completed =
      "UPDATE pages SET state = 'done', output = ?2, input_tokens = ?3, output_tokens = ?4, "
      "finished_at = ?5, error = NULL WHERE id = ?1 AND state = 'in_flight' "
      "AND (?6 = 0 OR dispatches = ?6)";
  static constexpr std::string_view attempt_failed =
      "UPDATE pages SET state = iif(jobs.cancelled_at IS NULL, 'queued', 'cancelled'), "
      "finished_at = iif(jobs.cancelled_at IS NULL, NULL, ?4), attempts = pages.attempts + 1, "
      "error = ?2, not_before = ?3 FROM jobs WHERE pages.id = ?1 AND pages.state = 'in_flight' "
      "AND (?5 = 0 OR pages.dispatches = ?5) AND jobs.id = pages.job_id";
  static constexpr std::string_view requeued =
      "UPDATE pages SET state = iif(jobs.cancelled_at IS NULL, 'queued', 'cancelled'), "
      "finished_at = iif(jobs.cancelled_at IS NULL, NULL, ?2), requeues = pages.requeues + 1 "
      "FROM jobs WHERE pages.id = ?1 AND pages.state = 'in_flight' "
      "AND (?3 = 0 OR pages.dispatches = ?3) AND jobs.id = pages.job_id";
  static constexpr std::string_view failed =
      "UPDATE pages SET state = 'failed', error = ?2, finished_at = ?3 WHERE id = ?1 AND "
      "(state = 'queued' OR (state = 'in_flight' AND (?4 = 0 OR dispatches = ?4)))";
  static constexpr std::string_view mark_job_cancelled =
      "UPDATE jobs SET cancelled_at = coalesce(cancelled_at, ?2) WHERE id = ?1";
  static constexpr std::string_view cancel_job =
      "UPDATE pages SET state = 'cancelled', finished_at = ?2 "
      "WHERE job_id = ?1 AND state = 'queued'";
  static constexpr std::string_view prune_spend = "DELETE FROM spend WHERE at < ?1";
  static constexpr std::string_view results =
      "SELECT seq, state, output, error, input_tokens, output_tokens, attempts, kind FROM pages "
      "WHERE job_id = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3";
  static constexpr std::string_view page_call =
      "SELECT p.kind, t.text, j.max_tokens, i.media_type, i.width, i.height, i.bytes "
      "FROM pages p JOIN jobs j ON j.id = p.job_id LEFT JOIN page_texts t ON t.page_id = p.id "
      "LEFT JOIN page_images i ON i.page_id = p.id WHERE p.id = ?1";
  static constexpr std::string_view recent_spend =
      "SELECT count(*), coalesce(sum(tokens), 0) FROM spend WHERE at > ?1";
  // Calls sent since ?1 that have not ended: their spend rows, which outlive a requeue of
  // their pages (load_lanes, at a start that may then fail), and the longest call that ended
  // since ?1.
  static constexpr std::string_view calls_out =
      "SELECT at FROM spend INDEXED BY spend_by_time WHERE at > ?1 AND ended_at IS NULL";
  static constexpr std::string_view longest_call =
      "SELECT max(ended_at - at) FROM spend WHERE at > ?1 AND ended_at IS NOT NULL";
  // The last ?1 calls that ended with usage, newest first, with their pages' reservations.
  static constexpr std::string_view recent_calls =
      "SELECT s.tokens, p.estimated_tokens, s.ended_at - s.at FROM spend s INDEXED BY "
      "spend_by_time JOIN pages p ON p.id = s.page_id WHERE s.ended_at IS NOT NULL AND "
      "s.tokens > 0 ORDER BY s.at DESC LIMIT ?1";
  // The jobs created after ?1 among the ?2 newest (ids follow creation), oldest first; and
  // when the first job was created.
  static constexpr std::string_view recent_jobs =
      "SELECT id, user_id, page_count, created_at, finished_at FROM jobs WHERE id > (SELECT "
      "max(id) FROM jobs) - ?2 AND created_at > ?1 ORDER BY id";
  // When the first job was created: kept in retention once pruning began, else the first
  // job's (NULL: no job yet).
  static constexpr std::string_view first_job_at =
      "SELECT coalesce((SELECT first_job_at FROM retention WHERE id = 1), "
      "(SELECT created_at FROM jobs WHERE id = (SELECT min(id) FROM jobs)))";
  // Retention: the jobs finished before ?1, the longest finished first, at most ?2 of them,
  // never the newest job, each with its weight in a prune's budget (?3: an image page's).
  static constexpr std::string_view prune_candidates =
      "SELECT id, page_count + (?3 - 1) * image_pages FROM jobs INDEXED BY jobs_finished "
      "WHERE finished_at IS NOT NULL AND finished_at < ?1 AND id < (SELECT max(id) FROM jobs) "
      "ORDER BY finished_at, id LIMIT ?2";
  // What prune_candidates would take with no limit: jobs, and their pages.
  static constexpr std::string_view prunable =
      "SELECT count(*), coalesce(sum(page_count), 0) FROM jobs INDEXED BY jobs_finished "
      "WHERE finished_at IS NOT NULL AND finished_at < ?1 AND id < (SELECT max(id) FROM jobs)";
  // Before the first job can go: when it was created.
  static constexpr std::string_view keep_first_job_at =
      "INSERT INTO retention (id, first_job_at) SELECT 1, created_at FROM jobs "
      "WHERE id = (SELECT min(id) FROM jobs) ON CONFLICT (id) DO NOTHING";
  // ?1: a JSON array of the ids of the jobs to delete; in the order of the foreign keys.
  static constexpr std::string_view prune_job_spend =
      "DELETE FROM spend WHERE page_id IN (SELECT id FROM pages WHERE job_id IN "
      "(SELECT value FROM json_each(?1)))";
  static constexpr std::string_view prune_job_texts =
      "DELETE FROM page_texts WHERE page_id IN (SELECT id FROM pages WHERE job_id IN "
      "(SELECT value FROM json_each(?1)))";
  static constexpr std::string_view prune_job_images =
      "DELETE FROM page_images WHERE page_id IN (SELECT id FROM pages WHERE job_id IN "
      "(SELECT value FROM json_each(?1)))";
  static constexpr std::string_view prune_job_pages =
      "DELETE FROM pages WHERE job_id IN (SELECT value FROM json_each(?1))";
  static constexpr std::string_view prune_jobs =
      "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?1))";
  static constexpr std::string_view job_id_by_public_id =
      "SELECT id FROM jobs WHERE public_id = ?1 AND user_id = ?2";
  // Job views: the columns read_job expects, in its order.
  static constexpr std::string_view job_by_id = "SELECT " FAIRLANE_JOB_VIEW "WHERE j.id = ?1";
  // ?1: a JSON array of job ids.
  static constexpr std::string_view jobs_by_ids =
      "SELECT " FAIRLANE_JOB_VIEW "WHERE j.id IN (SELECT value FROM json_each(?1)) ORDER BY j.id";
  static constexpr std::string_view job_by_public_id =
      "SELECT " FAIRLANE_JOB_VIEW "WHERE j.public_id = ?1 AND j.user_id = ?2";
  static constexpr std::string_view jobs_of_first =
      "SELECT " FAIRLANE_JOB_VIEW "WHERE j.user_id = ?1 ORDER BY j.id DESC LIMIT ?2";
  static constexpr std::string_view jobs_of_after =
      "SELECT " FAIRLANE_JOB_VIEW "WHERE j.user_id = ?1 AND j.id < ?3 ORDER BY j.id DESC LIMIT ?2";
};

#undef FAIRLANE_JOB_VIEW

// Every statement above, for the planner test.
inline constexpr std::array kAllQueries = {Sql::insert_user,       Sql::user_by_key,
                                           Sql::user_by_name,      Sql::all_users,
                                           Sql::in_flight_by_user, Sql::user_by_id,
                                           Sql::set_weight,        Sql::job_by_idempotency_key,
                                           Sql::insert_job,        Sql::insert_page,
                                           Sql::insert_image,      Sql::insert_text,
                                           Sql::requeue_in_flight, Sql::queued_pages,
                                           Sql::weights,           Sql::dispatched,
                                           Sql::insert_spend,      Sql::correct_spend,
                                           Sql::completed,         Sql::attempt_failed,
                                           Sql::requeued,          Sql::failed,
                                           Sql::cancel_job,        Sql::prune_spend,
                                           Sql::results,           Sql::page_call,
                                           Sql::recent_spend,      Sql::job_id_by_public_id,
                                           Sql::job_by_id,         Sql::revise_eta,
                                           Sql::job_by_public_id,  Sql::jobs_of_first,
                                           Sql::jobs_of_after,     Sql::recent_calls,
                                           Sql::recent_jobs,       Sql::first_job_at,
                                           Sql::jobs_by_ids,       Sql::prune_candidates,
                                           Sql::prunable,          Sql::keep_first_job_at,
                                           Sql::prune_job_spend,   Sql::prune_job_texts,
                                           Sql::prune_job_images,  Sql::prune_job_pages,
                                           Sql::prune_jobs};

}  // namespace fairlane::store

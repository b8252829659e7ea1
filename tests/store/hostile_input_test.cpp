// Hostile strings (SQL, quotes, format directives, Unicode) go through the store's bound
// parameters as data: stored and returned byte for byte, never run, and no table is harmed.
// tests/sql_is_bound.sh checks that src/ never builds SQL from strings at all.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fairlane/store/store.hpp"
#include "support/store.hpp"
#include "support/store_home.hpp"

using fairlane::JobRequest;
using fairlane::PageInput;
using fairlane::PageTransition;
using fairlane::StatusCode;
using fairlane::Usage;
using fairlane::testing::apply;

namespace {

const std::vector<std::string> kHostile = {
    "'; DROP TABLE jobs; --",
    "Robert'); DROP TABLE users;--",
    "\" OR 1=1 --",
    "' OR '1'='1",
    "x'); DELETE FROM pages WHERE ('1'='1",
    "?1 ?2 :name @p $q %s %n {} {0}",
    "\\' \\\" \\\\ `backticks` ; ;; /* comment */",
    "line one\r\nline two\ttab",
    "日本語の頁 — ünïcödé ✓ 🚀 \u202eRTL\u202c Ω",
    // PostgreSQL's array syntax, which PgStore sends a batch's texts in.
    "{\"a\",NULL,\\\"} ,}{ NULL, \"{}\"",
    "NULL ",
};

}  // namespace

FAIRLANE_STORE_TEST_CASE(
    "Hostile job names, idempotency keys, page texts and outputs are stored verbatim",
    sqlite_file) {
  auto store = home.open();
  const auto alice = store->add_user("alice").value().user.id;
  const auto bob = store->add_user("bob").value().user.id;
  for (const std::string& text : kHostile) {
    CAPTURE(text);
    JobRequest request{alice, text, {PageInput{text, 10}, PageInput{text + text, 10}}, 100, text};
    auto enqueued = store->enqueue_job(request);
    REQUIRE(enqueued.ok());
    CHECK(enqueued->created);
    CHECK(enqueued->job.name == text);
    // Found again by its idempotency key, and by nobody else's.
    auto again = store->job_by_idempotency_key(alice, text);
    REQUIRE(again.ok());
    CHECK(again->job.id == enqueued->job.id);
    CHECK(again->job.name == text);
    CHECK(store->job_by_idempotency_key(bob, text).status().code() == StatusCode::not_found);
    // The text a call is sent, and the output and error a page keeps.
    const auto first = enqueued->pages[0].page_id;
    const auto second = enqueued->pages[1].page_id;
    CHECK(store->page_call(first)->text == text);
    CHECK(store->page_call(second)->text == text + text);
    apply(*store, {PageTransition::dispatched(first, 10), PageTransition::dispatched(second, 10)});
    apply(*store, {PageTransition::completed(first, text, Usage{1, 1}),
                   PageTransition::failed(second, text)});
    const auto results = store->results(enqueued->job.id).value();
    REQUIRE(results.size() == 2);
    CHECK(results[0].output == text);
    CHECK(results[1].error == text);
    // Looked up as a public id or a user name, it is a value that matches nothing.
    CHECK(store->job_of(text, alice).status().code() == StatusCode::not_found);
    CHECK(store->find_user_by_name(text).status().code() == StatusCode::not_found);
    CHECK(store->find_user_by_key(text).status().code() == StatusCode::not_found);
    CHECK(store->set_weight(text, 5).code() == StatusCode::not_found);
  }
  // Every table is whole: each job is there, in order, and the users kept their weights.
  const auto list = store->jobs_of(alice, 100).value();
  REQUIRE(list.jobs.size() == kHostile.size());
  for (std::size_t i = 0; i < kHostile.size(); ++i) {
    CHECK(list.jobs[kHostile.size() - 1 - i].name == kHostile[i]);
  }
  CHECK(store->find_user_by_name("bob")->weight == 1);
  CHECK(store->users()->size() == 2);
  // And so they are after a reopen, read from the database.
  store.reset();
  store = home.open();
  CHECK(store->jobs_of(alice, 100)->jobs.size() == kHostile.size());
}

FAIRLANE_STORE_TEST_CASE(
    "Hostile user names are refused with the rule, and leave the users as they were",
    sqlite_memory) {
  auto store = home.open();
  REQUIRE(store->add_user("alice").ok());
  for (const std::string& name : kHostile) {
    CAPTURE(name);
    const auto added = store->add_user(name);
    CHECK(added.status().code() == StatusCode::invalid_argument);
    CHECK(added.status().message().find("letters, digits") != std::string::npos);
  }
  const auto users = store->users().value();
  REQUIRE(users.size() == 1);
  CHECK(users[0].name == "alice");
}

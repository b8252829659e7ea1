// The routes of the API, one family to a file (src/service/routes/): functions from a request
// and its caller to a response, over what a RouteContext holds. The Router picks one by path
// and method; the upload use case is apart (uploads.hpp).
//
// Thread safety: the io_context's thread, like the store and the dispatcher.
#pragma once

#include <boost/json/object.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/promise_window.hpp"
#include "fairlane/core/wall_clock.hpp"
#include "fairlane/document/document.hpp"
#include "fairlane/provider/provider.hpp"
#include "fairlane/store/store.hpp"
#include "service/api.hpp"
#include "service/dispatcher.hpp"
#include "service/membership.hpp"
#include "service/metrics.hpp"
#include "service/promises.hpp"
#include "service/stream_slots.hpp"
#include "service/watchers.hpp"

namespace fairlane::service {

class StoreReaders;  // service/store_readers.hpp
class Retention;     // service/retention.hpp

struct RouterConfig {
  std::string admin_key;            // empty: no admin (POST /v1/users, /metrics are refused)
  std::string prompt;               // the instruction sent with every page (for the estimate)
  std::int64_t max_tokens = 1'000;  // output tokens per page when an upload does not say
  std::int64_t max_pages = 10'000;  // pages in one upload
  std::int64_t max_page_bytes =
      std::int64_t{64} * 1024;  // bytes of text in one page (JSON, or a PDF's)
  // Uploads read or waiting to be read at once; more get 503 busy with Retry-After.
  // 0: twice the machine's hardware threads.
  std::size_t max_pending_documents = 0;
  // Of one user's, at most this many at once; more get 503 busy naming theirs. 0: half of
  // max_pending_documents (at least 1).
  std::size_t max_pending_documents_per_user = 0;
  // Bytes of upload bodies on their way at once (a body's Content-Length, or max_body_bytes
  // for a chunked one), counted from their headers until the body is read; more get 503 busy
  // with Retry-After before their body is sent. Of one user's, at most half (and at least
  // one body of max_body_bytes). 0: no cap.
  std::size_t max_receiving_bytes = 0;
  // The largest body the transport takes (--max-body-mb): what a chunked body is counted as.
  std::size_t max_body_bytes = std::size_t{100} * 1024 * 1024;
  // Live-event streams one user may hold open; more get 429 too_many_streams.
  std::size_t max_event_streams_per_user = 16;
  // Bytes of page text (outputs and errors) past which an answer of GET /v1/jobs/{id}/result
  // takes no further page (one always goes): with kResultPagesAtMost, what bounds the answer
  // held in memory however large the job. Its next_from says where to go on.
  std::size_t result_bytes = std::size_t{16} << 20U;
  Dialect dialect = Dialect::openai;  // the provider's, whose rule prices an image
  // This instance's place in a cluster, kept by its Leadership; nullptr on a single node,
  // which /v1/queue shows as its own leader.
  const Membership* membership = nullptr;
  // How long an accepted upload's promise waits for the uploads that come with it
  // (PromiseWindow): its 202 is sent when the window ends. 0: promised and answered at once.
  Clock::duration promise_window = Clock::duration::zero();
  // The windows' clock; nullptr: the steady clock (tests give a FakeClock).
  const Clock* clock = nullptr;
  // The promises' wall clock (Promises); nullptr: the system clock (tests give a
  // FakeWallClock).
  const WallClock* wall_clock = nullptr;
  // Threads with connections of their own for the reads of job views, lists, results and
  // live events (a server database's); nullptr: the routes read the store in place.
  StoreReaders* readers = nullptr;
  // How long a key, once found, is taken as its user's without asking the store again (the
  // user's weight included). 0: every request asks. Keys are never taken back.
  Clock::duration key_memory = Clock::duration::zero();
  // serve --retain's pruning, for what /metrics says it pruned; nullptr: none.
  const Retention* retention = nullptr;
};

// What every route works over. The references outlive the routes' calls.
struct RouteContext {
  Store& store;
  Dispatcher& dispatcher;
  Watchers& watchers;
  const RouterConfig& config;
  RefusalCounts& door_refusals;
  StreamSlots& streams;
  Promises& promises;
  PromiseWindow& windows;
};

// The answer `read` makes from the store: read on a reader and answered on the io thread when
// the service has readers (ApiResponse::read), else here and now. `read` runs on another
// thread: it may touch its Store and what it captured by value, nothing of the context's; the
// function it returns runs on the io thread, and may.
using ReadThen = std::function<ApiResponse()>;
[[nodiscard]] ApiResponse with_store(RouteContext& context, std::function<ReadThen(Store&)> read);
// What a read returns when its answer needs nothing more of the io thread.
[[nodiscard]] ReadThen at_once(ApiResponse response);

// The job object of the API, with its position and ETA now.
[[nodiscard]] boost::json::object job_object(const RouteContext& context, const JobView& job);

// The tokens a page will reserve: ceil(bytes of prompt and text / 4) + max_tokens.
[[nodiscard]] std::int64_t estimate_tokens(const RouteContext& context, std::string_view page_text,
                                           std::int64_t max_tokens);
// The same for a page of any kind: an image's tokens by the dialect's published rule
// (provider/image_tokens.hpp) in place of its text's; nothing for a blank page.
[[nodiscard]] std::int64_t estimate_tokens(const RouteContext& context, const DocumentPage& page,
                                           std::int64_t max_tokens);

namespace routes {

// GET /healthz and /readyz, which need no key (405 for another method; the transport
// routes a HEAD as a GET); nullopt for any other path.
[[nodiscard]] std::optional<ApiResponse> probe(RouteContext& context, std::string_view method,
                                               std::string_view path);

// POST /v1/users (the admin's).
[[nodiscard]] ApiResponse add_user(RouteContext& context, const ApiRequest& request);

// GET /v1/queue: lanes, pages, the rate, the binding limit, the buckets, the pause; for the
// admin also every lane with work, by user.
[[nodiscard]] ApiResponse queue(RouteContext& context, bool admin);
// GET /metrics (the admin's).
[[nodiscard]] ApiResponse metrics(RouteContext& context, UploadGauges uploads);

// GET /v1/jobs: the user's jobs, newest first.
[[nodiscard]] ApiResponse list_jobs(RouteContext& context, const User& user,
                                    const std::optional<std::string>& limit_text,
                                    const std::optional<std::string>& cursor);
// A result is answered a range of pages at a time: at most this many pages (and at most
// RouterConfig::result_bytes of their text), so that the answer held in memory stays bounded
// however large the job. The answer's next_from says where to go on.
inline constexpr std::int64_t kResultPagesAtMost = 1'000;
// The query of GET /v1/jobs/{id}/result, as given: ?from=P (a page number, 1) and ?limit=N
// (1 to kResultPagesAtMost, that).
struct ResultAsked {
  std::optional<std::string> from;
  std::optional<std::string> limit;
};
// GET, DELETE /v1/jobs/{id}, GET /v1/jobs/{id}/events and /result; `tail` is what follows
// the id ("", "events", "result"). nullopt: no such route for this method.
// `head_only`: a HEAD routed as its GET, which opens no event stream.
[[nodiscard]] std::optional<ApiResponse> job(RouteContext& context, const User& user,
                                             std::string_view method, std::string_view public_id,
                                             std::string_view tail, bool head_only = false,
                                             const ResultAsked& asked = {});
// GET /v1/estimate: what the door would say now, always 200 when it could say.
[[nodiscard]] ApiResponse estimate(RouteContext& context, const User& user,
                                   const std::optional<std::string>& pages_text,
                                   const std::optional<std::string>& tokens_text);

}  // namespace routes
}  // namespace fairlane::service

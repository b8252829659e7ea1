// Router: the HTTP API of DESIGN.md section 7, from a parsed request to a response, over the
// store and the dispatcher. No sockets here: the transport (HttpServer) reads a request's
// headers and asks admit(); only then does it read the body (up to its limit) and call
// handle(), and it writes what comes back. Tests call handle() with the whole request.
//
// The routes live in routes/*.cpp, one family each, the upload use case in uploads.cpp, the
// keys in auth.cpp; the router picks by path and method and checks who may call what.
//
// Three answers need the transport's help. An upload's body is read on a worker thread
// (read_upload, for `document`) and answered by finish_upload(). With readers (a server
// database's), an answer that needs the store (a job view, a list, a result, an upload's
// commit) comes back as a StoreRead for a reader, then is made on the io thread. The live events
// (GET /v1/jobs/{id}/events) are a response the transport streams: handle() answers with an
// EventStream, and the transport renders job_event() each time the router's watchers are
// woken (on every committed change and every upload).
//
// Thread safety: the io_context's thread, like the store and the dispatcher.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "fairlane/store/store.hpp"
#include "service/api.hpp"
#include "service/auth.hpp"
#include "service/dispatcher.hpp"
#include "service/metrics.hpp"
#include "service/promises.hpp"
#include "service/routes.hpp"
#include "service/stream_slots.hpp"
#include "service/uploads.hpp"
#include "service/watchers.hpp"

namespace fairlane::service {

// The /ui page: samples/web/index.html, compiled in.
[[nodiscard]] std::string_view ui_page();

// One event of a stream: the job object as JSON, and whether the job has ended (the
// stream's last event).
struct JobEvent {
  std::string data;
  bool ended = false;
};

class Router {
 public:
  // `store` and `dispatcher` must outlive the router. The router takes the dispatcher's
  // on_job_changed (and gives it back when destroyed) to wake its watchers.
  Router(Store& store, Dispatcher& dispatcher, RouterConfig config);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // From a request's headers alone (its body not read): who sent it (with an upload's place
  // among those on their way and its body's bytes, taken now), or the answer to send without
  // reading the body (a probe, 400, 401, 403, 415, a busy door or reader, too many bytes on their
  // way, a retried upload's first job).
  std::variant<Caller, ApiResponse> admit(const ApiRequest& head);

  // The request, body read, from a caller admit() let through. By value: an upload's body
  // (up to the body limit) moves through, it is not copied.
  ApiResponse handle(ApiRequest request, const Caller& caller);
  // admit(), then handle(): for a request read whole.
  ApiResponse handle(ApiRequest request);

  // The answer to an upload once its body was read (read_upload), or failed to be read: the
  // 202, a refusal, or a PromiseHold (RouterConfig::promise_window) while other uploads are
  // on their way. The caller has let go of this one's Caller::on_its_way. With
  // readers, the answer is the commit to make (ApiResponse::read): until it is made, the
  // caller lets no other upload reach finish_upload().
  ApiResponse finish_upload(const Upload& upload, UploadRead read);
  // For an upload (POST /v1/jobs): a token that counts it among the uploads on their way
  // until it goes; nullptr for any other request. admit() takes one for each upload it lets
  // through (in Caller::on_its_way, which the transport lets go of once the body, and a
  // document's pages, have been read). An upload accepted while others are on their way
  // waits for them (PromiseWindow).
  [[nodiscard]] std::shared_ptr<const void> upload_on_its_way(const ApiRequest& head);
  // The 202 of an upload held for its promise window, once the hold's wait has passed.
  ApiResponse close_promise(const PromiseHold& hold);

  // The job of a stream as it stands now; nullopt when it cannot be read (the stream ends).
  [[nodiscard]] std::optional<JobEvent> job_event(const EventStream& stream);
  // The same from the job as read (on a reader, when there are readers), on the io thread.
  [[nodiscard]] std::optional<JobEvent> job_event(const EventStream& stream,
                                                  const Result<JobView>& job);
  // Where reads go off the io thread (RouterConfig::readers); nullptr: read in place.
  [[nodiscard]] StoreReaders* readers() const { return config_.readers; }

  // Who waits for the next change.
  [[nodiscard]] Watchers& watchers() { return watchers_; }

  // Once a second: makes the promises whose windows have closed (should their uploads' answers
  // be late), projects the running jobs' promises again, revises those that can no longer be
  // kept, and wakes their watchers (Promises).
  void tick();
  [[nodiscard]] const Promises& promises() const { return promises_; }
  // Uploads accepted whose promise waits for the uploads that came with them (PromiseWindow).
  [[nodiscard]] std::size_t promise_windows_open() const { return windows_.open(); }
  // A job another instance accepted (or one a new leader restored), whose promise this
  // instance keeps from now on, as if its door had made it.
  void watch(const JobView& job);
  // A watched job's promise made again elsewhere (a follower's promise window closing): this
  // instance keeps the new one, in its order and its watch. A job not watched, or whose
  // promise did not move, is left as it is.
  void promise_moved(const JobView& job);

  // The tokens a page will reserve: ceil(bytes of prompt and text / 4) + max_tokens.
  [[nodiscard]] std::int64_t estimate_tokens(std::string_view page_text,
                                             std::int64_t max_tokens) const;

 private:
  Store& store_;
  Dispatcher& dispatcher_;
  const RouterConfig config_;
  const Authenticator auth_;
  RefusalCounts door_refusals_;
  Watchers watchers_;
  StreamSlots streams_;
  Quota reads_;
  Quota receiving_;     // bytes of upload bodies on their way
  Quota on_their_way_;  // uploads being read, JSON or PDF: no cap, a count
  Promises promises_;
  SteadyClock steady_;
  PromiseWindow windows_;
  RouteContext context_;
};

}  // namespace fairlane::service

#include "service/uploads.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <iostream>

#include "fairlane/core/text.hpp"
#include "fairlane/document/document.hpp"
#include "service/target.hpp"
#include "store/crypto.hpp"

namespace fairlane::service {
namespace {

// An Idempotency-Key's bytes: valid UTF-8, and no control character (C0, DEL).
bool is_key_text(std::string_view key) {
  const bool control = std::any_of(key.begin(), key.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  return !control && is_storable_text(key);
}

namespace json = boost::json;

enum class Format { json_pages, document, unsupported };

Format format_of(std::string_view content_type) {
  const std::string media = media_type(content_type);
  if (media == "application/json") return Format::json_pages;
  if (media == "application/pdf" || media == "multipart/form-data") return Format::document;
  return Format::unsupported;
}

// What an upload's query says, read once: ?max_tokens= and ?name=, as given (none when the
// target is not valid, which the router has refused).
struct UploadQuery {
  std::optional<std::string> max_tokens;
  std::optional<std::string> name;
};

UploadQuery query_of(const ApiRequest& request) {
  const auto target = target_of(request.target);
  if (!target) return {};
  return {target->param("max_tokens"), target->param("name")};
}

// Whether a Content-Encoding says none: "identity" (any case), or nothing, in each of its
// comma-separated codings.
bool is_identity(std::string_view codings) {
  std::size_t start = 0;
  while (start <= codings.size()) {
    const std::size_t comma = std::min(codings.find(',', start), codings.size());
    const std::string_view coding = trim(codings.substr(start, comma - start));
    if (!coding.empty() && !iequals(coding, "identity")) return false;
    start = comma + 1;
  }
  return true;
}

// The upload's ?max_tokens= (checked with its headers), or the service's.
std::int64_t max_tokens_of(const RouteContext& context, const UploadQuery& query) {
  const auto n = query.max_tokens ? whole_number(*query.max_tokens) : std::nullopt;
  return n.value_or(context.config.max_tokens);
}

// What the upload's query says of its job: its max_tokens (or the service's) and its name.
void asked_in_query(const RouteContext& context, const UploadQuery& query, Upload& upload) {
  upload.max_tokens = max_tokens_of(context, query);
  upload.max_tokens_given = query.max_tokens.has_value();
  if (const auto& name = query.name; name && !name->empty()) {
    upload.name = *name;
    upload.name_given = true;
  }
}

ApiResponse accepted(RouteContext& context, const JobView& job) {
  ApiResponse response = json_response(202, job_object(context, job));
  response.headers.emplace_back("Location", "/v1/jobs/" + job.public_id);
  return response;
}

// The leader keeps the promises; a follower's (Membership) hears it adopt the job.
bool keeps_promises(const RouteContext& context) {
  const Membership* m = context.config.membership;
  return m == nullptr || m->leading;
}

// The body's length as its headers announce it: the transport's, or the Content-Length;
// std::nullopt when chunked, or a Content-Length this cannot read.
std::optional<std::uint64_t> announced_length(const ApiRequest& head) {
  if (head.announced_bytes) return head.announced_bytes;
  if (const auto length = head.header("Content-Length")) {
    if (const auto n = whole_number(*length); n && *n >= 0) return static_cast<std::uint64_t>(*n);
  }
  return std::nullopt;
}

// What an upload is from its headers, for its Idempotency-Key: its media type and
// Content-Length ("application/pdf 48213"), or std::nullopt when chunked.
std::optional<std::string> upload_head(const ApiRequest& head) {
  const std::optional<std::uint64_t> bytes = announced_length(head);
  if (!bytes) return std::nullopt;
  return fmt::format("{} {}", media_type(head.header("Content-Type").value_or("")), *bytes);
}

// 422: the Idempotency-Key came before with another upload, which made `earlier`; `differs`
// names a setting the upload asks otherwise, or is empty when its bytes differ.
ApiResponse key_reused(RouteContext& context, std::string_view key, const JobView& earlier,
                       std::string_view differs = {}) {
  json::object refusal = error_json(
      "idempotency_key_reused",
      differs.empty()
          ? fmt::format("the Idempotency-Key \"{}\" came before with another upload, which made "
                        "job {}: an upload sent again under its key must hold the same bytes. "
                        "Send this one with a new key",
                        key, earlier.public_id)
          : fmt::format("the Idempotency-Key \"{}\" came before with an upload that made job {}; "
                        "this one asks {}: an upload sent again under its key must ask the same. "
                        "Send this one with a new key",
                        key, earlier.public_id, differs));
  refusal["error"].as_object()["job"] = job_object(context, earlier);
  return json_response(422, refusal);
}

// For an upload whose Idempotency-Key a job has: what that job's upload was against this one.
struct KeyAnswer {
  std::optional<ApiResponse> answer;  // the first job (202), or the key's reuse (422)
  bool known = false;                 // some job has the key
};

// What the upload asks otherwise than the job its key made, as key_reused names it, or
// empty: its max_tokens and its name, each when its query says it (one left to the service
// is not compared; one the JSON body says is in its bytes, which the digest covers; a form's
// file name is not compared).
std::string asked_otherwise(const Upload& upload, const JobView& earlier) {
  if (upload.max_tokens_given && upload.max_tokens != earlier.max_tokens) {
    return fmt::format("max_tokens {}, where the first asked {}", upload.max_tokens,
                       earlier.max_tokens);
  }
  if (upload.name_given && storable_text(upload.name) != earlier.name) {
    return fmt::format(R"(name "{}", where the first was named "{}")", storable_text(upload.name),
                       earlier.name);
  }
  return {};
}

// The first job of an upload sent again (same Idempotency-Key), or the 422 of the key sent
// with another upload. Once its body is read, its `digest` decides. From its headers alone, a
// PDF (raw or multipart) of the same head (media type and length) as the first is taken for
// it, and answered without its body, which a reader would have to read again; JSON is cheap
// to read, and a nightly report under one key keeps its length from night to night, so it
// is always read. Otherwise nothing is answered yet (`known` says that a job has the key).
// A job stored with no digest (before 2026-12-07) answers every upload under its key, as
// then. Whatever the door would say now: the answer is the first job's, or the refusal.
KeyAnswer uploaded_before(RouteContext& context, const Upload& upload) {
  if (!upload.idempotency_key) return {};
  auto earlier = context.store.job_by_idempotency_key(upload.user, *upload.idempotency_key);
  if (!earlier.ok()) {
    if (earlier.status().code() == StatusCode::not_found) return {};
    return {response_for(answer_for(earlier.status())), false};
  }
  const KeyedJob& keyed = earlier.value();
  if (!keyed.upload_digest) return {accepted(context, keyed.job), true};
  // The same upload: the first job, unless it asks another setting.
  const auto same = [&]() -> KeyAnswer {
    if (const std::string differs = asked_otherwise(upload, keyed.job); !differs.empty()) {
      return {key_reused(context, *upload.idempotency_key, keyed.job, differs), true};
    }
    return {accepted(context, keyed.job), true};
  };
  if (upload.digest) {
    if (upload.digest == keyed.upload_digest) return same();
    return {key_reused(context, *upload.idempotency_key, keyed.job), true};
  }
  const bool document = upload.head && !upload.head->starts_with("application/json ");
  if (document && upload.head == keyed.upload_head) return same();
  return {std::nullopt, true};
}

// 413 for a text page past --max-page-kb, naming it.
std::optional<ApiResponse> page_too_long(const RouterConfig& config,
                                         const std::vector<DocumentPage>& pages) {
  for (std::size_t i = 0; i < pages.size(); ++i) {
    const auto bytes = static_cast<std::int64_t>(pages[i].text.size());
    if (bytes <= config.max_page_bytes) continue;
    json::object refusal = error_json(
        "payload_too_large",
        fmt::format("page {} has {} bytes of text; a page may have at most {} (--max-page-kb): "
                    "split the page",
                    i + 1, bytes, config.max_page_bytes));
    refusal["error"].as_object()["page"] = i + 1;
    refusal["error"].as_object()["bytes"] = bytes;
    refusal["error"].as_object()["max_page_bytes"] = config.max_page_bytes;
    return json_response(413, refusal);
  }
  return std::nullopt;
}

// The pages against the limits, the door, the store, the dispatcher; the answer. Blank pages
// are written done and make no call: the door sees only the pages that will.
// A job just committed joins its lane; then its 202, or, while other uploads that came with
// it are still being read, a PromiseHold (its promise waits for them; the job goes on).
ApiResponse committed(RouteContext& context, const EnqueuedJob& enqueued, std::int64_t weight,
                      double door_eta_s, std::size_t others_reading) {
  if (!enqueued.created) return accepted(context, enqueued.job);
  context.dispatcher.add(enqueued, weight);
  context.watchers.notify();  // the positions and ETAs of the jobs behind it move
  if (others_reading > 0 && context.windows.window() > Clock::duration::zero()) {
    context.windows.accepted(enqueued.job.id, from_seconds(door_eta_s));
    ApiResponse held;
    held.promise_hold = PromiseHold{enqueued.job.id, context.windows.window(), enqueued.job};
    return held;
  }
  context.windows.accepted_at_once();  // the windows still open count it
  if (keeps_promises(context)) context.promises.promised(enqueued.job);
  return accepted(context, enqueued.job);
}

// Whether the job that holds `job`'s Idempotency-Key was made by another upload: both
// digests known, and not the same. (A store that cannot say is taken to hold this upload.)
bool another_upload(Store& store, const JobRequest& job) {
  if (!job.idempotency_key || !job.upload_digest) return false;
  auto keyed = store.job_by_idempotency_key(job.user_id, *job.idempotency_key);
  return keyed.ok() && keyed->upload_digest && keyed->upload_digest != job.upload_digest;
}

// The 400 of a job's name over kMaxJobNameBytes (as stored), if it is.
std::optional<ApiResponse> name_too_long(std::size_t bytes) {
  if (bytes <= kMaxJobNameBytes) return std::nullopt;
  return error_response(400, "invalid_request",
                        fmt::format("a job's name (?name=, the JSON's name or the file's name) is "
                                    "at most {} bytes; this one has {} bytes: shorten it",
                                    kMaxJobNameBytes, bytes));
}

ApiResponse enqueue(RouteContext& context, const Upload& upload, std::vector<DocumentPage> pages,
                    const Quota* on_their_way) {
  const RouterConfig& config = context.config;
  if (pages.empty()) return error_response(400, "invalid_document", "the upload has no pages");
  if (static_cast<std::int64_t>(pages.size()) > config.max_pages) {
    return error_response(413, "payload_too_large",
                          fmt::format("the upload has {} pages; at most {} are taken at once "
                                      "(--max-pages): split it",
                                      pages.size(), config.max_pages));
  }
  if (auto refusal = page_too_long(config, pages)) return std::move(*refusal);
  // The name comes from ?name=, the JSON or the file's name, in whatever bytes the client
  // sent (a Latin-1 file name, a %00): as every store keeps it.
  JobRequest job{upload.user,
                 storable_text(upload.name),
                 {},
                 upload.max_tokens,
                 upload.idempotency_key,
                 std::nullopt,
                 upload.head,
                 upload.digest};
  if (auto refusal = name_too_long(job.name.size())) return std::move(*refusal);
  // The door counts the pages sent, and names one by its number in the upload.
  std::vector<std::int64_t> tokens;
  std::vector<std::int64_t> numbers;
  tokens.reserve(pages.size());
  job.pages.reserve(pages.size());
  for (DocumentPage& page : pages) {
    const std::int64_t estimate = estimate_tokens(context, page, upload.max_tokens);
    if (page.kind != PageKind::blank) {
      tokens.push_back(estimate);
      numbers.push_back(static_cast<std::int64_t>(job.pages.size()) + 1);
    }
    job.pages.push_back(
        PageInput{std::move(page.text), estimate, page.kind, std::move(page.image)});
  }
  if (tokens.empty()) {
    return error_response(400, "invalid_document",
                          "every page of the upload is empty: there is nothing to send");
  }
  DoorDecision decision = context.dispatcher.door().admit(upload.user, tokens);
  if (auto* large = std::get_if<DoorRequestTooLarge>(&decision)) {
    large->page = numbers[static_cast<std::size_t>(large->page - 1)];
  }
  if (auto refusal = answer_for(decision)) {
    ++context.door_refusals[std::string(refusal_reason(decision))];
    return response_for(*refusal);
  }
  const double door_eta_s = std::get<DoorAccepted>(decision).estimate.eta_seconds;
  job.promised_eta_s = door_eta_s;
  // The commit, on a reader's connection when there are readers (the transport lets one
  // upload at a time between its door and its lane, so that the door never misses a job
  // being committed); then the lane, on the io thread, with the uploads on their way then
  // (those that came while it was committed among them).
  return with_store(
      context,
      [&context, job = std::move(job), upload, door_eta_s, on_their_way](Store& store) -> ReadThen {
        auto enqueued = store.enqueue_job(job);
        if (!enqueued.ok()) return at_once(response_for(answer_for(enqueued.status())));
        // The key taken meanwhile (another instance's commit): by this upload,
        // asking the same?
        const bool reused = !enqueued->created && another_upload(store, job);
        std::string differs =
            enqueued->created ? std::string() : asked_otherwise(upload, enqueued->job);
        return
            [&context, enqueued = std::move(enqueued).value(), weight = upload.weight, door_eta_s,
             on_their_way, reused, differs = std::move(differs), key = job.idempotency_key] {
              if (reused || !differs.empty()) {
                return key_reused(context, key.value_or(""), enqueued.job,
                                  reused ? std::string() : differs);
              }
              return committed(context, enqueued, weight, door_eta_s,
                               on_their_way != nullptr ? on_their_way->taken() : 0);
            };
      });
}

}  // namespace

Result<Document> read_document(std::string_view content_type, std::string body,
                               const DocumentReading& reading, ReaderProcesses* processes) {
  if (processes != nullptr && processes->stopping()) {
    return Status(StatusCode::unavailable, "the service is stopping");
  }
  Document document;
  if (media_type(content_type) == "multipart/form-data") {
    auto file = multipart_file(content_type, std::move(body));
    if (!file.ok()) return file.status();
    document.filename = std::move(file->filename);
    body = std::move(file->data);
  }
  document.digest = store::sha256_hex(body);
  const PdfReaderOptions& reader = reading.reader;
  auto pages = reader.command.empty() ? read_pdf(body, reader.reading)
                                      : read_pdf_in_child(body, reader, processes);
  if (!pages.ok()) return pages.status();
  document.pages = std::move(pages).value();
  return document;
}

UploadRead read_upload(DocumentUpload upload, const DocumentReading& reading,
                       ReaderProcesses* processes) {
  if (format_of(upload.content_type) == Format::json_pages) {
    std::optional<std::string> digest = store::sha256_hex(upload.body);
    auto parsed =
        parse_json_upload(upload.body, upload.default_max_tokens, reading.reader.reading.max_pages);
    if (auto* refusal = std::get_if<ApiAnswer>(&parsed)) return std::move(*refusal);
    auto& fields = std::get<JsonUpload>(parsed);
    // A page's text as it was sent; an empty one has nothing to send and is blank.
    std::vector<DocumentPage> pages;
    pages.reserve(fields.pages.size());
    for (std::string& text : fields.pages) {
      const PageKind kind = text.empty() ? PageKind::blank : PageKind::text;
      pages.push_back(DocumentPage{kind, std::move(text), std::nullopt});
    }
    return Document{
        {}, std::move(fields.name), fields.max_tokens, std::move(pages), std::move(digest)};
  }
  return upload_read(
      read_document(upload.content_type, std::move(upload.body), reading, processes));
}

UploadRead upload_read(Result<Document> document) {
  if (document.ok()) return std::move(document).value();
  // Over --max-pages or --max-page-kb: 413 payload_too_large, as for JSON pages.
  if (document.status().code() == StatusCode::invalid_argument) {
    return ApiAnswer{400, error_json("invalid_document", document.status().message()),
                     std::nullopt};
  }
  return answer_for(document.status());
}

std::optional<ApiResponse> check_upload_headers(RouteContext& context, const ApiRequest& head,
                                                const User& user) {
  const std::string content_type = head.header("Content-Type").value_or("");
  if (format_of(content_type) == Format::unsupported) {
    return error_response(415, "unsupported_media_type",
                          "send a PDF as application/pdf (the raw file) or multipart/form-data (a "
                          "part named file), or the pages' text as application/json: "
                          "{\"name\": ..., \"pages\": [\"text\", ...]}");
  }
  // The body is read as the PDF's or the JSON's own bytes: a compressed one is refused
  // before it is received (else a gzipped JSON is "not valid JSON at byte 1").
  if (const auto coding = head.header("Content-Encoding"); coding && !is_identity(*coding)) {
    return error_response(
        415, "unsupported_media_type",
        fmt::format("a body sent with Content-Encoding {} is not taken: send it uncompressed",
                    storable_text(*coding)));
  }
  // A multipart body cannot be read without its boundary: refused before it is received.
  if (media_type(content_type) == "multipart/form-data") {
    if (auto boundary = multipart_boundary(content_type); !boundary.ok()) {
      return error_response(400, "invalid_document", boundary.status().message());
    }
  }
  const UploadQuery query = query_of(head);
  if (const auto& text = query.max_tokens) {
    const auto n = whole_number(*text);
    if (!n || *n < 1 || *n > kMaxTokensCeiling) {
      return response_for(bad_max_tokens(context.config.max_tokens));
    }
  }
  // The key is UTF-8 text without control characters: other bytes would reach the store,
  // whose PostgreSQL text refuses what is not UTF-8 (and a NUL).
  if (const auto key = head.header("Idempotency-Key");
      key && (key->empty() || key->size() > kMaxIdempotencyKeyBytes || !is_key_text(*key))) {
    return error_response(400, "invalid_request",
                          fmt::format("an Idempotency-Key is 1 to {} bytes of UTF-8 text without "
                                      "control characters: send another, such as a UUID",
                                      kMaxIdempotencyKeyBytes));
  }
  if (const auto& name = query.name) {
    if (auto refusal = name_too_long(storable_text(*name).size())) return refusal;
  }
  // An upload sent again gets its first job, with no need of the body when its head is the
  // first's; with another head, its body decides, and the door has nothing to say to it.
  Upload retried{user.id, user.weight, {}, false, 0, head.header("Idempotency-Key")};
  retried.head = upload_head(head);
  asked_in_query(context, query, retried);
  KeyAnswer earlier = uploaded_before(context, retried);
  if (earlier.answer) return std::move(earlier.answer);
  if (earlier.known) return std::nullopt;
  // Refused at once, before any body is read, if even a one-page upload would be.
  const DoorDecision decision = context.dispatcher.door().estimate(
      user.id, 1, estimate_tokens(context, "", max_tokens_of(context, query)));
  if (std::holds_alternative<DoorBusy>(decision) ||
      std::holds_alternative<DoorUserQueueFull>(decision)) {
    ++context.door_refusals[std::string(refusal_reason(decision))];
    return response_for(*answer_for(decision, Refused::any_page));
  }
  return std::nullopt;
}

namespace {

// The 503 for a document that finds every reading slot taken, or its user's share.
ApiResponse readers_busy(const Quota& slots, UserId user) {
  ApiResponse busy = error_response(
      503, "busy",
      slots.taken() < slots.max()
          ? fmt::format("fairlane is reading or queueing {} of your documents already, as many "
                        "of one user's as it takes at once: retry in 5 s, once one is queued",
                        slots.taken_by(user))
          : fmt::format("fairlane is reading or queueing {} other documents already: retry in 5 s",
                        slots.taken()));
  busy.headers.emplace_back("Retry-After", "5");
  return busy;
}

}  // namespace

std::optional<ApiResponse> check_reading_slot(const Quota& slots, const ApiRequest& head,
                                              const User& user) {
  if (format_of(head.header("Content-Type").value_or("")) != Format::document) return std::nullopt;
  if (slots.available(user.id)) return std::nullopt;
  return readers_busy(slots, user.id);
}

std::variant<std::shared_ptr<const void>, ApiResponse> take_body_bytes(Quota& bytes,
                                                                       const ApiRequest& head,
                                                                       const User& user,
                                                                       std::size_t max_body_bytes) {
  // Chunked, or a Content-Length this cannot read: as large as a body may grow.
  std::uint64_t announced = max_body_bytes;
  if (const auto length = announced_length(head)) {
    announced = *length;
  } else if (!head.header("Content-Length") && !head.header("Transfer-Encoding")) {
    announced = 0;
  }
  // (The transport refuses a body over max_body_bytes before this.)
  const auto amount = static_cast<std::size_t>(std::min<std::uint64_t>(announced, max_body_bytes));
  if (amount == 0) return std::shared_ptr<const void>{};
  if (auto taken = bytes.take(user.id, amount)) return taken;
  constexpr double kMb = 1024.0 * 1024.0;
  const bool share = bytes.taken_by(user.id) + amount > bytes.per_user();
  ApiResponse busy = error_response(
      503, "busy",
      share ? fmt::format("fairlane is receiving or reading {:.1f} MB of your uploads already, "
                          "and holds at most {:.1f} MB of one user's at once (its share of "
                          "--max-receiving-mb): retry in 5 s, once one is read",
                          static_cast<double>(bytes.taken_by(user.id)) / kMb,
                          static_cast<double>(bytes.per_user()) / kMb)
            : fmt::format("fairlane is receiving or reading {:.1f} MB of uploads already, and "
                          "holds at most {:.1f} MB at once (--max-receiving-mb): retry in 5 s",
                          static_cast<double>(bytes.taken()) / kMb,
                          static_cast<double>(bytes.max()) / kMb));
  busy.headers.emplace_back("Retry-After", "5");
  return busy;
}

ApiResponse begin_upload(RouteContext& context, Quota& slots, ApiRequest request,
                         const User& user) {
  const std::string type = request.header("Content-Type").value_or("");
  const bool json_pages = format_of(type) == Format::json_pages;
  Upload upload{user.id, user.weight, json_pages ? "pages.json" : "document.pdf",
                false,   0,           request.header("Idempotency-Key")};
  upload.head = upload_head(request);
  asked_in_query(context, query_of(request), upload);
  if (!json_pages && request.body.empty()) {
    return error_response(400, "invalid_document", "the body is empty: send the PDF's bytes");
  }
  // A document holds a reader process and its body until read: those are capped. JSON pages
  // take a worker only for their parse, and hold no more than any body does. (Its headers
  // found a slot free; another upload may have taken it while this body came.)
  std::shared_ptr<const void> slot;
  if (!json_pages) slot = slots.take(user.id);
  if (!json_pages && !slot) return readers_busy(slots, user.id);
  ApiResponse read;
  read.document = DocumentUpload{std::move(upload), type, std::move(request.body),
                                 context.config.max_tokens, std::move(slot)};
  return read;
}

ApiResponse finish_upload(RouteContext& context, const Upload& upload, UploadRead read,
                          const Quota* on_their_way) {
  // The same upload may have been sent again and committed while this one was being read;
  // or this is an upload sent again under its key, whose head said nothing (see
  // uploaded_before), or another upload under the same key.
  Upload named = upload;
  if (auto* document = std::get_if<Document>(&read)) {
    named.digest = document->digest;
    // A JSON body's name wins (an empty one is none, as an empty ?name= is); a multipart
    // part's file name only when ?name= said none. The JSON's bytes, in the digest, hold its
    // name; a part's file name is not compared (the file's bytes are): the same file sent
    // raw (no file name) or from a form is the same upload.
    if (!named.name_given && !document->filename.empty()) named.name = document->filename;
    if (document->name && !document->name->empty()) {
      named.name = std::move(*document->name);
      named.name_given = false;
    }
    if (document->max_tokens) {
      named.max_tokens = *document->max_tokens;
      named.max_tokens_given = false;
    }
  }
  if (KeyAnswer earlier = uploaded_before(context, named); earlier.answer) {
    return std::move(*earlier.answer);
  }
  if (auto* refusal = std::get_if<ApiAnswer>(&read)) return response_for(*refusal);
  return enqueue(context, named, std::move(std::get<Document>(read).pages), on_their_way);
}

void close_promise_windows(RouteContext& context) {
  PromiseWindow& windows = context.windows;
  while (const auto closed = windows.take_closed()) {
    auto job = context.store.job(closed->job);
    if (!job.ok()) {
      std::cerr << fmt::format("fairlane: the promise of job {} could not be made: {}\n",
                               closed->job, job.status().message());
      continue;
    }
    std::optional<Clock::duration> eta_now;
    // A promise made again, by the door's rule.
    if (const auto estimate =
            context.dispatcher.estimator().job(job->user_id, closed->job, Refunds::when_back)) {
      eta_now = from_seconds(estimate->eta_seconds);
    }
    const Clock::time_point now = windows.clock().now();
    const Clock::time_point promised = PromiseWindow::promise(*closed, now, eta_now);
    // Said in the store's time: the door's promise, as stored with the job, moved on by as
    // much as the promise made now is later than it.
    if (promised > closed->door_promise && job->promised_eta_at) {
      const WallTime at = *job->promised_eta_at + std::chrono::duration_cast<WallTime::duration>(
                                                      promised - closed->door_promise);
      if (const Status recorded = context.store.set_promise(closed->job, at); !recorded.ok()) {
        // The door's promise, written with the job, stands.
        std::cerr << fmt::format("fairlane: the promise of job {} could not be recorded: {}\n",
                                 closed->job, recorded.message());
      } else {
        job->promised_eta_at = at;
        context.dispatcher.promise(job.value());
      }
    }
    if (keeps_promises(context)) context.promises.promised(job.value());
  }
}

ApiResponse close_promise(RouteContext& context, const PromiseHold& hold) {
  close_promise_windows(context);
  auto view = context.store.job(hold.job);
  if (view.ok()) return accepted(context, view.value());
  // Committed all the same: a 5xx would have its client send it again, and make it twice
  // unless it came with an Idempotency-Key. Its 202 says the job as committed, with the
  // door's promise (a promise made again, if one was, is in the job view).
  std::cerr << fmt::format(
      "fairlane: job {} could not be read again for its 202, which says it "
      "as committed: {}\n",
      hold.job, view.status().message());
  return accepted(context, hold.committed);
}

}  // namespace fairlane::service

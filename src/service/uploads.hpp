// The upload use case, POST /v1/jobs, in three steps:
//
//   check_upload_headers()  before the body is read: the media type, the Idempotency-Key, and
//                           whether the door would take even one page (so a busy service reads
//                           no body);
//   take_body_bytes()       then its body's bytes among those on their way (Quota caps
//                           them), held by the transport until the body is read;
//   check_reading_slot()    and, for a PDF, whether a reading slot is free now;
//   begin_upload()          once it is read: the name and max_tokens, a retried upload's first
//                           job; then the body goes to a worker thread, in its reading slot
//                           (Quota caps them);
//   read_upload()           on the worker: a multipart part, a PDF's pages (poppler, in the
//                           reader's child), or the pages of a JSON body;
//   finish_upload()         back on the io thread: the limits on pages, the door for the whole
//                           job, the commit (on a reader, with readers: ApiResponse::read),
//                           the dispatcher.
//
// Thread safety: read_upload() and read_document() on any thread; the rest on the io thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fairlane/core/result.hpp"
#include "fairlane/document/document.hpp"
#include "fairlane/document/pdf_reader.hpp"
#include "service/api.hpp"
#include "service/quota.hpp"
#include "service/routes.hpp"

namespace fairlane::service {

// What an upload's body held: the multipart part's file name (empty for a raw PDF), the JSON's
// own name and max_tokens, the text of each page, and the SHA-256 (hex) of what was read: the
// PDF's bytes (raw, or the multipart part's) or the JSON body; std::nullopt only if OpenSSL
// failed.
struct Document {
  std::string filename;
  std::optional<std::string> name;
  std::optional<std::int64_t> max_tokens;
  std::vector<DocumentPage> pages;
  std::optional<std::string> digest = std::nullopt;
};

// How uploaded PDFs are read.
struct DocumentReading {
  // The child process that reads them (`fairlane read-pdf`, under limits of CPU, memory and
  // time); with no command, they are read in this process (tests that have no binary).
  // Its max_pages (more: refused before any text is read) and max_page_bytes hold for a PDF
  // read in this process too.
  PdfReaderOptions reader;
};

// Reads an uploaded document: the multipart part, then the PDF's pages (poppler, in the
// reader's child process when there is one, registered with `processes`). Safe on any
// thread; invalid_argument with the sentence for the client when it cannot be read.
[[nodiscard]] Result<Document> read_document(std::string_view content_type, std::string body,
                                             const DocumentReading& reading = {},
                                             ReaderProcesses* processes = nullptr);

// What a worker made of an upload's body: its pages, or the answer that refuses it.
using UploadRead = std::variant<Document, ApiAnswer>;

// A document read, or the answer to its failure (400 invalid_document for invalid_argument).
[[nodiscard]] UploadRead upload_read(Result<Document> document);

// Reads an upload's body off the io thread: JSON pages, or a document (read_document, whose
// failures become 400 invalid_document).
[[nodiscard]] UploadRead read_upload(DocumentUpload upload, const DocumentReading& reading = {},
                                     ReaderProcesses* processes = nullptr);

// The checks of POST /v1/jobs that need only its headers, or nullopt when it may be read.
[[nodiscard]] std::optional<ApiResponse> check_upload_headers(RouteContext& context,
                                                              const ApiRequest& head,
                                                              const User& user);

// For a document upload's headers: the 503 when its user's share of the reading slots, or
// every slot, is taken now, so that no body is received that could not be read. Nothing is
// taken: a body that trickles in holds no reader (begin_upload takes the slot).
[[nodiscard]] std::optional<ApiResponse> check_reading_slot(const Quota& slots,
                                                            const ApiRequest& head,
                                                            const User& user);

// An upload's bytes among those on their way, taken from its headers: its Content-Length,
// or `max_body_bytes` when chunked (nullptr without a body); or the 503 when the user's share
// or the whole would pass the cap (--max-receiving-mb).
[[nodiscard]] std::variant<std::shared_ptr<const void>, ApiResponse> take_body_bytes(
    Quota& bytes, const ApiRequest& head, const User& user, std::size_t max_body_bytes);

// POST /v1/jobs once its body is read: a response with `document` set (to be read by
// read_upload on a worker, in `slot`, a document's, taken now), or the answer now.
[[nodiscard]] ApiResponse begin_upload(RouteContext& context, Quota& slots, ApiRequest request,
                                       const User& user);

// The answer to an upload once its body was read: 202 with the job, or the refusal. With a
// promise window (RouterConfig::promise_window) and uploads still on their way when its
// commit is answered (`on_their_way`, counted then, without this one: they come with it), an
// accepted upload's answer is a PromiseHold instead: the job is committed and in its lane,
// and its 202 waits for close_promise(). Alone, it is answered at once: its promise has
// nothing to wait for. With readers (RouterConfig::readers) the answer is the commit to make
// on a reader, and the caller must not let another upload pass the door (finish_upload)
// until that commit's answer has been made on the io thread.
[[nodiscard]] ApiResponse finish_upload(RouteContext& context, const Upload& upload,
                                        UploadRead read, const Quota* on_their_way = nullptr);

// Makes the promises whose windows have closed (PromiseWindow): the door's stands when no
// other upload was accepted in a job's window; when one was, the promise is made again
// from the lanes as they are now (never earlier), recorded in the store and given to the
// dispatcher's order. Either way the job's promise is watched from now on (Promises).
void close_promise_windows(RouteContext& context);
// After a PromiseHold's wait: the windows closed by now, then the job's 202, as it stands, or
// as committed if it cannot be read again (it was committed: a 5xx would have it sent again).
[[nodiscard]] ApiResponse close_promise(RouteContext& context, const PromiseHold& hold);

}  // namespace fairlane::service

#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "fairlane/document/document.hpp"

using fairlane::multipart_file;
using fairlane::StatusCode;

namespace {

const std::string kType = "multipart/form-data; boundary=XyZ123";

// A body as curl -F sends it: a text field, then the file, CRLF line ends.
std::string curl_body(const std::string& data) {
  return "--XyZ123\r\n"
         "Content-Disposition: form-data; name=\"title\"\r\n"
         "\r\n"
         "My book\r\n"
         "--XyZ123\r\n"
         "Content-Disposition: form-data; name=\"file\"; filename=\"book.pdf\"\r\n"
         "Content-Type: application/pdf\r\n"
         "\r\n" +
         data +
         "\r\n"
         "--XyZ123--\r\n";
}

std::string refusal(std::string_view content_type, std::string body) {
  const auto file = multipart_file(content_type, std::move(body));
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().code() == StatusCode::invalid_argument);
  return file.status().message();
}

}  // namespace

TEST_CASE("multipart_file: the file part of a curl -F body, with its filename and type") {
  const auto file = multipart_file(kType, curl_body("%PDF-1.4 pretend"));
  REQUIRE(file.ok());
  CHECK(file->filename == "book.pdf");
  CHECK(file->content_type == "application/pdf");
  CHECK(file->data == "%PDF-1.4 pretend");
}

TEST_CASE("multipart_file: a quoted boundary, and parameter names in any case") {
  const std::string body =
      "--a b:c\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nDATA\r\n--a b:c--\r\n";
  const auto file = multipart_file("Multipart/Form-Data; charset=utf-8; BOUNDARY=\"a b:c\"", body);
  REQUIRE(file.ok());
  CHECK(file->data == "DATA");
  CHECK(file->filename.empty());
  CHECK(file->content_type.empty());
}

TEST_CASE("multipart_file: an unquoted boundary with blanks around the parameters") {
  const auto file = multipart_file("multipart/form-data ;  boundary=XyZ123  ", curl_body("x"));
  REQUIRE(file.ok());
  CHECK(file->data == "x");
}

TEST_CASE("multipart_file: bodies with bare LF line ends") {
  const std::string body =
      "--XyZ123\n"
      "content-disposition: form-data; name=\"file\"; filename=\"notes.pdf\"\n"
      "\n"
      "line one\r\nline two\n"
      "--XyZ123--\n";
  const auto file = multipart_file(kType, body);
  REQUIRE(file.ok());
  CHECK(file->filename == "notes.pdf");
  CHECK(file->data == "line one\r\nline two");
}

TEST_CASE("multipart_file: binary data with CR, LF, NUL and dashes comes back byte for byte") {
  std::string data = "\r\n--\r\n--XyZ12\r\n--XyZ123x\n--XyZ123\r";
  data += std::string("\0\xff\r\r\n\n-", 8);
  for (int byte = 0; byte < 256; ++byte) data += static_cast<char>(byte);
  data += "\r\n";  // the file's own last line end, before the delimiter's
  const auto file = multipart_file(kType, curl_body(data));
  REQUIRE(file.ok());
  CHECK(file->data.size() == data.size());
  CHECK(file->data == data);
}

TEST_CASE("multipart_file: an empty file part gives empty data") {
  const auto file = multipart_file(kType, curl_body(""));
  REQUIRE(file.ok());
  CHECK(file->data.empty());
  CHECK(file->filename == "book.pdf");
}

TEST_CASE("multipart_file: the preamble, the epilogue and other parts are skipped") {
  const std::string body =
      "This is a preamble.\r\n"
      "--XyZ123\r\n"
      "Content-Disposition: form-data; name=\"files\"; filename=\"not-me.pdf\"\r\n\r\n"
      "wrong\r\n"
      "--XyZ123 \t\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"me.pdf\"\r\n\r\n"
      "right\r\n"
      "--XyZ123--\r\n"
      "This is an epilogue.\r\n";
  const auto file = multipart_file(kType, body);
  REQUIRE(file.ok());
  CHECK(file->filename == "me.pdf");
  CHECK(file->data == "right");
}

TEST_CASE("multipart_file: a second file part is refused, naming one PDF per upload") {
  // curl -F file=@a.pdf -F file=@b.pdf, or <input type=file multiple> with two files chosen.
  const std::string body =
      "--XyZ123\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\n\r\n"
      "%PDF-1.4 a\r\n"
      "--XyZ123\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"b.pdf\"\r\n\r\n"
      "%PDF-1.4 b\r\n"
      "--XyZ123--\r\n";
  CHECK(refusal(kType, body) ==
        "the multipart upload has more than one part named \"file\": a job is one PDF; send "
        "each PDF as its own upload (-F file=@book.pdf)");
}

TEST_CASE("multipart_file: an empty file input before the file is skipped") {
  // A form with two file inputs named file, the first left empty: browsers send it as a part
  // with filename="" and no bytes.
  const std::string body =
      "--XyZ123\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\n"
      "\r\n"
      "--XyZ123\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"book.pdf\"\r\n\r\n"
      "%PDF-1.4 the book\r\n"
      "--XyZ123\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"\"\r\n\r\n"
      "\r\n"
      "--XyZ123--\r\n";
  const auto file = multipart_file(kType, body);
  REQUIRE(file.ok());
  CHECK(file->filename == "book.pdf");
  CHECK(file->data == "%PDF-1.4 the book");
}

TEST_CASE("multipart_file: only an empty file input gives its empty data") {
  // What the upload then refuses as an empty file, not as a body without a file part.
  const std::string body =
      "--XyZ123\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"\"\r\n\r\n"
      "\r\n"
      "--XyZ123--\r\n";
  const auto file = multipart_file(kType, body);
  REQUIRE(file.ok());
  CHECK(file->data.empty());
  CHECK(file->filename.empty());
}

TEST_CASE("multipart_file: directories in the filename are dropped, escaped quotes are kept") {
  const std::string body =
      "--XyZ123\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"C:\\Users\\me\\my \\\"best\\\" "
      "book.pdf\"\r\n\r\n"
      "x\r\n"
      "--XyZ123--\r\n";
  const auto file = multipart_file(kType, body);
  REQUIRE(file.ok());
  CHECK(file->filename == "my \"best\" book.pdf");
}

TEST_CASE("multipart_file: another field name can be asked for") {
  const auto file = multipart_file(kType, curl_body("pdf"), "title");
  REQUIRE(file.ok());
  CHECK(file->data == "My book");
}

TEST_CASE("multipart_file: the file's bytes stay in the body's buffer (no copy)") {
  std::string body = curl_body(std::string(1 << 20, 'p'));
  const char* buffer = body.data();
  const auto file = multipart_file(kType, std::move(body));
  REQUIRE(file.ok());
  CHECK(file->data.size() == std::size_t{1} << 20);
  CHECK(file->data.data() == buffer);
}

TEST_CASE("multipart_file: a body without a part named file is refused with the remedy") {
  const std::string body =
      "--XyZ123\r\nContent-Disposition: form-data; name=\"upload\"; filename=\"book.pdf\"\r\n"
      "\r\nx\r\n--XyZ123--\r\n";
  CHECK(refusal(kType, body) ==
        "the multipart upload has no part named \"file\": send the PDF as -F file=@book.pdf");
  CHECK(refusal(kType, "--XyZ123--\r\n") ==
        "the multipart upload has no part named \"file\": send the PDF as -F file=@book.pdf");
}

TEST_CASE("multipart_file: a body without its closing boundary is refused as cut short") {
  const std::string whole = curl_body("%PDF-1.4 and more");
  const std::string cut_short =
      "the multipart body has no closing boundary: the upload was cut short; send it again";
  CHECK(refusal(kType, whole.substr(0, whole.size() - 14)) == cut_short);
  CHECK(refusal(kType, whole.substr(0, whole.find("--XyZ123--"))) == cut_short);
  CHECK(refusal(kType, whole.substr(0, whole.find("--XyZ123--") + 8)) == cut_short);
}

TEST_CASE("multipart_file: a body that is not multipart is refused as malformed") {
  CHECK(refusal(kType, "%PDF-1.4 sent raw") ==
        "the multipart body is malformed (its boundary \"XyZ123\" is not in it): send the PDF "
        "again as -F file=@book.pdf");
  CHECK(refusal(kType, "--XyZ123\r\nContent-Disposition: form-data; name=\"file\"") ==
        "the multipart body is malformed (a part's headers do not end with a blank line): send "
        "the PDF again as -F file=@book.pdf");
}

TEST_CASE("multipart_file: a Content-Type without a boundary, or not multipart, is refused") {
  CHECK(refusal("multipart/form-data", curl_body("x")) ==
        "the upload's Content-Type has no boundary parameter: send the PDF as -F file=@book.pdf, "
        "which sets it");
  CHECK(refusal("multipart/form-data; boundary=\"\"", curl_body("x")) ==
        "the upload's Content-Type has no boundary parameter: send the PDF as -F file=@book.pdf, "
        "which sets it");
  CHECK(refusal("application/pdf", "%PDF-1.4") ==
        "the upload is not multipart/form-data (its Content-Type is \"application/pdf\"): send "
        "the PDF as -F file=@book.pdf");
}

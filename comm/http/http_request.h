// HTTP/1.x request heads and responses for the scheduler's live view
// (comm/http/http_server.h). Pure functions, no I/O, so that the parser can be
// tested and fuzzed on its own.
//
// The parser is strict on purpose: it accepts what curl, browsers and
// Prometheus send (request line, CRLF line ends, token header names) and
// refuses anything else, so that nothing ambiguous reaches the handler.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pstrain {

struct HttpRequest {
  std::string method;   // "GET", "POST", ...: upper-case letters only
  std::string target;   // origin form: starts with '/'
  std::string version;  // "HTTP/1.0" or "HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  // The path part of the target (before any '?').
  std::string_view path() const;
};

struct HttpParse {
  enum class State { kIncomplete, kComplete, kBad, kTooLarge };
  State state = State::kIncomplete;
  HttpRequest request;    // kComplete only
  std::string error;      // kBad / kTooLarge: what was wrong, one line
  size_t head_bytes = 0;  // kComplete: bytes up to and including the blank line
};

// Limits: a head (request line and headers) over `max_head` bytes is
// kTooLarge; so is a head with more than kMaxHeaders headers.
constexpr size_t kHttpMaxHead = 8192;
constexpr size_t kHttpMaxHeaders = 64;

// Parses the head at the start of `data` (the bytes read so far). A request
// line that is already complete is judged at once, so a bad one is refused
// without waiting for the rest.
HttpParse ParseHttpRequest(std::string_view data, size_t max_head = kHttpMaxHead);

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones, e.g. Allow
};

// A plain-text response `status` with `message` as its body.
HttpResponse HttpError(int status, std::string message);
// The reason phrase of `status` ("Not Found").
const char* HttpReason(int status);
// The bytes on the wire: status line, headers (Content-Length, Connection:
// close) and, unless `head_only` (a HEAD request), the body.
std::string FormatHttpResponse(const HttpResponse& response, bool head_only);

}  // namespace pstrain

// The scheduler's live view parses what anyone who reaches its port sends
// (comm/http/http_request.h). Input: byte 0 picks the head limit (the default, or
// a small one so that the limits are reached); the rest is the bytes read.
// Beyond the sanitizers: a complete request holds only what the parser
// promises (upper-case method, origin-form target of visible ASCII, HTTP/1.0
// or 1.1, at most kHttpMaxHeaders lower-case token names, values without
// controls or outer blanks, no body) and ends with its blank line within the
// limit; an error is one non-empty line; and a verdict on the first k bytes
// (complete, bad, too large) is never undone by more bytes, as the server
// judges a request on what has arrived so far.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "comm/http/http_request.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using pstrain::HttpParse;
using pstrain::HttpRequest;
using State = HttpParse::State;

bool IsToken(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

void CheckRequest(const HttpRequest& r) {
  if (r.method.empty() || r.method.size() > 16) pstrain::fuzz::Fail("method length", r.method);
  for (char c : r.method)
    if (c < 'A' || c > 'Z') pstrain::fuzz::Fail("method not upper-case", r.method);
  if (r.target.empty() || r.target[0] != '/') pstrain::fuzz::Fail("target not origin form");
  for (char c : r.target)
    if (c <= 0x20 || c >= 0x7f) pstrain::fuzz::Fail("target byte not visible ASCII");
  if (r.path().empty() || r.path()[0] != '/') pstrain::fuzz::Fail("path not from the target");
  if (r.version != "HTTP/1.0" && r.version != "HTTP/1.1") pstrain::fuzz::Fail("version");
  if (r.headers.size() > pstrain::kHttpMaxHeaders) pstrain::fuzz::Fail("too many headers");
  for (const auto& [name, value] : r.headers) {
    if (name.empty()) pstrain::fuzz::Fail("empty header name");
    for (char c : name)
      if (!IsToken(c)) pstrain::fuzz::Fail("header name byte", name);
    for (char c : value)
      if (c != '\t' && (c < 0x20 || c >= 0x7f)) pstrain::fuzz::Fail("header value byte", name);
    if (!value.empty() && (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' ||
                           value.back() == '\t'))
      pstrain::fuzz::Fail("header value not trimmed", name);
    if (name == "transfer-encoding" || (name == "content-length" && value != "0"))
      pstrain::fuzz::Fail("a request with a body was accepted");
  }
}

void CheckParse(const HttpParse& p, std::string_view data, size_t max_head) {
  switch (p.state) {
    case State::kComplete:
      if (p.head_bytes < 4 || p.head_bytes > data.size() || p.head_bytes > max_head)
        pstrain::fuzz::Fail("head_bytes out of range", std::to_string(p.head_bytes));
      if (data.substr(p.head_bytes - 4, 4) != "\r\n\r\n")
        pstrain::fuzz::Fail("the head does not end with its blank line");
      if (!p.error.empty()) pstrain::fuzz::Fail("a complete request with an error");
      CheckRequest(p.request);
      break;
    case State::kBad:
    case State::kTooLarge:
      if (p.error.empty() || p.error.find('\n') != std::string::npos)
        pstrain::fuzz::Fail("an error that is not one line", p.error);
      break;
    case State::kIncomplete:
      if (data.size() > max_head) pstrain::fuzz::Fail("incomplete past the head limit");
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const size_t max_head = (bytes[0] & 1) ? pstrain::kHttpMaxHead : 64 + bytes[0];
  const std::string_view data(reinterpret_cast<const char*>(bytes) + 1, size - 1);
  const HttpParse whole = pstrain::ParseHttpRequest(data, max_head);
  CheckParse(whole, data, max_head);

  // What arrives in two reads: the verdict on the first part stands.
  const size_t cut = (bytes[0] * 131u) % (data.size() + 1);
  const HttpParse early = pstrain::ParseHttpRequest(data.substr(0, cut), max_head);
  CheckParse(early, data.substr(0, cut), max_head);
  if (early.state != State::kIncomplete && whole.state == State::kIncomplete)
    pstrain::fuzz::Fail("more bytes undid a verdict");
  if (early.state == State::kComplete &&
      (whole.state != State::kComplete || whole.head_bytes != early.head_bytes ||
       whole.request.target != early.request.target ||
       whole.request.headers != early.request.headers))
    pstrain::fuzz::Fail("more bytes changed a complete request");
  if (whole.state == State::kComplete && whole.head_bytes > 0) {
    const HttpParse short_by_one =
        pstrain::ParseHttpRequest(data.substr(0, whole.head_bytes - 1), max_head);
    if (short_by_one.state != State::kIncomplete)
      pstrain::fuzz::Fail("a complete head less its last byte was judged");
  }

  // The response echoes the target: its Content-Length is the body's.
  if (whole.state == State::kComplete) {
    pstrain::HttpResponse response;
    response.body = whole.request.target;
    const bool head_only = whole.request.method == "HEAD";
    const std::string wire = pstrain::FormatHttpResponse(response, head_only);
    const std::string length = "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
    const size_t end = wire.find("\r\n\r\n");
    if (wire.find(length) == std::string::npos || end == std::string::npos ||
        wire.size() - end - 4 != (head_only ? 0 : response.body.size()))
      pstrain::fuzz::Fail("response length");
  }
  return 0;
}

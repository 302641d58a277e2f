#include "comm/http/http_request.h"

#include <fmt/format.h>

namespace pstrain {
namespace {

constexpr size_t kMaxMethod = 16;

// RFC 9110 tchar.
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
// Visible ASCII, as a target may hold (no spaces, no controls).
bool IsTargetChar(char c) { return c > 0x20 && c < 0x7f; }
// A header value: visible ASCII, space and tab (no controls, no obs-text).
bool IsValueChar(char c) { return c == '\t' || (c >= 0x20 && c < 0x7f); }

HttpParse Fail(HttpParse::State state, std::string error) {
  HttpParse p;
  p.state = state;
  p.error = std::move(error);
  return p;
}
HttpParse Bad(std::string error) { return Fail(HttpParse::State::kBad, std::move(error)); }

bool ParseRequestLine(std::string_view line, HttpRequest* req, std::string* error) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    *error = "the request line is not METHOD TARGET VERSION";
    return false;
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || method.size() > kMaxMethod) {
    *error = "the method is empty or too long";
    return false;
  }
  for (char c : method)
    if (c < 'A' || c > 'Z') {
      *error = "the method is not upper-case letters";
      return false;
    }
  if (target.empty() || target[0] != '/') {
    *error = "the target does not start with '/'";
    return false;
  }
  for (char c : target)
    if (!IsTargetChar(c)) {
      *error = "the target holds a control or non-ASCII byte";
      return false;
    }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    *error = "the version is not HTTP/1.0 or HTTP/1.1";
    return false;
  }
  req->method = std::string(method);
  req->target = std::string(target);
  req->version = std::string(version);
  return true;
}

bool ParseHeader(std::string_view line, HttpRequest* req, std::string* error) {
  const size_t colon = line.find(':');
  if (colon == 0 || colon == std::string_view::npos) {
    // A line starting with a space is an obsolete folded continuation.
    *error = "a header line has no name or no ':'";
    return false;
  }
  std::string name;
  for (char c : line.substr(0, colon)) {
    if (!IsTokenChar(c)) {
      *error = "a header name holds a byte a name may not";
      return false;
    }
    name += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  std::string_view value = line.substr(colon + 1);
  for (char c : value)
    if (!IsValueChar(c)) {
      *error = fmt::format("header '{}' holds a control or non-ASCII byte", name);
      return false;
    }
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  req->headers.emplace_back(std::move(name), std::string(value));
  return true;
}

}  // namespace

std::string_view HttpRequest::path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

HttpParse ParseHttpRequest(std::string_view data, size_t max_head) {
  HttpParse out;
  size_t pos = 0;
  bool first = true;
  while (true) {
    const size_t eol = data.find("\r\n", pos);
    if (eol == std::string_view::npos) {
      // A bare LF or CR is not a line end here: refuse it rather than wait.
      std::string_view rest = data.substr(pos);
      const size_t stray = rest.find_first_of(std::string_view("\n\0", 2));
      if (stray != std::string_view::npos ||
          (rest.find('\r') != std::string_view::npos && rest.find('\r') + 1 < rest.size()))
        return Bad("a line ends without CRLF or holds a NUL byte");
      if (data.size() > max_head)
        return Fail(HttpParse::State::kTooLarge,
                    fmt::format("the request head is over {} bytes", max_head));
      return out;  // kIncomplete
    }
    std::string_view line = data.substr(pos, eol - pos);
    if (line.find('\n') != std::string_view::npos || line.find('\r') != std::string_view::npos ||
        line.find('\0') != std::string_view::npos)
      return Bad("a line ends without CRLF or holds a NUL byte");
    pos = eol + 2;
    if (pos > max_head)
      return Fail(HttpParse::State::kTooLarge,
                  fmt::format("the request head is over {} bytes", max_head));
    std::string error;
    if (first) {
      if (!ParseRequestLine(line, &out.request, &error)) return Bad(error);
      first = false;
      continue;
    }
    if (line.empty()) break;
    if (out.request.headers.size() >= kHttpMaxHeaders)
      return Fail(HttpParse::State::kTooLarge,
                  fmt::format("the request has more than {} headers", kHttpMaxHeaders));
    if (!ParseHeader(line, &out.request, &error)) return Bad(error);
  }
  // No body is ever read: a request announcing one is refused (the
  // connection closes after the response, so nothing can be smuggled).
  for (const auto& [name, value] : out.request.headers) {
    if (name == "transfer-encoding")
      return Bad("a request body (Transfer-Encoding) is not accepted");
    if (name == "content-length" && value != "0")
      return Bad("a request body (Content-Length) is not accepted");
  }
  out.state = HttpParse::State::kComplete;
  out.head_bytes = pos;
  return out;
}

const char* HttpReason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

HttpResponse HttpError(int status, std::string message) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(message) + "\n";
  return r;
}

std::string FormatHttpResponse(const HttpResponse& response, bool head_only) {
  std::string out = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n"
      "Cache-Control: no-store\r\n",
      response.status, HttpReason(response.status), response.content_type, response.body.size());
  for (const auto& [name, value] : response.headers) out += fmt::format("{}: {}\r\n", name, value);
  out += "\r\n";
  if (!head_only) out += response.body;
  return out;
}

}  // namespace pstrain

// The live view's request parser (comm/http/http_request.h): what it accepts,
// what it refuses, and when it waits for more bytes.
#include "comm/http/http_request.h"

#include <doctest/doctest.h>

#include <string>

namespace pstrain {
namespace {

using State = HttpParse::State;

TEST_CASE("a curl request parses, header names lower-cased, values trimmed") {
  const std::string head =
      "GET /status?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent:  curl/8 \r\n"
      "Accept: */*\r\n\r\n";
  HttpParse p = ParseHttpRequest(head);
  REQUIRE(p.state == State::kComplete);
  CHECK(p.request.method == "GET");
  CHECK(p.request.path() == "/status");
  CHECK(p.request.version == "HTTP/1.1");
  REQUIRE(p.request.headers.size() == 3);
  CHECK(p.request.headers[1].first == "user-agent");
  CHECK(p.request.headers[1].second == "curl/8");
  CHECK(p.head_bytes == head.size());
}

TEST_CASE("a head cut anywhere is incomplete, never bad") {
  const std::string head = "GET /metrics HTTP/1.0\r\nAccept: text/plain\r\n\r\n";
  for (size_t n = 0; n < head.size(); ++n)
    CHECK_MESSAGE(ParseHttpRequest(head.substr(0, n)).state == State::kIncomplete, n);
}

TEST_CASE("malformed request lines and headers are refused at once") {
  for (const char* bad :
       {"GARBAGE\r\n", "get /status HTTP/1.1\r\n", "GET status HTTP/1.1\r\n",
        "GET /status HTTP/2.0\r\n", "GET  /status HTTP/1.1\r\n", "GET /a b HTTP/1.1\r\n",
        "GET /status HTTP/1.1\n\n", "GET /status HTTP/1.1\r\n folded: x\r\n\r\n",
        "GET /status HTTP/1.1\r\nNo colon\r\n\r\n", "GET /status HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "GET /status HTTP/1.1\r\nX: a\x01z\r\n\r\n",
        "POST /status HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
        "POST /status HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
    HttpParse p = ParseHttpRequest(bad);
    CHECK_MESSAGE(p.state == State::kBad, bad);
    CHECK_MESSAGE(!p.error.empty(), bad);
  }
  // A bad request line is judged before any header arrives.
  CHECK(ParseHttpRequest("FOO BAR\r\nHost: x").state == State::kBad);
}

TEST_CASE("a head over the cap, or with too many headers, is too large") {
  std::string head = "GET /status HTTP/1.1\r\nX-Big: " + std::string(kHttpMaxHead, 'a');
  CHECK(ParseHttpRequest(head).state == State::kTooLarge);
  std::string many = "GET /status HTTP/1.1\r\n";
  for (size_t i = 0; i <= kHttpMaxHeaders; ++i) many += "X: y\r\n";
  CHECK(ParseHttpRequest(many + "\r\n").state == State::kTooLarge);
  // Just under the cap is fine.
  std::string fits = "GET / HTTP/1.1\r\nX: " + std::string(kHttpMaxHead - 40, 'a') + "\r\n\r\n";
  CHECK(ParseHttpRequest(fits).state == State::kComplete);
}

TEST_CASE("responses close the connection and carry their length") {
  HttpResponse r = HttpError(405, "no");
  r.headers.emplace_back("Allow", "GET, HEAD");
  const std::string out = FormatHttpResponse(r, false);
  CHECK(out.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0) == 0);
  CHECK(out.find("Content-Length: 3\r\n") != std::string::npos);
  CHECK(out.find("Connection: close\r\n") != std::string::npos);
  CHECK(out.find("Allow: GET, HEAD\r\n") != std::string::npos);
  CHECK(out.substr(out.size() - 3) == "no\n");
  CHECK(FormatHttpResponse(r, /*head_only=*/true).find("no\n") == std::string::npos);
}

}  // namespace
}  // namespace pstrain

// Table rows copied ahead of a live change of the servers, then only the
// delta at the change (roles/server/table_moves.h), on two TableHosts of
// this process: server 0 of a job of 1 gives the rows a second server will
// take. Between the copy and the change, pushes change some copied rows
// and pulls create new ones; the table being full (max_rows), copied rows
// are evicted for room: some untouched since the copy and, when the new
// rows are many, every one, those pushed since too. The two servers then
// hold, bit for bit, what a move of every row at the change gives
// (RowsPhase::kWhole). A taker that joined the job (it places rows over 2
// servers already) installs the copy at once when its table has no
// max_rows, and holds it aside otherwise; a change that moves the rows
// whole after a copy drops that copy first. A delta with no copy ahead is
// refused.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/ps/row_placement.h"
#include "comm/transport/completion.h"
#include "roles/placement/server_tables.h"
#include "roles/server/table_host.h"
#include "tests/table_host_util.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

constexpr int kDim = 4;
const std::string kTable = "emb.weight";

using Host = testing::TableHostFixture;

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> ids;
  for (int64_t id = from; id < to; ++id) ids.push_back(id);
  return ids;
}

struct Job {
  int64_t max_rows = 0;  // 0: no limit
  int64_t new_rows = 0;  // created between the copy and the change
};

// Trains server 0 alone, moves to 2 servers with `phase` (after a copy
// ahead for kDelta, and for kWhole when `copied`), and returns both
// servers' digests.
std::pair<RowsDigestReply, RowsDigestReply> Move(const Job& job, RowsPhase phase, bool copied,
                                                 std::shared_ptr<testing::CaptureSink> sink) {
  Config config = OneTableConfig("emb", kDim);
  config.train.mode = UpdateMode::kAsync;
  config.parameters[0].max_rows = job.max_rows;
  Host giver(config, 0, 1, sink), taker(config, 1, 2, sink);
  giver.Pull(Range(0, 100));
  giver.Push(Range(0, 100), 0);
  if (copied) {
    auto ahead = giver.HandOff(RowsPhase::kCopy);
    REQUIRE_MESSAGE(ahead.ok(), ahead.status().message());
    Status st = taker.TakeOver(RowsPhase::kCopy, *ahead);
    REQUIRE_MESSAGE(st.ok(), st.message());
  }
  giver.Push(Range(0, 30), 1);  // copied rows changed
  giver.Pull(Range(100, 100 + job.new_rows));
  giver.Push(Range(100, 100 + job.new_rows), 2);
  auto handed = giver.HandOff(phase);
  REQUIRE_MESSAGE(handed.ok(), handed.status().message());
  Status st = taker.TakeOver(phase, *handed);
  REQUIRE_MESSAGE(st.ok(), st.message());
  return {giver.Digest(), taker.Digest()};
}

// The servers' line on the delta, and how many installed the copy at once.
struct Moved {
  std::string delta_line;
  size_t installed = 0;
};

Moved CheckSameAsWhole(const Job& job) {
  auto sink = std::make_shared<testing::CaptureSink>();
  const auto whole = Move(job, RowsPhase::kWhole, false, sink);
  const auto delta = Move(job, RowsPhase::kDelta, true, sink);
  const auto whole_after_copy = Move(job, RowsPhase::kWhole, true, sink);
  for (const auto* moved : {&delta, &whole_after_copy}) {
    CHECK(moved->first.rows == whole.first.rows);
    CHECK(moved->first.sums == whole.first.sums);
    CHECK(moved->second.rows == whole.second.rows);
    CHECK(moved->second.sums == whole.second.sums);
  }
  REQUIRE(whole.second.rows.size() == 1);
  CHECK(whole.second.rows[0] > 0);
  const std::vector<std::string> lines = sink->Matching("were unchanged");
  REQUIRE(lines.size() == 1);
  MESSAGE(lines[0]);
  return {lines[0], sink->Matching("installed").size()};
}

TEST_CASE("rows copied ahead, then the delta: both servers hold what a whole move gives") {
  SUBCASE("a full table evicts some copied rows, untouched since the copy") {
    const Moved moved = CheckSameAsWhole({120, 40});
    CHECK(moved.delta_line.find("copied ahead, 0 were") == std::string::npos);
    CHECK(moved.delta_line.find("and 0 are gone") == std::string::npos);
    CHECK(moved.installed == 0);  // max_rows: held aside
  }
  SUBCASE("a full table evicts every copied row, those pushed since too") {
    const Moved moved = CheckSameAsWhole({120, 140});
    CHECK(moved.delta_line.find("copied ahead, 0 were unchanged") != std::string::npos);
  }
  SUBCASE("a joiner installs the copy at once") {
    const Moved moved = CheckSameAsWhole({0, 40});
    CHECK(moved.delta_line.find("copied ahead, 0 were") == std::string::npos);
    CHECK(moved.installed == 2);  // the delta's copy, and the whole move's
  }
}

TEST_CASE("a delta with no copy ahead is refused, on both sides") {
  auto sink = std::make_shared<testing::CaptureSink>();
  Config config = OneTableConfig("emb", kDim);
  Host giver(config, 0, 1, sink), taker(config, 1, 2, sink);
  giver.Pull(Range(0, 10));
  auto handed = giver.HandOff(RowsPhase::kDelta);
  REQUIRE_FALSE(handed.ok());
  CHECK(handed.status().message().find("were not copied ahead") != std::string::npos);
  auto whole = giver.HandOff(RowsPhase::kWhole);  // nothing was taken by the refusal
  REQUIRE_MESSAGE(whole.ok(), whole.status().message());
  Status st = taker.TakeOver(RowsPhase::kDelta, *whole);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("no rows copied ahead") != std::string::npos);
}

}  // namespace
}  // namespace pstrain

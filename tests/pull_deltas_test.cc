// Compressed pulls (roles/server/pull_deltas.h, comm/ps/pull_reply.h,
// roles/worker/compressed_pulls.h): the worker's copy and the server's view
// of it stay bit-identical over many pulls, the copy reaches the values once
// they stop changing, workers of a sync step share one view, any gap in the
// sequence is answered dense, a malformed reply is refused in one line and
// changes nothing, and a whole job ends with every worker holding exactly
// the servers' weights.
#include "roles/server/pull_deltas.h"

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "comm/ps/pull_reply.h"
#include "optim/threshold_codec.h"
#include "roles/checkpoint/weights.h"
#include "tests/train_util.h"

namespace pstrain {
namespace {

// One worker's side of a partition: its copy, and the reply it holds.
struct Worker {
  std::vector<float> copy;
  uint64_t seq = 0;
  PushEncoding last = PushEncoding::kDense;
  size_t last_bytes = 0;
};

Status Pull(PullDeltas& server, int rank, const std::shared_ptr<const FloatBuffer>& values,
            Worker* w) {
  PullRequest request{"w", 0, rank, 0, static_cast<int64_t>(values->size())};
  request.accept_delta = true;
  request.have_seq = w->seq;
  auto [reply, payload] = server.Answer(request, 0, values);
  w->last = reply.encoding;
  w->last_bytes = payload.size;
  w->seq = 0;
  Status st = TakePullReply(reply, payload.data, payload.size, static_cast<int64_t>(w->copy.size()),
                            request.have_seq != 0, w->copy.data());
  if (st.ok()) w->seq = reply.seq;
  return st;
}

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// An sgd-like step: every element decays a little, a few move a lot.
std::shared_ptr<const FloatBuffer> Step(const FloatBuffer& before, std::mt19937* rng) {
  auto next = std::make_shared<FloatBuffer>(before);
  std::normal_distribution<float> normal;
  std::bernoulli_distribution big(0.02);
  for (float& v : *next) v = v - 0.05f * ((big(*rng) ? 3.0f : 0.01f) * normal(*rng) + 5e-4f * v);
  return next;
}

TEST_CASE("the worker's copy and the server's view stay bit-identical; no drift") {
  const int64_t n = 20011;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  auto values = std::make_shared<FloatBuffer>(n);
  for (float& v : *values) v = normal(rng);
  std::shared_ptr<const FloatBuffer> now = values;
  PullDeltas server(3, n, 0.05);
  std::vector<Worker> workers(3, Worker{std::vector<float>(n, 0.0f)});
  size_t delta_bytes = 0;
  int64_t deltas = 0;
  for (int step = 0; step < 300; ++step) {
    for (int r = 0; r < 3; ++r) {
      // Sync: every worker pulls every step; then, async-like, worker 2
      // skips every third one.
      if (r == 2 && step >= 100 && step % 3 == 1) continue;
      REQUIRE(Pull(server, r, now, &workers[r]).ok());
      REQUIRE(server.view(r) != nullptr);
      REQUIRE(BitIdentical(workers[r].copy, *server.view(r)));
      if (step > 0) {
        CHECK(workers[r].last == PushEncoding::kThreshold);
        delta_bytes += workers[r].last_bytes;
        ++deltas;
      }
    }
    // Workers that pulled the same values from the same view share the
    // next: in sync, one view however many workers.
    if (step < 100) CHECK(server.views() == 1);
    if (step >= 100) CHECK(server.views() <= 2);
    now = Step(*now, &rng);
  }
  // About 5% of the elements at 4 bytes and an index each: under 1/10 of dense.
  CHECK(delta_bytes / deltas < n * sizeof(float) / 10);
  MESSAGE("compressed pull: ", delta_bytes / deltas, " bytes, dense ", n * sizeof(float));
  // The values stop: within 1/density pulls (and a couple to settle the
  // last float roundings) every copy is exactly them.
  for (int pull = 0; pull < 40; ++pull)
    for (int r = 0; r < 3; ++r) REQUIRE(Pull(server, r, now, &workers[r]).ok());
  for (int r = 0; r < 3; ++r)
    CHECK(std::memcmp(workers[r].copy.data(), now->data(), n * sizeof(float)) == 0);
}

TEST_CASE("a gap in the sequence, a restart or a first pull is answered dense") {
  const int64_t n = 1000;
  std::mt19937 rng(5);
  auto values = std::make_shared<FloatBuffer>(n, 1.0f);
  std::shared_ptr<const FloatBuffer> now = values;
  PullDeltas server(2, n, 0.1);
  Worker w{std::vector<float>(n, 0.0f)};
  REQUIRE(Pull(server, 0, now, &w).ok());
  CHECK(w.last == PushEncoding::kDense);  // the first
  now = Step(*now, &rng);
  const uint64_t first = w.seq;
  REQUIRE(Pull(server, 0, now, &w).ok());
  CHECK(w.last == PushEncoding::kThreshold);
  // The worker names an older reply (a repeated or lost one): dense, exact.
  now = Step(*now, &rng);
  w.seq = first;
  REQUIRE(Pull(server, 0, now, &w).ok());
  CHECK(w.last == PushEncoding::kDense);
  CHECK(std::memcmp(w.copy.data(), now->data(), n * sizeof(float)) == 0);
  CHECK(BitIdentical(w.copy, *server.view(0)));
  // A reply never taken (held 0) or a sequence this server never gave.
  for (uint64_t seq : {uint64_t{0}, w.seq + 1000}) {
    now = Step(*now, &rng);
    w.seq = seq;
    REQUIRE(Pull(server, 0, now, &w).ok());
    CHECK(w.last == PushEncoding::kDense);
  }
  // Another worker's sequence is not this worker's view.
  Worker other{std::vector<float>(n, 0.0f)};
  REQUIRE(Pull(server, 1, now, &other).ok());
  now = Step(*now, &rng);
  REQUIRE(Pull(server, 1, now, &other).ok());
  w.seq = other.seq;
  now = Step(*now, &rng);
  REQUIRE(Pull(server, 0, now, &w).ok());
  CHECK(w.last == PushEncoding::kDense);
  // A restarted server knows no sequence of the previous one.
  PullDeltas restarted(2, n, 0.1);
  REQUIRE(Pull(restarted, 0, now, &w).ok());
  CHECK(w.last == PushEncoding::kDense);
  CHECK(BitIdentical(w.copy, *restarted.view(0)));
}

// `copy` unchanged and the error a single line naming `what`.
void CheckRefused(const Status& st, const std::vector<float>& copy,
                  const std::vector<float>& before, const char* what) {
  INFO(std::string(what));
  REQUIRE(!st.ok());
  MESSAGE(std::string(st.message()));
  CHECK(st.message().find('\n') == std::string::npos);
  CHECK(st.message().find(what) != std::string::npos);
  CHECK(BitIdentical(copy, before));
}

TEST_CASE("a malformed compressed pull reply is refused in one line and changes nothing") {
  const int64_t n = 500;
  std::vector<float> change(n, 0.0f), zeros(n, 0.0f);
  for (int64_t i = 0; i < n; i += 7) change[i] = 0.5f + static_cast<float>(i);
  std::vector<uint8_t> message;
  EncodeThresholdValues(change.data(), zeros.data(), n, 0.5f, &message);
  const std::vector<float> before(n, 2.0f);
  std::vector<float> copy = before;
  PullReply delta{0, PushEncoding::kThreshold, 7};
  // The good one is taken.
  REQUIRE(TakePullReply(delta, message.data(), message.size(), n, true, copy.data()).ok());
  CHECK(copy[7] == 2.0f + 7.5f);
  copy = before;
  CheckRefused(TakePullReply(delta, message.data(), message.size(), n, false, copy.data()), copy,
               before, "holds no previous reply");
  PullReply unnamed = delta;
  unnamed.seq = 0;
  CheckRefused(TakePullReply(unnamed, message.data(), message.size(), n, true, copy.data()), copy,
               before, "names no view");
  CheckRefused(TakePullReply(delta, message.data(), message.size() - 1, n, true, copy.data()), copy,
               before, "threshold message");
  CheckRefused(TakePullReply(delta, message.data(), message.size(), n + 1, true, copy.data()), copy,
               before, "threshold message");
  std::vector<uint8_t> bad = message;
  const float nan = std::nanf("");
  std::memcpy(bad.data() + bad.size() - 4, &nan, 4);
  CheckRefused(TakePullReply(delta, bad.data(), bad.size(), n, true, copy.data()), copy, before,
               "not finite");
  // +-tau (format 1) cannot follow weights: never taken as a pull.
  std::vector<float> residual(n, 0.0f);
  ThresholdEncoder signs(n, [] {
    CompressionConfig c;
    c.type = CompressionType::kThreshold;
    c.warmup_epochs = 0;
    c.threshold = 0.5f;
    return c;
  }());
  std::vector<uint8_t> sign_message;
  signs.Encode(change.data(), &sign_message);
  CheckRefused(TakePullReply(delta, sign_message.data(), sign_message.size(), n, true, copy.data()),
               copy, before, "only exact values");
  PullReply dense{0, PushEncoding::kDense, 7};
  CheckRefused(TakePullReply(dense, message.data(), message.size(), n, true, copy.data()), copy,
               before, "dense pull reply of");
}

TEST_CASE("a job with compressed pulls ends with every worker holding the servers' weights") {
  testing::ClickData data(8000, 1000);
  testing::TempDir dir;
  Config config = testing::ClickLrConfig(data, 60);
  CompressionConfig compression;
  compression.type = CompressionType::kThreshold;
  compression.threshold = 1e-3f;
  compression.warmup_epochs = 0;
  compression.pull_density = 0.02;
  config.train.compression = compression;
  config.train.checkpoint = CheckpointConfig{dir.path(), 0};
  testing::TrainOutcome out = testing::TrainLocally(config, 2, 2);
  REQUIRE_MESSAGE(out.status.ok(), out.status.message());
  auto servers = CheckpointWeights::Open(dir.path());
  REQUIRE_MESSAGE(servers.ok(), servers.status().message());
  const auto& tensors = (*servers)->layout().tensors;
  REQUIRE(tensors.size() == out.weights.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    auto held = (*servers)->Dense(tensors[t]);
    REQUIRE(held.ok());
    INFO(tensors[t].name);
    CHECK(BitIdentical(out.weights[t], *held));
  }
}

}  // namespace
}  // namespace pstrain

// A TableHost (roles/server/table_host.h) of one table "emb.weight" of dim
// 4 (OneTableConfig("emb", 4)), driven as a worker's requests would: pulls
// and pushes that wait for their answer, moves of rows, digests.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/transport/completion.h"
#include "roles/server/table_host.h"
#include "tests/test_util.h"

namespace pstrain::testing {

inline Buffer BytesOf(const void* data, size_t size) {
  auto owned = std::make_shared<std::vector<uint8_t>>(size);
  if (size > 0) std::memcpy(owned->data(), data, size);
  return Buffer{owned->data(), size, owned};
}

// The Status a reply says.
inline Status StatusOfReply(const MessageBody& body) {
  return std::holds_alternative<ErrorReply>(body) ? Internal(std::get<ErrorReply>(body).message)
                                                  : Status::OK();
}

class TableHostFixture {
 public:
  static constexpr int kDim = 4;
  static inline const std::string kTable = "emb.weight";

  TableHostFixture(const Config& config, int rank, int servers, std::shared_ptr<CaptureSink> sink,
                   int workers = 1)
      : servers_(servers) {
    auto host = TableHost::Create(config, workers, rank, servers,
                                  CaptureLogger(fmt::format("server {}", rank), sink));
    REQUIRE_MESSAGE(host.ok(), host.status().message());
    host_ = std::move(*host);
  }
  TableHost& operator*() { return *host_; }
  TableHost* operator->() { return host_.get(); }

  void Pull(const std::vector<int64_t>& ids, int worker = 0) {
    Completion<Status> done;
    host_->Pull(SparsePullRequest{kTable, worker, 0, servers_}, BytesOf(ids.data(), ids.size() * 8),
                [done](MessageBody body, Payload) { done.Set(StatusOfReply(body)); });
    REQUIRE_MESSAGE(done.Wait().ok(), done.Wait().message());
  }
  // Starts a push of gradients that are a function of (id, clock); `done`
  // gets its answer.
  void PushAsync(const std::vector<int64_t>& ids, int64_t clock, int worker,
                 Completion<Status> done) {
    std::vector<uint8_t> bytes(ids.size() * (8 + kDim * sizeof(float)));
    std::memcpy(bytes.data(), ids.data(), ids.size() * 8);
    auto* grads = reinterpret_cast<float*>(bytes.data() + ids.size() * 8);
    for (size_t i = 0; i < ids.size() * kDim; ++i)
      grads[i] = 0.01f * static_cast<float>((i * 7 + clock) % 13) - 0.05f;
    host_->Push(
        SparsePushRequest{kTable, worker, clock, static_cast<int64_t>(ids.size()), servers_},
        BytesOf(bytes.data(), bytes.size()),
        [done](MessageBody body, Payload) { done.Set(StatusOfReply(body)); });
  }
  void Push(const std::vector<int64_t>& ids, int64_t clock, int worker = 0) {
    Completion<Status> done;
    PushAsync(ids, clock, worker, done);
    REQUIRE_MESSAGE(done.Wait().ok(), done.Wait().message());
  }
  StatusOr<std::string> HandOff(RowsPhase phase) {
    Completion<StatusOr<std::string>> done;
    host_->HandOffRows(2, 0, phase, [done](StatusOr<TableHost::HandedRows> handed) {
      if (!handed.ok()) return done.Set(handed.status());
      done.Set(std::move(handed->bytes));
    });
    return done.Wait();
  }
  Status TakeOver(RowsPhase phase, const std::string& bytes) {
    Completion<Status> done;
    host_->TakeOverRows(2, 1, 20, phase, BytesOf(bytes.data(), bytes.size()),
                        [done](Status st) { done.Set(st); });
    return done.Wait();
  }
  RowsDigestReply Digest() {
    Completion<StatusOr<RowsDigestReply>> done;
    host_->Digest([done](StatusOr<RowsDigestReply> d) { done.Set(std::move(d)); });
    auto digest = done.Wait();
    REQUIRE_MESSAGE(digest.ok(), digest.status().message());
    return *digest;
  }

 private:
  int servers_;
  std::unique_ptr<TableHost> host_;
};

}  // namespace pstrain::testing

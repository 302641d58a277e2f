#include "comm/transport/messages.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "comm/transport/message_checks.h"
#include "comm/transport/wire_generated.h"

namespace pstrain {
namespace fb = ::flatbuffers;
namespace w = ::pstrain::wire;

namespace {

// A norm pull's step (train.clip_norm): a step a server can hold, which
// step + 1 must not overflow.
bool NormStepInRange(int64_t step) {
  return step >= 0 && step < std::numeric_limits<int64_t>::max();
}

using namespace wire_checks;  // NOLINT: the decoders' own checks

constexpr size_t kMaxMetricName = 16;  // a Heartbeat's validation_metric

StatusOr<MessageBody> DecodeBody(const w::Header* h, size_t header_size) {
  // The Verifier accepts a union whose type is set but whose table is absent.
  if (h->body_type() != w::Body_NONE && h->body() == nullptr)
    return InvalidArgument(
        fmt::format("message type {} has no body", static_cast<int>(h->body_type())));
  switch (h->body_type()) {
    case w::Body_RegisterRequest: {
      auto m = h->body_as_RegisterRequest();
      auto node = FromWire(m->node(), "node");
      if (!node.ok()) return node.status();
      if (!(m->recovery_wait_s() >= 0 && m->recovery_wait_s() <= kMaxWaitSeconds))
        return InvalidArgument(fmt::format("recovery_wait_s {} is not in 0..{}",
                                           m->recovery_wait_s(), kMaxWaitSeconds));
      if (m->topology_generation() < -1)
        return InvalidArgument(
            fmt::format("topology_generation {} (want -1 or more)", m->topology_generation()));
      const ElasticBounds elastic{m->min_workers(), m->max_workers(), m->min_servers(),
                                  m->max_servers(), m->finish_lost(), m->live_workers(),
                                  m->drop_lost()};
      if (elastic.enabled() &&
          !(elastic.min_workers >= 1 && elastic.min_workers <= elastic.max_workers &&
            elastic.max_workers <= kMaxElasticNodes && elastic.min_servers >= -1 &&
            elastic.min_servers <= elastic.max_servers && elastic.max_servers <= kMaxElasticNodes &&
            (elastic.min_servers >= 0) == (elastic.max_servers >= 0)))
        return InvalidArgument(fmt::format(
            "elastic bounds workers [{}, {}] servers [{}, {}] (want 1 <= min <= max <= {} "
            "workers, and -1 for both or 0 <= min <= max <= {} servers)",
            elastic.min_workers, elastic.max_workers, elastic.min_servers, elastic.max_servers,
            kMaxElasticNodes, kMaxElasticNodes));
      if (m->replicas() < 0 || m->replicas() > kMaxReplicas)
        return InvalidArgument(
            fmt::format("replicas {} (want 0 to {})", m->replicas(), kMaxReplicas));
      return MessageBody(RegisterRequest{
          *node, m->server_num(), m->worker_num(), m->recovery_wait_s(), m->rejoin(),
          m->generation(), m->config() ? m->config()->str() : "", m->topology_generation(),
          m->topology_digest(), elastic.enabled() ? elastic : ElasticBounds{}, m->replicas()});
    }
    case w::Body_RegisterReply:
      return MessageBody(RegisterReply{h->body_as_RegisterReply()->rank(),
                                       h->body_as_RegisterReply()->generation(),
                                       h->body_as_RegisterReply()->live()});
    case w::Body_Topology: {
      const w::Topology* m = h->body_as_Topology();
      Topology t;
      t.generation = m->generation();
      t.server_num = m->server_num();
      t.worker_num = m->worker_num();
      t.base_generation = m->base_generation();
      if (t.base_generation < -1 || t.generation < 0 || t.base_generation > t.generation)
        return InvalidArgument(
            fmt::format("Topology of generation {} as a delta from generation {} (want a "
                        "generation >= 0, and -1 or a base not past it)",
                        t.generation, t.base_generation));
      if (auto nodes = m->nodes()) {
        PSTRAIN_RETURN_IF_ERROR(CheckNodeList(*nodes, header_size));
        t.nodes.reserve(nodes->size());
        for (const w::NodeInfo* n : *nodes) {
          auto node = FromWire(n, "nodes[]");
          if (!node.ok()) return node.status();
          t.nodes.push_back(std::move(*node));
        }
      }
      return MessageBody(std::move(t));
    }
    case w::Body_Heartbeat: {
      const w::Heartbeat* hb = h->body_as_Heartbeat();
      Heartbeat out{hb->step(),
                    hb->samples_per_s(),
                    hb->held_view(),
                    hb->validation(),
                    hb->validation_epoch(),
                    hb->validation_metric() ? hb->validation_metric()->str() : ""};
      if (out.step < -1 || !std::isfinite(out.samples_per_s) || out.samples_per_s < 0 ||
          out.held_view < -1)
        return InvalidArgument(fmt::format(
            "Heartbeat with step {}, samples/s {} and view {} (want >= -1, a finite rate >= 0, "
            ">= -1)",
            out.step, out.samples_per_s, out.held_view));
      const bool name_ok = out.validation_metric.size() <= kMaxMetricName &&
                           std::all_of(out.validation_metric.begin(), out.validation_metric.end(),
                                       [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
      if (!(out.validation == -1 || (std::isfinite(out.validation) && out.validation >= 0)) ||
          out.validation_epoch < 0 || !name_ok)
        return InvalidArgument(fmt::format(
            "Heartbeat with validation {} of epoch {} (want -1 or a finite value >= 0, an epoch "
            ">= 0, a metric name of at most {} lower-case letters)",
            out.validation, out.validation_epoch, kMaxMetricName));
      return MessageBody(out);
    }
    case w::Body_BarrierRequest: {
      auto g = h->body_as_BarrierRequest()->group();
      if (g < w::BarrierGroup_MIN || g > w::BarrierGroup_MAX)
        return InvalidArgument(fmt::format("unknown barrier group {}", static_cast<int>(g)));
      auto blob = Text(h->body_as_BarrierRequest()->blob(), "blob", false);
      if (!blob.ok()) return blob.status();
      return MessageBody(BarrierRequest{static_cast<BarrierGroup>(g),
                                        h->body_as_BarrierRequest()->value(), *blob});
    }
    case w::Body_Done:
      return MessageBody(Done{});
    case w::Body_Shutdown: {
      auto reason = Text(h->body_as_Shutdown()->reason(), "reason", false);
      if (!reason.ok()) return reason.status();
      return MessageBody(
          Shutdown{*reason, h->body_as_Shutdown()->failed(), h->body_as_Shutdown()->stopped()});
    }
    case w::Body_Pause: {
      auto reason = Text(h->body_as_Pause()->reason(), "reason", false);
      if (!reason.ok()) return reason.status();
      const w::Pause* m = h->body_as_Pause();
      if (m->rank() < -1 || m->server_num() < 0 || m->worker_num() < 0 ||
          m->server_num() > kMaxElasticNodes || m->worker_num() > kMaxElasticNodes)
        return InvalidArgument(fmt::format("Pause with rank {} and shape {} servers, {} workers",
                                           m->rank(), m->server_num(), m->worker_num()));
      return MessageBody(
          Pause{*reason, m->generation(), m->rank(), m->server_num(), m->worker_num()});
    }
    case w::Body_NodeFailed: {
      auto reason = Text(h->body_as_NodeFailed()->reason(), "reason", false);
      if (!reason.ok()) return reason.status();
      const w::NodeFailed* m = h->body_as_NodeFailed();
      auto peer_role = FromWire(m->peer_role());
      if (!peer_role.ok()) return peer_role.status().WithContext("NodeFailed.peer_role");
      if (m->peer_rank() < -1)
        return InvalidArgument(fmt::format("NodeFailed names peer rank {}", m->peer_rank()));
      return MessageBody(NodeFailed{*reason, m->recoverable(), *peer_role, m->peer_rank()});
    }
    case w::Body_StopRequest: {
      auto reason = Text(h->body_as_StopRequest()->reason(), "reason", false);
      if (!reason.ok()) return reason.status();
      return MessageBody(StopRequest{*reason, h->body_as_StopRequest()->leave()});
    }
    case w::Body_ScaleRequest: {
      const w::ScaleRequest* m = h->body_as_ScaleRequest();
      if (m->workers() < -1 || m->servers() < -1 || m->workers() > kMaxElasticNodes ||
          m->servers() > kMaxElasticNodes)
        return InvalidArgument(
            fmt::format("ScaleRequest for {} workers and {} servers", m->workers(), m->servers()));
      return MessageBody(ScaleRequest{m->workers(), m->servers()});
    }
    case w::Body_ScaleReply: {
      auto message = Text(h->body_as_ScaleReply()->message(), "message", false);
      if (!message.ok()) return message.status();
      return MessageBody(ScaleReply{*message});
    }
    case w::Body_Moved: {
      const w::Moved* m = h->body_as_Moved();
      if (m->rank() < 0 || m->rank() >= kMaxElasticNodes || m->version() < 0)
        return InvalidArgument(
            fmt::format("Moved to server {} in placement {}", m->rank(), m->version()));
      return MessageBody(Moved{m->rank(), m->version()});
    }
    case w::Body_HandOffRequest: {
      const w::HandOffRequest* m = h->body_as_HandOffRequest();
      auto tensor = Text(m->tensor(), "tensor", true);
      if (!tensor.ok()) return tensor.status();
      if (tensor->empty()) return InvalidArgument("HandOffRequest names no tensor");
      if (m->to_rank() < 0 || m->to_rank() >= kMaxElasticNodes || m->version() < 0)
        return InvalidArgument(
            fmt::format("HandOffRequest to server {} in placement {}", m->to_rank(), m->version()));
      return MessageBody(HandOffRequest{*tensor, m->part(), m->to_rank(), m->version()});
    }
    case w::Body_ShapeChanged: {
      const w::ShapeChanged* m = h->body_as_ShapeChanged();
      if (m->step() < 0 || m->servers() < 1 || m->servers() > kMaxElasticNodes ||
          m->partitions() < 0)
        return InvalidArgument(
            fmt::format("ShapeChanged to {} servers from step {}", m->servers(), m->step()));
      if (m->workers() < 0 || m->workers() > kMaxElasticNodes)
        return InvalidArgument(fmt::format("ShapeChanged to {} workers", m->workers()));
      return MessageBody(ShapeChanged{m->step(), m->servers(), m->partitions(), m->workers()});
    }
    case w::Body_RowsHandOffRequest: {
      const w::RowsHandOffRequest* m = h->body_as_RowsHandOffRequest();
      const int servers = m->servers(), rank = m->rank();
      if (servers < 1 || servers > kMaxElasticNodes || rank < -1 || rank >= servers ||
          !KnownPhase(m->phase()))
        return InvalidArgument(fmt::format("RowsHandOffRequest for rank {} of {} servers, phase {}",
                                           rank, servers, m->phase()));
      return MessageBody(RowsHandOffRequest{servers, rank, static_cast<RowsPhase>(m->phase())});
    }
    case w::Body_RowsHandOffReply: {
      const w::RowsHandOffReply* m = h->body_as_RowsHandOffReply();
      if (m->rows() < 0 || m->step() < 0)
        return InvalidArgument(
            fmt::format("RowsHandOffReply of {} rows at step {}", m->rows(), m->step()));
      return MessageBody(RowsHandOffReply{m->rows(), m->step()});
    }
    case w::Body_RowsTakeOverRequest: {
      const w::RowsTakeOverRequest* m = h->body_as_RowsTakeOverRequest();
      if (m->servers() < 1 || m->servers() > kMaxElasticNodes || m->step() < 0 || m->rank() < 0 ||
          m->rank() >= m->servers() || !KnownPhase(m->phase()))
        return InvalidArgument(
            fmt::format("RowsTakeOverRequest for rank {} of {} servers at step {}, phase {}",
                        m->rank(), m->servers(), m->step(), m->phase()));
      return MessageBody(RowsTakeOverRequest{m->servers(), m->step(), m->rank(),
                                             static_cast<RowsPhase>(m->phase())});
    }
    case w::Body_PreCopyRows: {
      const w::PreCopyRows* m = h->body_as_PreCopyRows();
      if (m->from() < 1 || m->from() > kMaxElasticNodes || m->to() < 1 ||
          m->to() > kMaxElasticNodes || m->from() == m->to() ||
          (m->slots() != nullptr && m->slots()->size() > 0 && m->to() > m->from()))
        return InvalidArgument(
            fmt::format("PreCopyRows from {} servers to {}", m->from(), m->to()));
      PreCopyRows copy{m->from(), m->to(), {}};
      PSTRAIN_RETURN_IF_ERROR(ReadSlots(m->slots(), m->to(), "PreCopyRows", &copy.slots));
      for (int from : copy.slots)
        if (from >= copy.from)
          return InvalidArgument(
              fmt::format("PreCopyRows with slot {} of {} servers", from, copy.from));
      return MessageBody(std::move(copy));
    }
    case w::Body_RowsDigestRequest:
      return MessageBody(RowsDigestRequest{});
    case w::Body_RowsDigestReply: {
      const w::RowsDigestReply* m = h->body_as_RowsDigestReply();
      RowsDigestReply out;
      const size_t n = m->tables() ? m->tables()->size() : 0;
      if (n > 4096) return InvalidArgument(fmt::format("RowsDigestReply of {} tables", n));
      for (size_t i = 0; i < n; ++i) {
        const w::TableDigest* t = m->tables()->Get(static_cast<fb::uoffset_t>(i));
        auto name = Text(t->table(), "tables[].table", true);
        if (!name.ok()) return name.status();
        out.tables.push_back(std::move(*name));
        out.rows.push_back(t->rows());
        out.sums.push_back(t->sum());
      }
      return MessageBody(std::move(out));
    }
    case w::Body_HandOffReply:
      return MessageBody(HandOffReply{h->body_as_HandOffReply()->version()});
    case w::Body_TakeOverRequest: {
      const w::TakeOverRequest* m = h->body_as_TakeOverRequest();
      auto tensor = Text(m->tensor(), "tensor", true);
      if (!tensor.ok()) return tensor.status();
      if (tensor->empty()) return InvalidArgument("TakeOverRequest names no tensor");
      if (m->version() < 0 || m->elements() <= 0)
        return InvalidArgument(fmt::format("TakeOverRequest of {} values in placement {}",
                                           m->elements(), m->version()));
      return MessageBody(
          TakeOverRequest{*tensor, m->part(), m->version(), m->expect(), m->elements()});
    }
    case w::Body_Replicate: {
      const w::Replicate* m = h->body_as_Replicate();
      auto tensor = Text(m->tensor(), "tensor", true);
      if (!tensor.ok()) return tensor.status();
      if (tensor->empty()) return InvalidArgument("Replicate names no tensor");
      const auto kind = static_cast<int>(m->kind());
      if (kind < 0 || kind > 4) return InvalidArgument(fmt::format("Replicate of kind {}", kind));
      if (m->seq() < 1 || m->worker() < -1 || m->worker() >= kMaxElasticNodes || m->origin() < -1 ||
          m->origin() >= kMaxElasticNodes)
        return InvalidArgument(fmt::format("Replicate number {} of worker {}, of server {}'s",
                                           m->seq(), m->worker(), m->origin()));
      return MessageBody(Replicate{*tensor, m->part(), static_cast<ReplicaKind>(kind), m->worker(),
                                   m->seq(), m->origin()});
    }
    case w::Body_ServerView: {
      const w::ServerView* m = h->body_as_ServerView();
      const auto* owners = m->owners();
      const auto* live = m->live();
      const int servers = owners == nullptr ? 0 : static_cast<int>(owners->size());
      if (m->view() < 1 || servers < 1 || servers > kMaxElasticNodes || live == nullptr ||
          live->size() == 0 || live->size() > owners->size() || m->lost() < -1 ||
          m->lost() >= servers)
        return InvalidArgument(fmt::format("ServerView {} of {} servers, {} live, lost {}",
                                           m->view(), servers, live == nullptr ? 0 : live->size(),
                                           m->lost()));
      ServerView view{m->view(), m->lost(), {}, {}};
      std::vector<bool> is_live(static_cast<size_t>(servers), false);
      for (int r : *live) {
        if (r < 0 || r >= servers || is_live[static_cast<size_t>(r)] ||
            (!view.live.empty() && r < view.live.back()) || r == m->lost())
          return InvalidArgument(
              fmt::format("ServerView {} lists live server {} wrongly", m->view(), r));
        is_live[static_cast<size_t>(r)] = true;
        view.live.push_back(r);
      }
      for (int o : *owners) {
        if (o < 0 || o >= servers || !is_live[static_cast<size_t>(o)])
          return InvalidArgument(fmt::format(
              "ServerView {} names server {}, not a live one, as an owner", m->view(), o));
        view.owners.push_back(o);
      }
      return MessageBody(std::move(view));
    }
    case w::Body_Stop: {
      auto reason = Text(h->body_as_Stop()->reason(), "reason", false);
      if (!reason.ok()) return reason.status();
      const int servers = h->body_as_Stop()->servers();
      if (servers < 0 || servers > kMaxElasticNodes)
        return InvalidArgument(fmt::format("Stop that grows the job to {} servers", servers));
      Stop stop{*reason, h->body_as_Stop()->at_step(), servers, {}, {}, 0, {}, -1};
      PSTRAIN_RETURN_IF_ERROR(ReadSlots(h->body_as_Stop()->slots(), servers, "Stop", &stop.slots));
      if (const auto* lost = h->body_as_Stop()->lost()) {
        if (lost->size() > static_cast<fb::uoffset_t>(kMaxElasticNodes))
          return InvalidArgument(fmt::format("Stop with {} lost workers", lost->size()));
        for (int rank : *lost) {
          if (rank < 0 || rank >= kMaxElasticNodes)
            return InvalidArgument(fmt::format("Stop with lost worker {}", rank));
          stop.lost.push_back(rank);
        }
      }
      stop.workers = h->body_as_Stop()->workers();
      if (stop.workers != 0 || h->body_as_Stop()->ranks() != nullptr)
        PSTRAIN_RETURN_IF_ERROR(
            ReadRanks(h->body_as_Stop()->ranks(), stop.workers, "Stop", &stop.ranks));
      stop.lost_from = h->body_as_Stop()->lost_from();
      if (stop.lost_from < -1 ||
          (stop.lost_from >= 0 && (stop.lost.empty() || stop.lost_from > stop.at_step)))
        return InvalidArgument(fmt::format("Stop at step {} with lost workers from step {}",
                                           stop.at_step, stop.lost_from));
      return MessageBody(std::move(stop));
    }
    case w::Body_LoseWorker: {
      const w::LoseWorker* m = h->body_as_LoseWorker();
      auto reason = Text(m->reason(), "reason", false);
      if (!reason.ok()) return reason.status();
      if (m->rank() < 0 || m->rank() >= kMaxElasticNodes || m->last_step() < -1)
        return InvalidArgument(
            fmt::format("LoseWorker of worker {} at step {}", m->rank(), m->last_step()));
      return MessageBody(LoseWorker{m->rank(), m->last_step(), *reason});
    }
    case w::Body_ChangeWorkers: {
      const w::ChangeWorkers* m = h->body_as_ChangeWorkers();
      if (m->step() < 0) return InvalidArgument(fmt::format("ChangeWorkers at step {}", m->step()));
      ChangeWorkers change{m->step(), m->workers(), {}};
      PSTRAIN_RETURN_IF_ERROR(ReadRanks(m->ranks(), m->workers(), "ChangeWorkers", &change.ranks));
      return MessageBody(std::move(change));
    }
    case w::Body_LoseWorkerReply:
      if (h->body_as_LoseWorkerReply()->last_step() < -1)
        return InvalidArgument("LoseWorkerReply of a step below -1");
      return MessageBody(LoseWorkerReply{h->body_as_LoseWorkerReply()->last_step()});
    case w::Body_StopReply: {
      const w::StopReply* m = h->body_as_StopReply();
      if (m->rest_from() < -1 || m->rest_from() > m->step())
        return InvalidArgument(fmt::format("StopReply at step {} whose epoch's rest began at {}",
                                           m->step(), m->rest_from()));
      return MessageBody(StopReply{m->step(), m->rest_from()});
    }
    case w::Body_Hello: {
      auto node = FromWire(h->body_as_Hello()->node(), "node");
      if (!node.ok()) return node.status();
      auto shm_name = Text(h->body_as_Hello()->shm_name(), "shm_name", false);
      if (!shm_name.ok()) return shm_name.status();
      return MessageBody(Hello{*node, *shm_name, h->body_as_Hello()->shm_nonce(),
                               h->body_as_Hello()->generation()});
    }
    case w::Body_Ack:
      return MessageBody(Ack{});
    case w::Body_Error: {
      auto text = Text(h->body_as_Error()->message(), "message", false);
      if (!text.ok()) return text.status();
      return MessageBody(ErrorReply{*text});
    }
    case w::Body_PushRequest: {
      auto m = h->body_as_PushRequest();
      auto tensor = Text(m->tensor(), "tensor", true);
      if (!tensor.ok()) return tensor.status();
      PushKind kind;
      switch (m->kind()) {
        case w::PushKind_Gradient:
          kind = PushKind::kGradient;
          break;
        case w::PushKind_Init:
          kind = PushKind::kInit;
          break;
        case w::PushKind_Delta:
          kind = PushKind::kDelta;
          break;
        case w::PushKind_ClipScale:
          kind = PushKind::kClipScale;
          break;
        default:
          return InvalidArgument(fmt::format("unknown push kind {}", static_cast<int>(m->kind())));
      }
      auto read_encoding = PushEncodingOf(m->encoding());
      if (!read_encoding.ok()) return read_encoding.status();
      const PushEncoding encoding = *read_encoding;
      if (encoding != PushEncoding::kDense && kind != PushKind::kGradient)
        return InvalidArgument("only gradient pushes may be threshold-encoded");
      return MessageBody(PushRequest{*tensor, m->part(), m->worker(), m->clock(), kind, encoding});
    }
    case w::Body_PullRequest: {
      auto m = h->body_as_PullRequest();
      auto tensor = Text(m->tensor(), "tensor", true);
      if (!tensor.ok()) return tensor.status();
      if (m->norm() && m->accept_delta()) return InvalidArgument("a norm pull takes no delta");
      if (m->norm() && !NormStepInRange(m->min_clock()))
        return InvalidArgument(fmt::format("a norm pull of step {}", m->min_clock()));
      return MessageBody(PullRequest{*tensor, m->part(), m->worker(), m->min_clock(), m->elements(),
                                     m->accept_delta(), m->have_seq(), m->norm()});
    }
    case w::Body_PullReply: {
      auto* m = h->body_as_PullReply();
      auto encoding = PushEncodingOf(m->encoding());
      if (!encoding.ok()) return encoding.status();
      return MessageBody(PullReply{m->clock(), *encoding, m->seq(), m->squared_norm()});
    }
    case w::Body_SaveRequest: {
      const w::SaveRequest* m = h->body_as_SaveRequest();
      if (m->servers() < 0 || m->servers() > kMaxElasticNodes || m->origin() < -1 ||
          m->origin() >= kMaxElasticNodes)
        return InvalidArgument(fmt::format("SaveRequest for {} servers, of server {}'s partitions",
                                           m->servers(), m->origin()));
      return MessageBody(SaveRequest{m->step(), m->servers(), m->origin()});
    }
    case w::Body_SaveReply: {
      auto file = Text(h->body_as_SaveReply()->file(), "file", true);
      if (!file.ok()) return file.status();
      return MessageBody(SaveReply{*file});
    }
    case w::Body_SparsePullRequest: {
      auto* m = h->body_as_SparsePullRequest();
      auto table = Text(m->table(), "table", true);
      if (!table.ok()) return table.status();
      if (m->servers() < 1 || m->servers() > kMaxElasticNodes)
        return InvalidArgument(
            fmt::format("SparsePullRequest placed over {} servers", m->servers()));
      if (m->origin() < -1 || m->origin() >= m->servers())
        return InvalidArgument(
            fmt::format("SparsePullRequest of server {}'s rows of {}", m->origin(), m->servers()));
      if (m->norm() && !NormStepInRange(m->min_clock()))
        return InvalidArgument(fmt::format("a norm pull of step {}", m->min_clock()));
      return MessageBody(SparsePullRequest{*table, m->worker(), m->min_clock(), m->servers(),
                                           m->origin(), m->norm()});
    }
    case w::Body_SparsePullReply: {
      auto* m = h->body_as_SparsePullReply();
      return MessageBody(SparsePullReply{m->clock(), m->squared_norm()});
    }
    case w::Body_SparsePushRequest: {
      auto* m = h->body_as_SparsePushRequest();
      auto table = Text(m->table(), "table", true);
      if (!table.ok()) return table.status();
      if (m->rows() < 0) return InvalidArgument(fmt::format("{} rows", m->rows()));
      if (m->servers() < 1 || m->servers() > kMaxElasticNodes)
        return InvalidArgument(
            fmt::format("SparsePushRequest placed over {} servers", m->servers()));
      if (m->origin() < -1 || m->origin() >= m->servers())
        return InvalidArgument(
            fmt::format("SparsePushRequest of server {}'s rows of {}", m->origin(), m->servers()));
      if (m->clip() != 0 && (m->rows() != 0 || !(m->clip() > 0 && m->clip() <= 1)))
        return InvalidArgument(fmt::format("SparsePushRequest of a clip factor {} with {} rows",
                                           m->clip(), m->rows()));
      return MessageBody(SparsePushRequest{*table, m->worker(), m->clock(), m->rows(), m->servers(),
                                           m->origin(), m->clip()});
    }
    case w::Body_RingChunk:
      return MessageBody(RingChunk{h->body_as_RingChunk()->op(), h->body_as_RingChunk()->step(),
                                   h->body_as_RingChunk()->segment()});
    case w::Body_BarrierReply: {
      auto blob = Text(h->body_as_BarrierReply()->blob(), "blob", false);
      if (!blob.ok()) return blob.status();
      return MessageBody(BarrierReply{h->body_as_BarrierReply()->min_value(), *blob});
    }
    case w::Body_AuthHello: {
      auto* m = h->body_as_AuthHello();
      AuthHello hello{m->version(), {}, m->proves()};
      PSTRAIN_RETURN_IF_ERROR(CopyExact(m->nonce(), "nonce", &hello.nonce));
      return MessageBody(hello);
    }
    case w::Body_AuthProof: {
      AuthProof proof;
      PSTRAIN_RETURN_IF_ERROR(CopyExact(h->body_as_AuthProof()->mac(), "mac", &proof.mac));
      return MessageBody(proof);
    }
    case w::Body_NONE:
      break;
  }
  return InvalidArgument(fmt::format("unknown message type {}", static_cast<int>(h->body_type())));
}

}  // namespace

StatusOr<Message> DecodeHeader(const uint8_t* data, size_t size) {
  fb::Verifier verifier(data, size, /*max_depth=*/16, /*max_tables=*/100000);
  if (!w::VerifyHeaderBuffer(verifier))
    return InvalidArgument(
        fmt::format("frame header of {} bytes fails FlatBuffers verification", size));
  const w::Header* h = w::GetHeader(data);
  auto body = DecodeBody(h, size);
  if (!body.ok()) return body.status();
  Message m;
  m.request_id = h->request_id();
  m.is_reply = h->is_reply();
  m.body = std::move(*body);
  return m;
}

}  // namespace pstrain

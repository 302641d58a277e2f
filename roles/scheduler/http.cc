// 12. The scheduler's live view (roles/scheduler/scheduler.h): the HTTP routes, and
// the snapshot of the job they render. Loop thread, like all the state read.
#include <fmt/format.h>

#include "roles/node/server_view.h"
#include "roles/scheduler/scheduler.h"

namespace pstrain {

Status Scheduler::ServeHttp() {
  if (options_.http_port == 0) return Status::OK();
  auto port = http_.Listen(options_.sched_host, options_.http_port,
                           [this](const HttpRequest& r) { return OnHttp(r); });
  if (!port.ok()) return port.status().WithContext("PSTRAIN_HTTP_PORT");
  const bool v6 = options_.sched_host.find(':') != std::string::npos;
  log_->info("The scheduler serves the job's state on http://{}{}{}:{}/status and /metrics",
             v6 ? "[" : "", options_.sched_host, v6 ? "]" : "", *port);
  return Status::OK();
}

HttpResponse Scheduler::OnHttp(const HttpRequest& request) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const std::string_view path = request.path();
  if (path != "/status" && path != "/metrics")
    return HttpError(404, fmt::format("no such page: {} (try /status or /metrics)", path));
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse r = HttpError(405, fmt::format("{} is not allowed: use GET", request.method));
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  HttpResponse r;
  if (path == "/status") {
    r.content_type = "application/json";
    r.body = StatusJson(View());
  } else {
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = MetricsText(View());
  }
  return r;
}

JobView Scheduler::View() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const uint64_t now = loop_.NowMs();
  JobView view;
  view.servers = static_cast<int>(servers_.size());
  view.workers = static_cast<int>(workers_.size());
  if (elastic_.enabled()) {
    view.elastic = DescribeBounds(elastic_);
    view.joining = static_cast<int>(joiners_.size());
    view.leaving = static_cast<int>(leaving_.size());
    view.shape_changes.assign(shape_changes_.begin(), shape_changes_.end());
  }
  view.generation = generation_;
  view.uptime_s = static_cast<double>(now - started_ms_) / 1000.0;
  view.phase = finished_.IsSet()       ? "over"
               : shutting_down_        ? "shutting down"
               : !stop_reason_.empty() ? "stopping"
               : paused_               ? "paused"
               : !topology_sent_       ? "registering"
                                       : "running";
  for (const auto* nodes : {&servers_, &workers_}) {
    for (size_t r = 0; r < nodes->size(); ++r) {
      const NodeEntry& n = (*nodes)[r];
      NodeView v;
      v.role = nodes == &servers_ ? Role::kServer : Role::kWorker;
      v.rank = static_cast<int>(r);
      v.node_id = n.info.node_id;
      v.host = n.info.host;
      v.port = n.info.port;
      v.step = n.step;
      v.samples_per_s = n.samples_per_s;
      v.validation = n.validation.validation;
      v.validation_epoch = n.validation.validation_epoch;
      v.validation_metric = n.validation.validation_metric;
      if (n.info.node_id.empty()) {
        v.state = "unregistered";
      } else {
        v.heartbeat_age_s = static_cast<double>(now - std::min(now, n.last_heard_ms)) / 1000.0;
        v.state = n.lost                        ? "lost"
                  : n.shut_down                 ? "shut down"
                  : n.generation != generation_ ? "rejoining"
                  : n.done                      ? "done"
                  : !topology_sent_             ? "registered"
                                                : "running";
      }
      view.nodes.push_back(std::move(v));
    }
  }
  if (replicas_ > 0) {
    const int servers = static_cast<int>(servers_.size());
    const ServerView held = server_view_.owners.empty()
                                ? ServerView{0, -1, AllServers(servers), AllServers(servers)}
                                : server_view_;
    view.replicas = replicas_;
    view.server_view = held.view;
    for (size_t o = 0; o < held.owners.size(); ++o) {
      const int primary = held.owners[o];
      view.shards.push_back({static_cast<int>(o), primary, BackupsOf(primary, held.live, replicas_),
                             servers_[static_cast<size_t>(primary)].held_view >= held.view});
    }
  }
  return view;
}

}  // namespace pstrain

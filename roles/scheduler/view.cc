#include "roles/scheduler/view.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

namespace pstrain {
namespace {

// Workers that reported a step: the job's totals are over these.
struct Totals {
  int reporting = 0;
  int64_t min_step = 0;
  int64_t max_step = 0;
  double samples_per_s = 0;
};

Totals TotalsOf(const JobView& view) {
  Totals t;
  for (const NodeView& n : view.nodes) {
    if (n.role != Role::kWorker || n.step < 0) continue;
    t.min_step = t.reporting == 0 ? n.step : std::min(t.min_step, n.step);
    t.max_step = t.reporting == 0 ? n.step : std::max(t.max_step, n.step);
    if (n.state == "running") t.samples_per_s += n.samples_per_s;
    ++t.reporting;
  }
  return t;
}

// A label value: node ids and hosts come from the nodes, so escape them
// as the exposition format asks (backslash, quote, newline).
std::string Label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string NodeLabels(const NodeView& n) {
  return fmt::format("role=\"{}\",rank=\"{}\"", RoleName(n.role), n.rank);
}

void Family(std::string* out, const char* name, const char* type, const char* help) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string StatusJson(const JobView& view) {
  using nlohmann::json;
  json nodes = json::array();
  for (const NodeView& n : view.nodes) {
    json node = {
        {"role", RoleName(n.role)},
        {"rank", n.rank},
        {"node_id", n.node_id},
        {"address", n.node_id.empty() ? "" : fmt::format("{}:{}", n.host, n.port)},
        {"state", n.state},
        {"heartbeat_age_s", n.heartbeat_age_s < 0 ? json(nullptr) : json(n.heartbeat_age_s)}};
    if (n.role == Role::kWorker) {
      node["step"] = n.step < 0 ? json(nullptr) : json(n.step);
      node["samples_per_s"] = n.samples_per_s;
      if (n.validation >= 0)
        node["validation"] = {{"metric", n.validation_metric},
                              {"value", n.validation},
                              {"epoch", n.validation_epoch}};
    }
    nodes.push_back(std::move(node));
  }
  const Totals t = TotalsOf(view);
  json totals = {{"workers_reporting", t.reporting},
                 {"min_step", t.reporting ? json(t.min_step) : json(nullptr)},
                 {"max_step", t.reporting ? json(t.max_step) : json(nullptr)},
                 {"samples_per_s", t.samples_per_s}};
  json job = {{"servers", view.servers},
              {"workers", view.workers},
              {"generation", view.generation},
              {"phase", view.phase},
              {"uptime_s", view.uptime_s}};
  if (view.replicas > 0) {
    json shards = json::array();
    for (const JobView::Shard& s : view.shards)
      shards.push_back({{"rank", s.rank},
                        {"primary", s.primary},
                        {"backups", s.backups},
                        {"backups_hold_all", s.backups_hold_all}});
    job["replication"] = {
        {"replicas", view.replicas}, {"view", view.server_view}, {"shards", shards}};
  }
  if (!view.elastic.empty())
    job["elastic"] = {{"bounds", view.elastic},
                      {"joining", view.joining},
                      {"leaving", view.leaving},
                      {"changes", view.shape_changes}};
  // Node ids are bytes from peers: replace what is not UTF-8 rather than throw.
  return json{{"job", job}, {"nodes", nodes}, {"totals", totals}}.dump(
             2, ' ', false, json::error_handler_t::replace) +
         "\n";
}

std::string MetricsText(const JobView& view) {
  std::string out;
  Family(&out, "pstrain_job_info", "gauge", "The job's shape and phase (value 1).");
  out += fmt::format("pstrain_job_info{{servers=\"{}\",workers=\"{}\",phase=\"{}\"}} 1\n",
                     view.servers, view.workers, Label(view.phase));
  Family(&out, "pstrain_job_generation", "gauge", "Rollbacks of the job so far.");
  out += fmt::format("pstrain_job_generation {}\n", view.generation);
  Family(&out, "pstrain_job_uptime_seconds", "gauge", "Seconds since the scheduler started.");
  out += fmt::format("pstrain_job_uptime_seconds {:.3f}\n", view.uptime_s);

  Family(&out, "pstrain_nodes", "gauge", "Nodes of each role in each state.");
  for (Role role : {Role::kServer, Role::kWorker}) {
    std::vector<std::string> states;
    for (const NodeView& n : view.nodes)
      if (n.role == role && std::find(states.begin(), states.end(), n.state) == states.end())
        states.push_back(n.state);
    for (const std::string& state : states) {
      const auto count =
          std::count_if(view.nodes.begin(), view.nodes.end(),
                        [&](const NodeView& n) { return n.role == role && n.state == state; });
      out += fmt::format("pstrain_nodes{{role=\"{}\",state=\"{}\"}} {}\n", RoleName(role),
                         Label(state), count);
    }
  }
  Family(&out, "pstrain_node_up", "gauge",
         "1 while the node of this role and rank is registered and not lost.");
  for (const NodeView& n : view.nodes) {
    const bool up = !n.node_id.empty() && n.state != "lost" && n.state != "unregistered";
    out += fmt::format("pstrain_node_up{{{}}} {}\n", NodeLabels(n), up ? 1 : 0);
  }
  Family(&out, "pstrain_node_heartbeat_age_seconds", "gauge",
         "Seconds since the scheduler last heard from the node.");
  for (const NodeView& n : view.nodes)
    if (n.heartbeat_age_s >= 0)
      out += fmt::format("pstrain_node_heartbeat_age_seconds{{{}}} {:.3f}\n", NodeLabels(n),
                         n.heartbeat_age_s);
  Family(&out, "pstrain_worker_step", "gauge", "Training steps the worker has done.");
  for (const NodeView& n : view.nodes)
    if (n.role == Role::kWorker && n.step >= 0)
      out += fmt::format("pstrain_worker_step{{{}}} {}\n", NodeLabels(n), n.step);
  Family(&out, "pstrain_worker_samples_per_second", "gauge",
         "The worker's training rate over its current epoch.");
  for (const NodeView& n : view.nodes)
    if (n.role == Role::kWorker && n.step >= 0)
      out += fmt::format("pstrain_worker_samples_per_second{{{}}} {:.3f}\n", NodeLabels(n),
                         n.samples_per_s);
  Family(&out, "pstrain_worker_validation_metric", "gauge",
         "The worker's last measure of the validation set (the chief's), by metric.");
  for (const NodeView& n : view.nodes)
    if (n.role == Role::kWorker && n.validation >= 0)
      out += fmt::format("pstrain_worker_validation_metric{{{},metric=\"{}\"}} {:.6f}\n",
                         NodeLabels(n), n.validation_metric, n.validation);
  const Totals t = TotalsOf(view);
  Family(&out, "pstrain_job_samples_per_second", "gauge",
         "Sum of the running workers' training rates.");
  out += fmt::format("pstrain_job_samples_per_second {:.3f}\n", t.samples_per_s);
  if (t.reporting > 0) {
    Family(&out, "pstrain_job_min_step", "gauge", "The slowest worker's step.");
    out += fmt::format("pstrain_job_min_step {}\n", t.min_step);
    Family(&out, "pstrain_job_max_step", "gauge", "The fastest worker's step.");
    out += fmt::format("pstrain_job_max_step {}\n", t.max_step);
  }
  if (view.replicas > 0) {
    Family(&out, "pstrain_replication_view", "gauge",
           "The server view in force (train.replication): changes of the live servers so far.");
    out += fmt::format("pstrain_replication_view {}\n", view.server_view);
    Family(&out, "pstrain_replication_primary", "gauge",
           "The server holding this server rank's partitions and table rows.");
    for (const JobView::Shard& s : view.shards)
      out += fmt::format("pstrain_replication_primary{{rank=\"{}\"}} {}\n", s.rank, s.primary);
    Family(&out, "pstrain_replication_backups", "gauge",
           "Servers holding copies of this server rank's partitions and table rows.");
    for (const JobView::Shard& s : view.shards)
      out +=
          fmt::format("pstrain_replication_backups{{rank=\"{}\"}} {}\n", s.rank, s.backups.size());
    Family(&out, "pstrain_replication_backups_hold_all", "gauge",
           "1 when those copies hold all the primary holds as of the view in force.");
    for (const JobView::Shard& s : view.shards)
      out += fmt::format("pstrain_replication_backups_hold_all{{rank=\"{}\"}} {}\n", s.rank,
                         s.backups_hold_all ? 1 : 0);
  }
  return out;
}

}  // namespace pstrain

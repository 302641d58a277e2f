// The live view's two renderings (roles/scheduler/view.h) of a view built
// by hand: a chief's validation measure shows in /status and /metrics, and
// nothing of it where none was reported.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "roles/scheduler/view.h"

namespace pstrain {
namespace {

JobView TwoWorkers() {
  JobView view;
  view.servers = 0;
  view.workers = 2;
  view.phase = "running";
  for (int r = 0; r < 2; ++r) {
    NodeView& n = view.nodes.emplace_back();
    n.role = Role::kWorker;
    n.rank = r;
    n.node_id = "w" + std::to_string(r);
    n.state = "running";
    n.step = 10;
  }
  return view;
}

TEST_CASE("the chief's validation measure is in /status and /metrics") {
  JobView view = TwoWorkers();
  view.nodes[0].validation = 0.8125;
  view.nodes[0].validation_epoch = 3;
  view.nodes[0].validation_metric = "auc";
  const auto status = nlohmann::json::parse(StatusJson(view));
  const auto& chief = status["nodes"][0];
  REQUIRE(chief.contains("validation"));
  CHECK(chief["validation"]["metric"] == "auc");
  CHECK(chief["validation"]["value"] == 0.8125);
  CHECK(chief["validation"]["epoch"] == 3);
  CHECK_FALSE(status["nodes"][1].contains("validation"));
  const std::string metrics = MetricsText(view);
  CHECK(metrics.find("# TYPE pstrain_worker_validation_metric gauge") != std::string::npos);
  CHECK(metrics.find("pstrain_worker_validation_metric{role=\"worker\",rank=\"0\",metric=\"auc\"} "
                     "0.812500\n") != std::string::npos);
  CHECK(metrics.find("rank=\"1\",metric=") == std::string::npos);
}

TEST_CASE("no validation measure, none shown") {
  const JobView view = TwoWorkers();
  const auto status = nlohmann::json::parse(StatusJson(view));
  CHECK_FALSE(status["nodes"][0].contains("validation"));
  CHECK(MetricsText(view).find("pstrain_worker_validation_metric{") == std::string::npos);
}

}  // namespace
}  // namespace pstrain

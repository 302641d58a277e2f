// A bare cluster member for the scheduler's tests (tests/scheduler_test.cc,
// tests/topology_recovery_test.cc): a loop and a ClusterClient, driven by
// the test, with the security settings a Node would give its loop.
#pragma once

#include <doctest/doctest.h>

#include <utility>

#include "comm/transport/event_loop.h"
#include "comm/transport/security.h"
#include "roles/node/cluster_client.h"
#include "src/common/config/options.h"
#include "src/common/logging.h"

namespace pstrain::testing {

struct TestNode {
  TestNode(NodeOptions options, Logger log) : client(&loop, options, std::move(log)) {
    loop.SetSecurity(SecurityFrom(options.cluster));  // as Node does
    REQUIRE(loop.Start().ok());
  }
  ~TestNode() { CHECK(loop.Stop().ok()); }
  EventLoop loop;
  ClusterClient client;
};

}  // namespace pstrain::testing

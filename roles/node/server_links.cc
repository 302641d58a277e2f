#include "roles/node/server_links.h"

#include <fmt/format.h>

#include <memory>
#include <string>
#include <thread>

#include "comm/transport/completion.h"
#include "comm/transport/patient_connect.h"

namespace pstrain {

StatusOr<std::vector<Connection::Ptr>> ConnectToServers(EventLoop* loop, Logger log,
                                                        const Hello& hello,
                                                        const std::vector<NodeInfo>& servers,
                                                        size_t size) {
  auto links = std::make_shared<std::vector<Connection::Ptr>>(size);
  if (servers.empty()) return *links;
  Completion<Status> all_connected;
  auto connected = CountDown::Into(all_connected, servers.size());
  bool posted = loop->Post([loop, log, servers, hello, links, connected] {
    for (const NodeInfo& s : servers) {
      std::string who = fmt::format("server rank {} at {}:{}", s.rank, s.host, s.port);
      if (s.rank < 0 || static_cast<size_t>(s.rank) >= links->size()) {
        connected->Report(Internal(who + ": a rank past the servers"));
        continue;
      }
      ConnectPatiently(loop, log, s.host, s.port, PeerConnectPatienceMs(*loop),
                       [s, who, hello, links, connected](StatusOr<Connection::Ptr> conn) {
                         if (!conn.ok()) return connected->Report(conn.status().WithContext(who));
                         (*links)[static_cast<size_t>(s.rank)] = *conn;
                         (*conn)->Start(nullptr, nullptr);
                         (*conn)->Call(hello, [who, connected](StatusOr<Incoming> reply) {
                           connected->Report(reply.status().WithContext(who));
                         });
                       });
    }
  });
  if (!posted) return Aborted("the worker is stopping");
  if (Status st = all_connected.Wait(); !st.ok()) {
    loop->Post([links, st] {
      for (const Connection::Ptr& c : *links)
        if (c) c->Close(st);
    });
    return st;
  }
  return *links;
}

StatusOr<std::vector<NodeInfo>> AwaitServers(ClusterClient* cluster, int from, int to,
                                             std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<NodeInfo> listed;
  for (;;) {
    listed.clear();
    if (auto held = cluster->Held())
      for (const NodeInfo& n : held->nodes)
        if (n.role == Role::kServer && n.rank >= from && n.rank < to) listed.push_back(n);
    if (static_cast<int>(listed.size()) == to - from) return listed;
    if (std::chrono::steady_clock::now() >= deadline)
      return DeadlineExceeded(fmt::format("the topology did not list servers {} to {} within {} ms",
                                          from, to - 1, limit.count()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace pstrain

// Which server holds an embedding row, and a batch's ids split by server:
// the sparse counterpart of comm/ps/partition_map.h, used by the sparse client
// (comm/ps/sparse_client.h) to send each server the rows it holds.
//
// A row's server is a hash of its id, the same on every platform and in
// every process (workers and servers compute it apart), so that rows of hot
// and cold ids spread evenly whatever the id distribution. Stateless and
// thread-safe.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/common/random.h"

namespace pstrain {

// In [0, servers), servers > 0. The id is salted before mixing: the tables'
// hash maps index by Mix64(id), and if placement used the same bits, every id
// on server s would share them and crowd a fraction of that server's slots.
inline int ServerOfId(int64_t id, int servers) {
  assert(servers > 0);
  constexpr uint64_t kPlacementSalt = 0x5851f42d4c957f2dULL;
  return static_cast<int>(Mix64(static_cast<uint64_t>(id) ^ kPlacementSalt) %
                          static_cast<uint64_t>(servers));
}

// Unique ids grouped by server (ServerOfId), in CSR form: server s's ids are
// ids[offsets[s], offsets[s + 1]), each at position unique_index[k] of the
// unique list they came from. Within a server, ids keep their order.
struct ServerGroups {
  std::vector<size_t> offsets;  // servers + 1 entries
  std::vector<int64_t> ids;
  std::vector<uint32_t> unique_index;

  size_t size(int server) const { return offsets[server + 1] - offsets[server]; }
  const int64_t* ids_of(int server) const { return ids.data() + offsets[server]; }
};

// Fills *out for `unique` (distinct ids) over `servers` > 0 servers. O(n).
void GroupByServer(const std::vector<int64_t>& unique, int servers, ServerGroups* out);

}  // namespace pstrain

// Which server holds an embedding row, and a batch's ids split by server:
// the sparse counterpart of comm/ps/partition_map.h, used by the sparse client
// (comm/ps/sparse_client.h) to send each server the rows it holds.
//
// A row's server is a hash of its id, the same on every platform and in
// every process (workers and servers compute it apart), so that rows of hot
// and cold ids spread evenly whatever the id distribution. The hash is
// consistent (Lamping and Veach's jump hash): when a server joins a job of
// n, only the rows that go to it move (1/(n+1) of them), and when the last
// of n leaves, only its own rows move; a modulo would move n/(n+1) of every
// table's rows between servers that stay. Stateless and thread-safe.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/common/random.h"

namespace pstrain {

// In [0, servers), servers > 0. The id is salted and mixed first: the
// tables' hash maps index by Mix64(id), and if placement used the same bits,
// every id on server s would share them and crowd a fraction of that
// server's slots; and jump hash wants uniform keys.
inline int ServerOfId(int64_t id, int servers) {
  assert(servers > 0);
  constexpr uint64_t kPlacementSalt = 0x5851f42d4c957f2dULL;
  uint64_t key = Mix64(static_cast<uint64_t>(id) ^ kPlacementSalt);
  int64_t server = 0;
  for (int64_t next = 0; next < servers;) {  // about ln(servers) + 1 rounds
    server = next;
    key = key * 2862933555777941757ULL + 1;
    next = static_cast<int64_t>(
        static_cast<double>(server + 1) *
        (static_cast<double>(int64_t{1} << 31) / static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<int>(server);
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

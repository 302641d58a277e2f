// Which server holds an embedding row: a hash of the id, the same on every
// platform and in every process (workers and servers compute it apart), so
// that rows of hot and cold ids spread evenly whatever the id distribution.
// Stateless and thread-safe.
#pragma once

#include <cassert>
#include <cstdint>

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

}  // namespace pstrain

// Moving a dense partition from one server to another while the job runs,
// the building block of a live change of the server set.
//
// The chief worker drives a move of (tensor, part) from server A to B, at a
// step boundary (between a step's pulls and the next pushes: a partition on
// which pulls wait is not handed off):
//   1. TakeOverRequest(expect) to B: B holds the partition's pushes from
//      now on, and its pulls wait, until the state comes.
//   2. HandOffRequest(to_rank B, version v) to A: requests A took before it
//      are applied there and in the state it returns (HandOffReply + state,
//      roles/server/handoff_codec.h); every push or pull of the partition A
//      gets after it is answered Moved(B, v).
//   3. TakeOverRequest + the state to B: B installs the partition, with its
//      optimizer state and clocks, then takes what it held.
// A worker whose push or pull is answered Moved sends it again to the
// server named (comm/ps/kv_client.h), which routes the partition there from
// then on. The update is applied once: A refuses before applying, and a
// request reaches B either before the state (held) or after (applied to
// the moved values); no request is answered by both.
//
// Placement versions only grow: a Moved of a lower version than a route a
// worker already took is ignored there, and a server answers a move of a
// partition it gave away at a later version than the one asked with an
// error. Only the chief (worker rank 0) may ask for moves.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "comm/transport/messages.h"

namespace pstrain {

// Where the partitions a server gave away went; loop thread only.
class MovedPartitions {
 public:
  // The Moved answer for (tensor, part), or null when it was not moved away.
  const Moved* Find(const std::string& tensor, uint32_t part) const {
    auto it = moved_.find({tensor, part});
    return it == moved_.end() ? nullptr : &it->second;
  }
  void Record(const std::string& tensor, uint32_t part, Moved to) { moved_[{tensor, part}] = to; }
  // It came back (a later move to this server).
  void Forget(const std::string& tensor, uint32_t part) { moved_.erase({tensor, part}); }
  size_t size() const { return moved_.size(); }

 private:
  std::map<std::pair<std::string, uint32_t>, Moved> moved_;
};

}  // namespace pstrain

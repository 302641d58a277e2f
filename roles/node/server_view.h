// Where replicated partitions live (train.replication, roles/server/
// replication.h): the backups of each server, and the server that takes
// over a lost one's partitions. Pure functions of the live servers, which
// every node and the scheduler compute alike (ServerView,
// comm/transport/messages.h).
#pragma once

#include <vector>

namespace pstrain {

// The servers backing up server `primary`'s partitions: the `replicas`
// live servers after it, wrapping (fewer when fewer others are live).
// `live`: the live ranks, increasing.
std::vector<int> BackupsOf(int primary, const std::vector<int>& live, int replicas);
// The live servers whose partitions server `rank` backs up.
std::vector<int> PrimariesBackedUpBy(int rank, const std::vector<int>& live, int replicas);
// Ranks 0..servers-1: every server live.
std::vector<int> AllServers(int servers);
// The server that takes over what server `lost` held: the first of `live`
// after it, wrapping (its first backup). -1: none is live.
int HeirOf(int lost, const std::vector<int>& live);

}  // namespace pstrain

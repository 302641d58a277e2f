// Socket addresses: resolving host names and printing addresses.
#pragma once

#include <uv.h>

#include <functional>
#include <string>

#include "src/common/status.h"

namespace pstrain {

class EventLoop;  // comm/transport/event_loop.h

// Resolves `host` (an IP literal or a name) with `port`. IP literals resolve
// at once; names go through libuv's resolver off the loop thread. `done` runs
// on the loop thread. Loop thread only.
void ResolveAddress(EventLoop* loop, const std::string& host, uint16_t port,
                    std::function<void(StatusOr<sockaddr_storage>)> done);

// Blocking resolve, for start-up (binding a listener) only.
StatusOr<sockaddr_storage> ResolveAddressNow(const std::string& host, uint16_t port);

// The address of this host that packets to host:port leave from (the
// route's source address), found without sending anything: a UDP socket is
// connected, asked its name and closed. Blocking; for start-up only.
StatusOr<std::string> LocalAddressToward(const std::string& host, uint16_t port);

// Whether a listener could bind host:port now, as a listener binds
// (SO_REUSEADDR: connections of an earlier listener there left in TIME_WAIT
// do not count; another socket bound there does). A socket is bound and
// closed at once, so the answer may be stale by the time one listens.
bool CanListenOn(const std::string& host, uint16_t port);

std::string FormatIp(const sockaddr* addr);  // "127.0.0.1", "::1"
uint16_t PortOf(const sockaddr* addr);
std::string FormatAddress(const sockaddr* addr);  // "127.0.0.1:80", "[::1]:80"

}  // namespace pstrain

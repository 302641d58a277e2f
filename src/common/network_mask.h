// Networks in CIDR form ("10.1.0.0/16", "fd00::/8") and this host's
// addresses in them: a node told a network (PSTRAIN_NETWORK_MASK) advertises
// and listens on its address there, so a host with several cards needs no
// address of its own in its settings.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/common/status.h"

namespace pstrain {

struct NetworkMask {
  int family = 0;                   // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};  // the network address (4 bytes used for IPv4)
  int prefix_len = 0;               // 0 to 32 (IPv4) or 128 (IPv6)
  std::string text;                 // as given, for messages

  // Whether `ip` (an IPv4 or IPv6 literal) lies in this network; false for
  // text that is no address and for the other family.
  bool Contains(const std::string& ip) const;
};

// "address/prefix length", the address IPv4 or IPv6 and its bits past the
// prefix zero ("10.1.2.3/16" is a host, not a network); nullopt otherwise.
std::optional<NetworkMask> ParseNetworkMask(const std::string& text);

// One address of one of this host's interfaces.
struct InterfaceAddress {
  std::string interface;  // "eth0"
  std::string ip;         // "198.18.0.3"
};

// The IPv4 and IPv6 addresses of this host's interfaces that are up, in the
// kernel's order (getifaddrs), without IPv6 link-local ones (unusable
// without a scope).
std::vector<InterfaceAddress> LocalInterfaceAddresses();

// The first of `addresses` in `mask`. None: FailedPrecondition naming the
// mask and every address there is ("no interface has an address in
// 10.9.0.0/16; this host has 127.0.0.1 (lo), 198.18.0.3 (eth0)").
StatusOr<InterfaceAddress> AddressIn(const NetworkMask& mask,
                                     const std::vector<InterfaceAddress>& addresses);

}  // namespace pstrain

#include "src/common/network_mask.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace pstrain {
namespace {

// The bytes of an IPv4 or IPv6 literal and its family (0: neither).
int ParseIp(const std::string& ip, std::array<uint8_t, 16>* bytes) {
  if (inet_pton(AF_INET, ip.c_str(), bytes->data()) == 1) return AF_INET;
  if (inet_pton(AF_INET6, ip.c_str(), bytes->data()) == 1) return AF_INET6;
  return 0;
}

int AddressBits(int family) { return family == AF_INET ? 32 : 128; }

// Whether the first `bits` bits of a and b agree.
bool SamePrefix(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b, int bits) {
  const int whole = bits / 8;
  if (std::memcmp(a.data(), b.data(), whole) != 0) return false;
  if (bits % 8 == 0) return true;
  const uint8_t keep = static_cast<uint8_t>(0xff << (8 - bits % 8));
  return (a[whole] & keep) == (b[whole] & keep);
}

}  // namespace

bool NetworkMask::Contains(const std::string& ip) const {
  std::array<uint8_t, 16> addr{};
  return ParseIp(ip, &addr) == family && SamePrefix(addr, bytes, prefix_len);
}

std::optional<NetworkMask> ParseNetworkMask(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return std::nullopt;
  const std::string length = text.substr(slash + 1);
  NetworkMask mask;
  mask.text = text;
  mask.family = ParseIp(text.substr(0, slash), &mask.bytes);
  if (mask.family == 0 || length.empty() || length.size() > 3) return std::nullopt;
  for (char c : length)
    if (c < '0' || c > '9') return std::nullopt;
  mask.prefix_len = std::atoi(length.c_str());
  if (mask.prefix_len > AddressBits(mask.family)) return std::nullopt;
  // Bits past the prefix set: a host's address, not a network; saying so
  // beats silently widening a typo.
  std::array<uint8_t, 16> network{};
  const int whole = mask.prefix_len / 8;
  std::memcpy(network.data(), mask.bytes.data(), whole);
  if (mask.prefix_len % 8 != 0)
    network[whole] = mask.bytes[whole] & static_cast<uint8_t>(0xff << (8 - mask.prefix_len % 8));
  if (network != mask.bytes) return std::nullopt;
  return mask;
}

std::vector<InterfaceAddress> LocalInterfaceAddresses() {
  std::vector<InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0) continue;
    char ip[INET6_ADDRSTRLEN] = "";
    if (i->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, ip,
                sizeof(ip));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr;
      if (IN6_IS_ADDR_LINKLOCAL(&a)) continue;
      inet_ntop(AF_INET6, &a, ip, sizeof(ip));
    } else {
      continue;
    }
    out.push_back({i->ifa_name, ip});
  }
  freeifaddrs(list);
  return out;
}

StatusOr<InterfaceAddress> AddressIn(const NetworkMask& mask,
                                     const std::vector<InterfaceAddress>& addresses) {
  for (const InterfaceAddress& a : addresses)
    if (mask.Contains(a.ip)) return a;
  std::string have;
  for (const InterfaceAddress& a : addresses)
    have += fmt::format("{}{} ({})", have.empty() ? "" : ", ", a.ip, a.interface);
  return FailedPrecondition(
      fmt::format("no interface has an address in {}; this host has {}", mask.text,
                  have.empty() ? "no address on an interface that is up" : have));
}

}  // namespace pstrain

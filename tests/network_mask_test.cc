// Networks in CIDR form and the choice of this host's address in one
// (src/common/network_mask.h): what PSTRAIN_NETWORK_MASK accepts, which
// addresses lie in it, and what a node says when none of its own does.
#include "src/common/network_mask.h"

#include <doctest/doctest.h>

namespace pstrain {
namespace {

TEST_CASE("a network in CIDR form parses, IPv4 and IPv6") {
  for (auto [text, bits] : {std::pair{"10.1.0.0/16", 16},
                            {"198.18.0.0/15", 15},
                            {"0.0.0.0/0", 0},
                            {"192.168.7.1/32", 32},
                            {"fd00::/8", 8},
                            {"2001:db8::/32", 32},
                            {"::1/128", 128}}) {
    CAPTURE(text);
    auto mask = ParseNetworkMask(text);
    REQUIRE(mask.has_value());
    CHECK(mask->prefix_len == bits);
    CHECK(mask->text == text);
  }
}

TEST_CASE("anything else is refused") {
  for (const char* text : {"", "10.1.0.0", "10.1.0.0/", "/16", "10.1.0.0/33", "fd00::/129",
                           "10.1.0.0/-1", "10.1.0.0/1x", "10.1.0.0/ 16", "10.1.0/16",
                           "10.1.0.256/24", "ten/8", "eth0", "10.1.0.0/16/2", "10.1.0.0/0016",
                           // bits past the prefix: a host's address, not a network
                           "10.1.2.3/16", "198.18.0.1/15", "199.18.0.0/7", "fd00::1/64"}) {
    CAPTURE(text);
    CHECK_FALSE(ParseNetworkMask(text).has_value());
  }
}

TEST_CASE("an address lies in a network when its prefix bits agree") {
  auto mask = ParseNetworkMask("198.18.0.0/15");
  REQUIRE(mask.has_value());
  CHECK(mask->Contains("198.18.0.1"));
  CHECK(mask->Contains("198.19.255.254"));
  CHECK_FALSE(mask->Contains("198.20.0.1"));
  CHECK_FALSE(mask->Contains("198.17.255.255"));
  CHECK_FALSE(mask->Contains("127.0.0.1"));
  CHECK_FALSE(mask->Contains("::ffff:198.18.0.1"));  // the other family
  CHECK_FALSE(mask->Contains("not an address"));

  auto all = ParseNetworkMask("0.0.0.0/0");
  REQUIRE(all.has_value());
  CHECK(all->Contains("8.8.8.8"));
  CHECK_FALSE(all->Contains("::1"));

  auto v6 = ParseNetworkMask("fd00:ab::/33");
  REQUIRE(v6.has_value());
  CHECK(v6->Contains("fd00:ab:7fff::1"));
  CHECK_FALSE(v6->Contains("fd00:ab:8000::1"));
  CHECK_FALSE(v6->Contains("198.18.0.1"));
}

TEST_CASE("the first address in the network is chosen; none names the mask and every address") {
  const std::vector<InterfaceAddress> host = {{"lo", "127.0.0.1"},
                                              {"eth0", "192.168.1.20"},
                                              {"eth1", "198.18.0.3"},
                                              {"eth2", "198.18.4.9"},
                                              {"eth1", "fd00::3"}};
  auto chosen = AddressIn(*ParseNetworkMask("198.18.0.0/15"), host);
  REQUIRE(chosen.ok());
  CHECK(chosen->ip == "198.18.0.3");
  CHECK(chosen->interface == "eth1");
  CHECK(AddressIn(*ParseNetworkMask("fd00::/8"), host)->ip == "fd00::3");

  auto none = AddressIn(*ParseNetworkMask("10.9.0.0/16"), host);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == StatusCode::kFailedPrecondition);
  CHECK(none.status().message() ==
        "no interface has an address in 10.9.0.0/16; this host has 127.0.0.1 (lo), 192.168.1.20 "
        "(eth0), 198.18.0.3 (eth1), 198.18.4.9 (eth2), fd00::3 (eth1)");
  CHECK(AddressIn(*ParseNetworkMask("10.9.0.0/16"), {}).status().message() ==
        "no interface has an address in 10.9.0.0/16; this host has no address on an interface "
        "that is up");
}

TEST_CASE("this host's addresses include loopback") {
  // Every Linux network namespace has lo; a test machine has it up.
  bool loopback = false;
  for (const InterfaceAddress& a : LocalInterfaceAddresses()) {
    CHECK_FALSE(a.interface.empty());
    CHECK_FALSE(a.ip.empty());
    loopback = loopback || a.ip == "127.0.0.1";
  }
  CHECK(loopback);
}

}  // namespace
}  // namespace pstrain

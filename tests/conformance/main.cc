// The conformance suite's main: gtest plus the harness flags (harness.h).
// With --peer-role=NAME it is the peer process of a two-sided scenario.
#include <gtest/gtest.h>

#include <cstdlib>

#include "harness.h"
#include "msgr/base/log.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // The soft fabric's trace (level 20: every request, response, timer and
  // rewind) when chasing a rare failure; the peer process inherits it.
  if (const char* v = std::getenv("SIPHON_DEBUG_RDMA"); v != nullptr && *v != '\0')
    siphon::log::set_level(siphon::log::Subsys::rdma, std::atoi(v));
  if (!siphon::rdma::conformance::parse_flags(argc, argv)) return 2;
  if (!siphon::rdma::conformance::config().peer_role.empty())
    return siphon::rdma::conformance::run_peer_role();
  return RUN_ALL_TESTS();
}

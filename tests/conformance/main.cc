// The conformance suite's main: gtest plus the harness flags (harness.h).
// With --peer-role=NAME it is the peer process of a two-sided scenario.
#include <gtest/gtest.h>

#include "harness.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!siphon::rdma::conformance::parse_flags(argc, argv)) return 2;
  if (!siphon::rdma::conformance::config().peer_role.empty())
    return siphon::rdma::conformance::run_peer_role();
  return RUN_ALL_TESTS();
}

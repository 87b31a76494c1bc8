// siphon-bench rados: rados bench's workload (rados_bench.h) against a Ceph
// cluster through Siphon's OSD client (rados/client), with rados bench's
// argument order so a user swaps one word (docs/benchmarking.md):
//
//   siphon-bench rados [-c CONF] [-n NAME] [-k KEYRING] -p POOL SECONDS write|seq|rand
//                      [-t N] [-b SIZE] [-O SIZE] [--no-cleanup] [--run-name NAME] ...
//   siphon-bench rados [-c CONF] -p POOL cleanup [--run-name NAME]
#pragma once

#include <string>
#include <vector>

namespace siphon::bench {

// `args`: everything but the word "rados" (configuration flags included).
// Returns the exit status: 0; 1 on an error (printed); 2 on a usage error;
// 3 when data read back did not verify.
int run_rados(const std::vector<std::string>& args);

}  // namespace siphon::bench

// siphon-bench objd: drives a siphon-objd (tools/objd) with a put / stat /
// get / delete workload over the stack the configuration selects, and
// reports latency and throughput per phase (docs/benchmarking.md).
#pragma once

#include "tools/bench/engine.h"

namespace siphon::bench {

// --count objects (default 1000) of --size / --size-dist bytes, named
// "bench.<seed>.<pid>.<i>", spread over --conns connections with at most
// --inflight outstanding per connection: put each, stat each, get each
// back, delete each, then stat the first again (it must be gone). With
// --verify every get's data is checked against the crc32c and size of what
// was put (corrupted / lost counts, exit status 3).
RunOutcome run_objd(const RunSetup& s);

}  // namespace siphon::bench

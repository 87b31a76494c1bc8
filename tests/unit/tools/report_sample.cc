// Writes a synthetic siphon-bench result as JSON, SVG or a table, so the
// renderings can be checked without running a benchmark.
#include <iostream>
#include <string_view>

#include "tools/bench/report.h"

int main(int argc, char** argv) {
  using namespace siphon::bench;
  const std::string_view what = argc > 1 ? argv[1] : "json";
  Result r;
  r.mode = "loopback";
  r.pattern = "echo";
  r.ms_type = "async+posix";
  r.config = {{"size", "4K"}, {"conns", "1"}, {"note", "quote \" and \\ and \n"}};
  r.options = {{"ms_async_op_threads", "3"}};
  r.seconds = 2.0;
  r.messages = 1000;
  r.bytes = 1000 * 4096;
  r.client_cpu = {0.5, 0.25};
  r.server_cpu = {0.25, 0.125};
  for (std::uint64_t i = 1; i <= 1000; ++i) r.latency.record(10000 + i * 37);
  r.msgs_per_second = {480, 520};
  r.verify = argc > 2;
  r.verified.checked = 1000;
  if (r.verify) {  // the verify variant also carries the resource samples (tests/soak reads them)
    r.resources.present = true;
    r.resources.have_before = r.resources.have_after = true;
    r.resources.before = {-1, 5, 6000, {}};
    r.resources.per_second = {{1, 40, 12000, {{"qps_active", 4}, {"connections", 4}}},
                              {2, 40, 12100, {{"qps_active", 4}, {"connections", 4}}}};
    r.resources.after = {2, 30, 12100, {{"qps_active", 0}, {"connections", 0}}};
  }
  if (what == "json") write_json(std::cout, r);
  else if (what == "svg") write_svg(std::cout, r);
  else write_table(std::cout, r);
  return 0;
}

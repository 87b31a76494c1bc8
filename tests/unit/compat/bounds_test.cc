// One source of truth for the RDMA options' bounds: `siphon-conf --check`
// (Config::load with check_all_sections, as siphon-conf runs it) and the RDMA
// stack's start (RdmaStack's constructor, the check a programmatic caller
// meets) are fed the same table of values -- each just inside and just
// outside a bound, plus the rules between options -- and must refuse exactly
// the same ones. options.cc static_asserts that the schema's min/max are the
// stack's ranges (rdma/transport/options.h); this checks the behaviour,
// including the cross-option rules that no static_assert can see.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "compat/factory.h"
#include "messenger_conf_util.h"
#include "msgr/base/error.h"
#include "rdma/soft/soft_provider.h"
#include "rdma/transport/rdma_stack.h"

namespace siphon::compat {
namespace {

using Set = std::function<void(rdma::RdmaOptions&)>;

struct Row {
  std::string conf;  // lines added to the base configuration
  Set set;           // the same values, on RdmaOptions
  bool valid;        // what both must say
};

// One worker and small pools: the accepted rows start a real stack quickly.
constexpr const char* kBase =
    "[global]\nms type = async+rdma\nms async rdma device name = soft0\nms async op threads = 1\n";
constexpr unsigned kBaseLines = 4;

std::vector<Row> rows() {
  using O = rdma::RdmaOptions;
  std::vector<Row> r = {
      {"ms async rdma credits = 1\n", [](O& o) { o.credits = 1; }, false},
      {"ms async rdma credits = 2\n", [](O& o) { o.credits = 2; }, true},
      {"ms async rdma credits = 4096\n", [](O& o) { o.credits = 4096; }, true},
      {"ms async rdma credits = 4097\n", [](O& o) { o.credits = 4097; }, false},
      {"ms async rdma buffer size = 4095\n", [](O& o) { o.buffer_size = 4095; }, false},
      {"ms async rdma buffer size = 4K\n", [](O& o) { o.buffer_size = 4096; }, true},
      {"ms async rdma buffer size = 16M\n", [](O& o) { o.buffer_size = 16u << 20; }, true},
      {"ms async rdma buffer size = 16777217\n", [](O& o) { o.buffer_size = (16u << 20) + 1; }, false},
      {"ms async rdma roce ver = 0\n", [](O& o) { o.roce_ver = 0; }, false},
      {"ms async rdma roce ver = 1\n", [](O& o) { o.roce_ver = 1; }, true},
      {"ms async rdma roce ver = 2\n", [](O& o) { o.roce_ver = 2; }, false},
      {"ms async rdma receive buffers = 0\n", [](O& o) { o.receive_buffers = 0; }, false},
      // One connection's receive set is credits (16) + 2 update slots.
      {"ms async rdma receive buffers = 17\n", [](O& o) { o.receive_buffers = 17; }, false},
      {"ms async rdma receive buffers = 18\n", [](O& o) { o.receive_buffers = 18; }, true},
      {"ms async rdma receive queue len = 0\n", [](O& o) { o.receive_queue_len = 0; }, false},
      // Without an SRQ the receive queue length is not used.
      {"ms async rdma receive queue len = 1\n", [](O& o) { o.receive_queue_len = 1; }, true},
      {"ms async rdma send buffers = 0\n", [](O& o) { o.send_buffers = 0; }, false},
      {"ms async rdma port num = 0\n", [](O& o) { o.port_num = 0; }, false},
      {"ms async rdma sl = 15\n", [](O& o) { o.sl = 15; }, true},
      {"ms async rdma sl = 16\n", [](O& o) { o.sl = 16; }, false},
      {"ms async rdma send queue depth = 1\n", [](O& o) { o.send_queue_depth = 1; }, false},
      {"ms async rdma send queue depth = 65536\n", [](O& o) { o.send_queue_depth = 65536; }, true},
      {"ms async rdma send queue depth = 65537\n", [](O& o) { o.send_queue_depth = 65537; }, false},
      {"ms async rdma cq depth = 16777217\n", [](O& o) { o.cq_depth = 16777217; }, false},
      {"ms async rdma rnr retry = 8\n", [](O& o) { o.rnr_retry = 8; }, false},
      {"ms async rdma retry count = 8\n", [](O& o) { o.retry_count = 8; }, false},
      {"ms async rdma timeout = 0\n", [](O& o) { o.ack_timeout = 0; }, false},
      {"ms async rdma timeout = 31\n", [](O& o) { o.ack_timeout = 31; }, true},
      {"ms async rdma timeout = 32\n", [](O& o) { o.ack_timeout = 32; }, false},
      {"ms async rdma cm timeout = 0\n", [](O& o) { o.cm_timeout = std::chrono::milliseconds(0); }, false},
      {"ms async rdma cm timeout = 600001\n", [](O& o) { o.cm_timeout = std::chrono::milliseconds(600001); },
       false},
      {"ms async rdma max connections = 0\n", [](O& o) { o.max_connections = 0; }, false},
      {"ms async op threads = 0\n", [](O& o) { o.common.async_op_threads = 0; }, false},
  };
  // With an SRQ (set explicitly): the queue backs one connection (credits +
  // 2), and the pool fills every worker's queue with room left over.
  const auto srq = [](std::uint64_t len, std::uint64_t bufs) {
    return Row{"ms async rdma buffer size = 4K\nms async rdma support srq = true\n"
               "ms async rdma receive queue len = " + std::to_string(len) +
                   "\nms async rdma receive buffers = " + std::to_string(bufs) + "\n",
               [len, bufs](O& o) {
                 o.buffer_size = 4096;
                 o.support_srq = true;
                 o.receive_queue_len = len;
                 o.receive_buffers = bufs;
               },
               len >= 18 && bufs > len};
  };
  for (const auto& [len, bufs] : {std::pair{17, 100}, {18, 100}, {18, 18}, {18, 19}, {64, 64}, {64, 65}})
    r.push_back(srq(static_cast<std::uint64_t>(len), static_cast<std::uint64_t>(bufs)));
  return r;
}

// siphon-conf --check's verdict; on a refusal, the error names the file, a
// line of the row and an option the row sets.
bool check_accepts(const Row& row, std::string& why) {
  Diagnostics diags;
  ConfigRequest req;
  req.check_all_sections = true;
  (void)Config::load_text(std::string(kBase) + row.conf, "bounds.conf", req, diags);
  why = diags.to_string(Severity::error);
  if (!diags.has_errors()) return true;
  bool located = false;
  for (const Diagnostic& d : diags.all()) {
    if (d.severity != Severity::error) continue;
    located = located || (d.where.file == "bounds.conf" && d.where.line > kBaseLines);
  }
  EXPECT_TRUE(located) << "the error should name bounds.conf and the line: " << why;
  return false;
}

// The stack's verdict for the same values.
bool stack_accepts(const Row& row, std::string& why) {
  rdma::RdmaOptions o = rdma_options(test::load(kBase));
  row.set(o);
  auto provider = rdma::soft::make_provider();
  try {
    rdma::RdmaStack stack(*provider, o);
    stack.start();
    stack.stop();
    return true;
  } catch (const SetupError& e) {
    why = e.what();
    EXPECT_EQ(e.code(), make_error_code(errc::config_error)) << why;
    return false;
  }
}

TEST(Bounds, CheckAndStackRefuseTheSameValues) {
  int refused = 0;
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.conf);
    std::string check_why, stack_why;
    const bool check_ok = check_accepts(row, check_why);
    const bool stack_ok = stack_accepts(row, stack_why);
    EXPECT_EQ(check_ok, stack_ok) << "siphon-conf --check " << (check_ok ? "accepts" : "refuses")
                                  << " it, the stack " << (stack_ok ? "accepts" : "refuses")
                                  << " it\n  check: " << check_why << "\n  stack: " << stack_why;
    EXPECT_EQ(check_ok, row.valid) << check_why;
    EXPECT_EQ(stack_ok, row.valid) << stack_why;
    if (!stack_ok) {
      EXPECT_NE(stack_why.find("ms_async"), std::string::npos) << "names the option: " << stack_why;
    }
    refused += check_ok ? 0 : 1;
  }
  EXPECT_GT(refused, 10);
}

}  // namespace
}  // namespace siphon::compat

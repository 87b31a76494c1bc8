// siphon-doctor's pure parts: the kernel's RoCE MTU rule, CPU lists, the
// pinned-memory formula the stack sizes its pools with, the verbs provider's
// device choice, exit status and JSON. The tool end to end over captured
// trees is doctor_test.py.
#include <gtest/gtest.h>

#include "rdma/transport/buffer_pool.h"
#include "rdma/transport/pinned.h"
#include "rdma/verbs/verbs_provider.h"
#include "tools/doctor/checks.h"
#include "tools/doctor/facts.h"
#include "tools/doctor/report.h"

namespace siphon::doctor {
namespace {

TEST(DoctorFacts, RoceActiveMtuFollowsTheNetdevMtuLikeTheKernel) {
  // The rxe0 capture: netdev MTU 4500 gives 4096, 1500 gives 1024.
  EXPECT_EQ(roce_active_mtu(4500), rdma::Mtu::mtu4096);
  EXPECT_EQ(roce_active_mtu(1500), rdma::Mtu::mtu1024);
  EXPECT_EQ(roce_active_mtu(9000), rdma::Mtu::mtu4096);
  EXPECT_EQ(roce_active_mtu(4183), rdma::Mtu::mtu2048);  // 4096 + 88 headers do not fit
  EXPECT_EQ(roce_active_mtu(4184), rdma::Mtu::mtu4096);
  EXPECT_EQ(roce_active_mtu(300), std::nullopt);
}

TEST(DoctorFacts, CpuListsAndSysfsGids) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), (std::vector<unsigned>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("x,2"), (std::vector<unsigned>{2}));
  EXPECT_TRUE(parse_cpu_list("").empty());
  const auto g = parse_sysfs_gid("0000:0000:0000:0000:0000:ffff:c000:0201");
  ASSERT_TRUE(g);
  EXPECT_EQ(rdma::verbs::format_gid(*g), "::ffff:192.0.2.1");
  EXPECT_FALSE(parse_sysfs_gid("not a gid"));
}

TEST(DoctorFacts, AMissingTreeIsNoDeviceNotAFailure) {
  const Facts f = read_facts(Roots{"/nonexistent/sys", "/nonexistent/proc", "/nonexistent/dev"});
  EXPECT_TRUE(f.devices.empty());
  EXPECT_FALSE(f.host.dev_dir_exists);
  EXPECT_FALSE(f.host.modules_known);
}

TEST(DoctorMemlock, TheStacksFormulaWithCephDefaults) {
  rdma::RdmaOptions o;  // 128 KiB buffers, 1024 send, 32768 receive, 16 credits
  const rdma::PinnedMemory p = rdma::pinned_memory(o);
  EXPECT_EQ(p.send_pool, 128ull << 20);
  EXPECT_EQ(p.receive_pool, 4ull << 30);
  EXPECT_EQ(p.per_connection, 18ull * 128 * 1024);
  EXPECT_EQ(p.srq_at_start, 0u);
  EXPECT_EQ(memlock_need(o), (128ull << 20) + (4ull << 30));
  o.support_srq = true;
  EXPECT_EQ(rdma::pinned_memory(o).srq_at_start, 3ull * 4096 * 128 * 1024);
}

TEST(DoctorMemlock, SlabsAreRoundedLikeThePools) {
  rdma::RdmaOptions o;
  o.buffer_size = 4096;
  o.send_buffers = 16;
  o.receive_buffers = 64;
  EXPECT_EQ(memlock_need(o), (16u + 64u) * 4096u);
  // Hugepages: a receive slab is one connection's set (18 x 4 KiB) rounded to
  // 2 MiB, which holds 512 buffers: 64 receive buffers take one 2 MiB slab,
  // and 16 send buffers another.
  o.enable_hugepage = true;
  EXPECT_EQ(rdma::pool_geometry(o).recv_per_slab, 512u);
  EXPECT_EQ(memlock_need(o), 2u * (2u << 20));
  // A buffer size that is not a multiple of 64 is rounded up, as BufferPool does.
  EXPECT_EQ(rdma::pool_bytes(4097, 1, 1, false), 8192u);
}

// The formula is what a pool registers: pools built with pool_geometry(),
// as RdmaStack builds them, filled to their caps.
class CountingRegistrar final : public rdma::Registrar {
 public:
  std::error_code register_region(void*, std::size_t, RegionKeys& keys) override {
    keys.lkey = keys.rkey = ++next_;
    return {};
  }
  void deregister_region(const RegionKeys&) noexcept override {}

 private:
  std::uint32_t next_ = 0;
};

std::size_t fill(rdma::BufferPool& pool) {
  std::vector<rdma::PoolBuffer*> held;
  while (rdma::PoolBuffer* b = pool.get()) held.push_back(b);
  for (auto* b : held) pool.put(b);
  return pool.registered_bytes();
}

TEST(DoctorMemlock, TheFormulaIsWhatFullPoolsRegister) {
  for (const std::size_t buffer : {std::size_t{4096}, std::size_t{5000}, std::size_t{131072}}) {
    rdma::RdmaOptions o;
    o.buffer_size = buffer;
    o.send_buffers = 70;
    o.receive_buffers = 100;  // 5 receive sets of 18 and a rest of 10
    o.credits = 16;
    const rdma::PoolGeometry g = rdma::pool_geometry(o);
    const rdma::PinnedMemory p = rdma::pinned_memory(o);
    CountingRegistrar reg;
    rdma::BufferPool send({"send", o.buffer_size, o.send_buffers, g.send_per_slab, 16, false}, reg);
    rdma::BufferPool recv({"recv", o.buffer_size, o.receive_buffers, g.recv_per_slab, 16, false}, reg);
    EXPECT_EQ(fill(send), p.send_pool) << "buffer_size " << buffer;
    EXPECT_EQ(fill(recv), p.receive_pool) << "buffer_size " << buffer;
  }
}

TEST(DoctorSelection, TheProvidersDeviceChoice) {
  const std::vector<std::string> two = {"mlx5_0", "mlx5_1"};
  EXPECT_EQ(rdma::verbs::choose_device("", two), "mlx5_0");
  EXPECT_EQ(rdma::verbs::choose_device("mlx5_1", two), "mlx5_1");
  EXPECT_EQ(rdma::verbs::choose_device("mlx5_9", two), std::nullopt);
  EXPECT_EQ(rdma::verbs::choose_device("", {}), std::nullopt);
  // The listing order does not matter: the name that sorts first wins.
  const std::vector<std::string> unsorted = {"rxe1", "mlx5_1", "rxe0"};
  EXPECT_EQ(rdma::verbs::choose_device("", unsorted), "mlx5_1");
}

TEST(DoctorReport, ExitStatusAndJson) {
  std::vector<Check> checks(2);
  checks[0].name = "numa";
  checks[0].status = Status::cannot_tell;
  checks[1].name = "gid";
  checks[1].summary = "a \"quoted\"\nline";
  EXPECT_EQ(exit_status(checks), 0);  // cannot tell is information
  checks[1].status = Status::warning;
  EXPECT_EQ(exit_status(checks), 1);
  checks[0].status = Status::error;
  EXPECT_EQ(exit_status(checks), 2);
  const std::string j = render_json(checks);
  EXPECT_NE(j.find("\"status\":2"), std::string::npos);
  EXPECT_NE(j.find("a \\\"quoted\\\"\\nline"), std::string::npos);
  const std::string t = render_text(checks, false);
  EXPECT_LT(t.find("ERROR"), t.find("WARN"));  // problems first, errors before warnings
}

}  // namespace
}  // namespace siphon::doctor

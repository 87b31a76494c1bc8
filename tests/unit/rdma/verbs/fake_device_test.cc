// The verbs provider against a fake device on a host without RDMA, run by
// fake_device.sh (a fake sysfs and a private /dev in a mount namespace):
// covers discovery with a device present, "not found" with others present,
// opening through librdmacm and through the ibv_open_device fallback, and
// closing. The fake device's uverbs0 is the null device: every command
// "succeeds" and no response is ever written, so the attributes the provider
// sees are whatever rdma-core's stack buffers held (zeros in one build,
// anything in another). The tests ask only what does not depend on them;
// everything past opening is the rxe guest's job.
#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/verbs/verbs_provider.h"

namespace siphon::rdma::verbs {
namespace {

std::mutex log_mutex;
std::vector<std::string> log_lines;

void capture(log::Subsys, int, std::string_view line) noexcept {
  std::lock_guard<std::mutex> lock(log_mutex);
  log_lines.emplace_back(line);
}

bool logged(const std::string& text) {
  std::lock_guard<std::mutex> lock(log_mutex);
  for (const auto& l : log_lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

class VerbsFakeDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("SIPHON_VERBS_FAKE_SYSFS") == nullptr)
      GTEST_SKIP() << "run by fake_device.sh (fake sysfs in a private mount namespace)";
    cm = std::getenv("SIPHON_VERBS_FAKE_CM");
    level = log::level(log::Subsys::rdma);
    log::set_level(log::Subsys::rdma, 5);
    log::set_sink(&capture);
  }
  void TearDown() override {
    log::set_sink(nullptr);
    log::set_level(log::Subsys::rdma, level);
  }
  std::string cm;
  int level = 1;
};

TEST_F(VerbsFakeDevice, ListsOpensAndReportsMissingDevices) {
  auto provider = make_provider();
  const auto names = provider->list_devices();
  ASSERT_EQ(names, std::vector<std::string>{"rxe0"});

  std::error_code ec;
  EXPECT_EQ(provider->open_device("mlx5_0", ec), nullptr);
  EXPECT_EQ(ec, errc::device_not_found);
  EXPECT_EQ(describe_open_failure("mlx5_0", names, ec),
            "RDMA device 'mlx5_0' not found (devices present: rxe0): set "
            "ms_async_rdma_device_name to one of the devices present, or to soft0 to use the "
            "software fabric");

  auto dev = provider->open_device("rxe0", ec);
  ASSERT_NE(dev, nullptr) << ec.message();
  EXPECT_FALSE(ec);
  EXPECT_EQ(dev->attr().name, "rxe0");
  if (cm == "unsupported") {
    EXPECT_TRUE(logged("opened rxe0 with ibv_open_device"));
    EXPECT_TRUE(logged("rdma_cm is not available"));
  } else {
    EXPECT_TRUE(logged("opened rxe0 through librdmacm"));
  }
  // Port 0 exists on no device: refused before any command is sent, so the
  // answer does not depend on the unwritten responses. (What port 1 returns
  // does: the count of ports is itself an unwritten response here. The
  // refusal of a device that reports no ports, and of answers no device
  // gives, is tested device-free in mapping_test.cc.)
  PortAttr pa;
  EXPECT_EQ(dev->query_port(0, pa), errc::invalid_argument);
  // Whatever the unwritten answers hold, acting on them must neither crash
  // nor hang (under ASan and TSan too): a count of 255 ports once made
  // query_gids loop forever on an 8-bit port counter. The results are not
  // asserted: they are not the device's.
  std::vector<GidEntry> gids;
  (void)dev->query_port(1, pa);
  (void)dev->query_gids(1, gids);
  dev.reset();  // closes an owned context; librdmacm's stays open

  // An empty name is Ceph's "first device".
  auto first = provider->open_device("", ec);
  ASSERT_NE(first, nullptr) << ec.message();
  EXPECT_EQ(first->attr().name, "rxe0");
}

TEST_F(VerbsFakeDevice, NoRdmaCmMeansNoEventChannel) {
  auto provider = make_provider();
  std::error_code ec;
  EXPECT_EQ(provider->create_event_channel(ec), nullptr);
  EXPECT_EQ(ec, errc::not_supported);
  EXPECT_TRUE(logged("rdma_cm is not available (rdma_create_event_channel"));
}

}  // namespace
}  // namespace siphon::rdma::verbs

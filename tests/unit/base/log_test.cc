#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "msgr/base/log.h"

namespace siphon {
namespace {

std::mutex g_mu;
std::vector<std::string> g_lines;

void capture(log::Subsys, int, std::string_view line) noexcept {
  std::lock_guard lk(g_mu);
  g_lines.emplace_back(line);
}

struct LogTest : ::testing::Test {
  void SetUp() override {
    g_lines.clear();
    log::set_sink(&capture);
  }
  void TearDown() override {
    log::set_sink(nullptr);
    log::set_level(log::Subsys::ms, log::kDefaultLevel);
  }
};

int g_evaluated = 0;
int side_effect() { return ++g_evaluated; }

TEST_F(LogTest, LevelsFilterAndArgumentsAreNotEvaluatedWhenOff) {
  log::set_level(log::Subsys::ms, 1);
  SIPHON_LOG(ms, 1, "fault on {}: {}", "conn-1", 42);
  SIPHON_LOG(ms, 5, "debug {}", side_effect());
  ASSERT_EQ(g_lines.size(), 1u);
  EXPECT_NE(g_lines[0].find(" ms: fault on conn-1: 42\n"), std::string::npos) << g_lines[0];
  EXPECT_EQ(g_evaluated, 0);
  log::set_level(log::Subsys::ms, 5);
  SIPHON_LOG(ms, 5, "debug {}", side_effect());
  EXPECT_EQ(g_lines.size(), 2u);
  EXPECT_EQ(g_evaluated, 1);
}

TEST_F(LogTest, TraceFollowsBuildType) {
  log::set_level(log::Subsys::ms, log::kTrace);
  SIPHON_TRACE(ms, "trace {}", 1);
#ifdef NDEBUG
  EXPECT_TRUE(g_lines.empty());
#else
  EXPECT_EQ(g_lines.size(), 1u);
#endif
}

TEST_F(LogTest, SubsystemNames) {
  EXPECT_EQ(log::from_name("rdma"), log::Subsys::rdma);
  EXPECT_EQ(log::name(log::Subsys::session), "session");
  EXPECT_FALSE(log::from_name("nope").has_value());
}

}  // namespace
}  // namespace siphon

// siphon-bench's workload flags (tools/bench/cli.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/bench/cli.h"

namespace siphon::bench {
namespace {

std::optional<BenchArgs> parse(Mode m, std::vector<std::string> args, std::string* err = nullptr) {
  std::string e;
  auto r = parse_bench_args(m, args, e);
  if (err != nullptr) *err = e;
  return r;
}

std::string error_of(Mode m, std::vector<std::string> args) {
  std::string e;
  EXPECT_FALSE(parse(m, std::move(args), &e));
  return e;
}

TEST(BenchCli, Defaults) {
  auto a = parse(Mode::loopback, {});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->conns, 1u);
  EXPECT_EQ(a->threads, 1u);
  EXPECT_EQ(a->inflight, 16u);
  EXPECT_EQ(a->size_spec, "4K");
  EXPECT_FALSE(a->count);
  EXPECT_EQ(a->duration, 4);
  EXPECT_EQ(a->warmup, 1);
  EXPECT_EQ(a->pattern, Pattern::echo);
  EXPECT_EQ(a->rate, 0);
  EXPECT_FALSE(a->verify);
  auto s = parse(Mode::server, {});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->duration, 0) << "a server runs until stopped";
}

TEST(BenchCli, EveryFlagBothSpellings) {
  auto a = parse(Mode::client,
                 {"--target", "192.0.2.1:6800", "--conns=8", "--threads", "2", "--inflight", "4", "--size-dist",
                  "1K-64K", "--duration", "2.5", "--warmup=0", "--think-us", "10", "--pattern", "sink", "--rate",
                  "1000", "--verify", "--policy", "lossy", "--dispatch", "queue", "--json", "-", "--plot", "x.svg",
                  "--quiet", "--connect-timeout", "3", "--drain-timeout", "4", "--seed", "9",
                  "--inject-corruption-every", "50"});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->target, "192.0.2.1:6800");
  EXPECT_EQ(a->conns, 8u);
  EXPECT_EQ(a->threads, 2u);
  EXPECT_EQ(a->inflight, 4u);
  EXPECT_EQ(a->size_spec, "1K-64K");
  EXPECT_EQ(a->sizes.min(), 1024u);
  EXPECT_EQ(a->sizes.max(), 65536u);
  EXPECT_EQ(a->duration, 2.5);
  EXPECT_EQ(a->warmup, 0);
  EXPECT_EQ(a->think_us, 10u);
  EXPECT_EQ(a->pattern, Pattern::sink);
  EXPECT_EQ(a->rate, 1000);
  EXPECT_TRUE(a->verify);
  EXPECT_TRUE(a->lossy);
  EXPECT_TRUE(a->queue_dispatch);
  EXPECT_EQ(a->json, "-");
  EXPECT_EQ(a->plot, "x.svg");
  EXPECT_TRUE(a->quiet);
  EXPECT_EQ(a->connect_timeout, 3);
  EXPECT_EQ(a->drain_timeout, 4);
  EXPECT_EQ(a->seed, 9u);
  EXPECT_EQ(a->inject_corruption_every, 50u);
  auto b = parse(Mode::compare, {"--ms-types", "async+posix,async+rdma", "--count", "100", "--size", "64K"});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->ms_types, (std::vector<std::string>{"async+posix", "async+rdma"}));
  EXPECT_EQ(*b->count, 100u);
  EXPECT_EQ(b->size_spec, "64K");
  auto s = parse(Mode::server, {"--bind", "0.0.0.0:6800", "--once", "--duration", "30"});
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->once);
  EXPECT_EQ(s->bind, "0.0.0.0:6800");
}

TEST(BenchCli, OpenLoopRaisesTheDefaultCap) {
  EXPECT_EQ(parse(Mode::loopback, {"--rate", "100"})->inflight, 1024u);
  EXPECT_EQ(parse(Mode::loopback, {"--rate", "100", "--inflight", "8"})->inflight, 8u);
}

TEST(BenchCli, ErrorsNameTheFlag) {
  EXPECT_EQ(error_of(Mode::loopback, {"--bogus"}), "unknown flag '--bogus'");
  EXPECT_EQ(error_of(Mode::loopback, {"stray"}), "unexpected argument 'stray'");
  EXPECT_EQ(error_of(Mode::loopback, {"--conns"}), "--conns needs a value");
  EXPECT_EQ(error_of(Mode::loopback, {"--conns", "--verify"}), "--conns needs a value");
  EXPECT_EQ(error_of(Mode::loopback, {"--conns", "x"}), "--conns expects a whole number from 1 to 1024, got 'x'");
  EXPECT_EQ(error_of(Mode::loopback, {"--inflight", "0"}), "--inflight expects a whole number from 1 to 1000000, got '0'");
  EXPECT_EQ(error_of(Mode::loopback, {"--verify=1"}), "--verify takes no value");
  EXPECT_NE(error_of(Mode::loopback, {"--duration", "-1"}).find("--duration expects"), std::string::npos);
  EXPECT_NE(error_of(Mode::loopback, {"--duration", "nan"}).find("--duration expects"), std::string::npos);
  EXPECT_NE(error_of(Mode::loopback, {"--size-dist", "2K-1K"}).find("empty range"), std::string::npos);
  EXPECT_NE(error_of(Mode::compare, {"--ms-types", "a,,b"}).find("empty entry"), std::string::npos);
  EXPECT_NE(error_of(Mode::compare, {"--ms-types", "a,"}).find("empty entry"), std::string::npos);
}

TEST(BenchCli, FlagsBelongToModes) {
  EXPECT_NE(error_of(Mode::server, {"--size", "4K"}).find("--size does not apply to server mode"), std::string::npos);
  EXPECT_NE(error_of(Mode::server, {"--target", "x"}).find("does not apply"), std::string::npos);
  EXPECT_NE(error_of(Mode::client, {"--target", "a:1", "--bind", "x"}).find("--bind does not apply to client"),
            std::string::npos);
  EXPECT_NE(error_of(Mode::loopback, {"--once"}).find("--once does not apply"), std::string::npos);
  EXPECT_NE(error_of(Mode::loopback, {"--ms-types", "async+posix"}).find("does not apply"), std::string::npos);
  EXPECT_NE(error_of(Mode::compare, {"--ms-types", "async+posix", "--plot", "x.svg"}).find("does not apply"),
            std::string::npos);
}

TEST(BenchCli, Combinations) {
  EXPECT_EQ(error_of(Mode::loopback, {"--size", "1K", "--size-dist", "1K-2K"}), "--size and --size-dist exclude each other");
  EXPECT_NE(error_of(Mode::loopback, {"--count", "1", "--duration", "1"}).find("exclude each other"), std::string::npos);
  EXPECT_NE(error_of(Mode::loopback, {"--count", "1", "--warmup", "1"}).find("--warmup applies"), std::string::npos);
  EXPECT_NE(error_of(Mode::client, {}).find("needs --target"), std::string::npos);
  EXPECT_NE(error_of(Mode::compare, {}).find("needs --ms-types"), std::string::npos);
  EXPECT_NE(error_of(Mode::loopback, {"--conns", "2", "--threads", "3"}).find("--threads 3 exceeds --conns 2"),
            std::string::npos);
  EXPECT_NE(error_of(Mode::loopback, {"--inject-corruption-every", "2"}).find("needs --verify"), std::string::npos);
  EXPECT_NE(error_of(Mode::loopback, {"--verify", "--inject-corruption-every", "2", "--size-dist", "0-4K"})
                .find("must be >= 1"),
            std::string::npos);
  EXPECT_NE(error_of(Mode::loopback, {"--size", "5G"}).find("4G-1"), std::string::npos);
}

TEST(BenchCli, ModesAndUsage) {
  EXPECT_EQ(parse_mode("loopback"), Mode::loopback);
  EXPECT_EQ(parse_mode("compare"), Mode::compare);
  EXPECT_FALSE(parse_mode("Loopback"));
  const std::string u = usage();
  for (const char* flag : {"--conf", "--name", "--ms-type", "--set", "--target", "--bind", "--conns", "--threads",
                           "--inflight", "--size", "--size-dist", "--count", "--duration", "--warmup", "--think-us",
                           "--pattern", "--rate", "--verify", "--json", "--plot", "--quiet", "--ms-types", "--once"})
    EXPECT_NE(u.find(flag), std::string::npos) << flag;
  EXPECT_EQ(u.find("--inject-corruption-every"), std::string::npos) << "the test hook stays out of --help";
}

}  // namespace
}  // namespace siphon::bench

#include "compat/ms_type.h"

#include <gtest/gtest.h>

namespace siphon::compat {
namespace {

MsType ok(std::string_view text) {
  std::string error;
  const auto t = parse_ms_type(text, error);
  EXPECT_TRUE(t.has_value()) << text << ": " << error;
  return t.value_or(MsType{});
}

std::string bad(std::string_view text) {
  std::string error;
  EXPECT_FALSE(parse_ms_type(text, error).has_value()) << text;
  EXPECT_NE(error.find("accepted: async+posix (TCP), async+rdma"), std::string::npos) << error;
  return error;
}

TEST(MsType, CephsForms) {
  EXPECT_EQ(ok("async+posix"), (MsType{MsType::Stack::posix, "posix"}));
  EXPECT_EQ(ok("async"), (MsType{MsType::Stack::posix, "posix"}));
  EXPECT_EQ(ok("async+rdma"), (MsType{MsType::Stack::rdma, "rdma"}));
  EXPECT_EQ(ok("async+rdma").to_string(), "async+rdma");
  EXPECT_EQ(ok("async").to_string(), "async+posix");
  const MsType plugin = ok("async+ucx");
  EXPECT_EQ(plugin.stack, MsType::Stack::plugin);
  EXPECT_EQ(plugin.name, "ucx");
  EXPECT_EQ(ok("async+my_stack-2").name, "my_stack-2");
}

TEST(MsType, RejectsWithAGuess) {
  EXPECT_NE(bad("Async+RDMA").find("did you mean 'async+rdma'? (ms_type is case-sensitive)"), std::string::npos);
  EXPECT_NE(bad("rdma").find("did you mean 'async+rdma'?"), std::string::npos);
  EXPECT_NE(bad("async + rdma").find("did you mean 'async+rdma'?"), std::string::npos);
  EXPECT_NE(bad("async+posix+rdma").find("Ceph would pick RDMA"), std::string::npos);
  EXPECT_NE(bad("async+rdma2").find("did you mean 'async+rdma'?"), std::string::npos);
  EXPECT_NE(bad("posix").find("did you mean 'async+posix'?"), std::string::npos);
  EXPECT_NE(bad("tcp").find("did you mean 'async+posix'?"), std::string::npos);
  EXPECT_NE(bad("async+dpdk").find("no DPDK stack"), std::string::npos);
  EXPECT_NE(bad("simple").find("removed from Ceph"), std::string::npos);
  EXPECT_NE(bad("random").find("test-only"), std::string::npos);
  for (auto t : {"", "async+", "async+Bad", "async+a b", "xio+rdma", "async+posix ", " async"}) bad(t);
}

TEST(MsType, PublicAndClusterOverrideMsType) {
  std::string error;
  auto t = resolve_ms_types("async+posix", "", "", error);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->public_type.stack, MsType::Stack::posix);
  EXPECT_EQ(t->cluster_type.stack, MsType::Stack::posix);
  t = resolve_ms_types("async+posix", "", "async+rdma", error);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->public_type.stack, MsType::Stack::posix);
  EXPECT_EQ(t->cluster_type.stack, MsType::Stack::rdma);
  t = resolve_ms_types("async+rdma", "async", "", error);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->public_type.stack, MsType::Stack::posix);
  EXPECT_EQ(t->cluster_type.stack, MsType::Stack::rdma);
  EXPECT_FALSE(resolve_ms_types("async", "async+rdmaa", "", error));
  EXPECT_EQ(error.substr(0, 16), "ms_public_type: ");
  EXPECT_FALSE(resolve_ms_types("bogus", "", "", error));
  EXPECT_EQ(error.substr(0, 9), "ms_type: ");
  EXPECT_FALSE(resolve_ms_types("async", "", "nope", error));
  EXPECT_EQ(error.substr(0, 17), "ms_cluster_type: ");
}

TEST(MsType, RdmaTypeHints) {
  EXPECT_NE(rdma_type_error("mlx5_0").find("use ms_async_rdma_device_name = mlx5_0"), std::string::npos);
  EXPECT_NE(rdma_type_error("rxe0").find("use ms_async_rdma_device_name = rxe0"), std::string::npos);
  EXPECT_NE(rdma_type_error("soft0").find("Ceph would silently treat 'soft0' as ib"), std::string::npos);
  EXPECT_NE(rdma_type_error("IB").find("lowercase"), std::string::npos);
  EXPECT_NE(rdma_type_error("rocev2").find("RoCE and InfiniBand are both 'ib'"), std::string::npos);
  EXPECT_NE(rdma_type_error("ethernet").find("accepted: ib (InfiniBand and RoCE), iwarp"), std::string::npos);
}

}  // namespace
}  // namespace siphon::compat

// Stack plugins: ms_type = async+<name> loads libsiphon-stack-<name>.so from
// ms_stack_plugin_dir; a messenger runs on the plugin's stack end to end; a
// plugin for another ABI version, a missing plugin, a file that is not a
// shared library and a library that is not a plugin are refused with errors
// naming the file and the cause, never a crash.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <cstring>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

#include "compat/factory.h"
#include "messenger_conf_util.h"
#include "compat/stack_plugins.h"
#include "msgr/base/error.h"
#include "msgr/transport/stack_plugin.h"
#include "msgr/transport/transport.h"

#ifndef SIPHON_TEST_PLUGIN_DIR
#error "SIPHON_TEST_PLUGIN_DIR must name the build tree's plugin directory"
#endif

namespace siphon::compat {
namespace {

namespace fs = std::filesystem;

using test::ConfPair;
using test::load;

std::string conf(const std::string& type, const std::string& dir = SIPHON_TEST_PLUGIN_DIR) {
  return "[global]\nms type = " + type + "\nms stack plugin dir = " + dir + "\nms async op threads = 2\n";
}

// The SetupError create_stack throws for `text`.
std::string setup_error(const std::string& text) {
  try {
    create_stack(load(text), Purpose::public_network);
  } catch (const SetupError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

TEST(StackPlugin, LoadsFromTheConfiguredDirectory) {
  EXPECT_EQ(stack_plugin_path("/x/y", "abc"), "/x/y/libsiphon-stack-abc.so");
  EXPECT_EQ(stack_plugin_dir(load("")), default_stack_plugin_dir()) << "empty means the compiled-in directory";
  auto s = create_stack(load(conf("async+tcpplugin")), Purpose::public_network);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->type(), "async+tcpplugin") << "the plugin's stack, not the built-in TCP stack";
  EXPECT_EQ(s->worker_count(), 2u) << "the typed options reach the plugin";
  bool listed = false;
  for (const auto& n : StackRegistry::instance().names()) listed |= n == "async+tcpplugin";
  EXPECT_TRUE(listed) << "a loaded plugin is registered";
  // Loading again is a no-op and yields a fresh stack.
  auto s2 = create_stack(load(conf("async+tcpplugin")), Purpose::public_network);
  EXPECT_NE(s.get(), s2.get());
}

// The plugin's error codes are the host's: one siphon error category in the
// process (the host exports its symbols; docs/configuration.md).
TEST(StackPlugin, ErrorCodesCompareEqualAcrossTheBoundary) {
  auto s = create_stack(load(conf("async+tcpplugin") + "ms bind retry count = 0\n"), Purpose::public_network);
  s->start();
  NetAddress bound;
  ASSERT_FALSE(s->listen(*NetAddress::parse("127.0.0.1:0"), [](transport::ConnectionRef) {}, bound));
  NetAddress again;
  const std::error_code ec = s->listen(bound, [](transport::ConnectionRef) {}, again);
  EXPECT_EQ(ec, errc::address_in_use) << ec.category().name() << ": " << ec.message();
  EXPECT_EQ(&ec.category(), &siphon_category());
  s->stop();
}

struct Collect : Dispatcher {
  std::mutex mu;
  std::vector<std::string> got;
  std::promise<void> done;
  std::size_t want = 0;
  bool ms_dispatch(MessageRef m) override {
    std::lock_guard lk(mu);
    got.push_back(m->front().to_string() + "|" + m->data().to_string());
    if (got.size() == want) done.set_value();
    return true;
  }
};

// A server on `server_type` and a client on `client_type`, both built from a
// ceph.conf only, exchange `n` messages with data segments.
void exchange(const std::string& server_type, const std::string& client_type, int n) {
  Collect collect;  // outlives the messengers
  collect.want = static_cast<std::size_t>(n);
  ConfPair p;
  ASSERT_NO_FATAL_FAILURE(test::start_conf_pair(p, conf(server_type), conf(client_type), collect));
  for (int i = 0; i < n; ++i) {
    MessageRef m = make_message<Message>(0x7000);
    m->front().append("msg " + std::to_string(i));
    m->data().append(std::string(static_cast<std::size_t>(1000 + i), static_cast<char>('a' + i % 26)));
    p.con->send_message(m);
  }
  auto f = collect.done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  {
    std::lock_guard lk(collect.mu);
    ASSERT_EQ(collect.got.size(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(collect.got[static_cast<std::size_t>(i)],
                "msg " + std::to_string(i) + "|" +
                    std::string(static_cast<std::size_t>(1000 + i), static_cast<char>('a' + i % 26)));
  }
  p.stop();
}

TEST(StackPlugin, MessengersTalkOverThePluginStack) { exchange("async+tcpplugin", "async+tcpplugin", 200); }

TEST(StackPlugin, ThePluginSpeaksTheSameWireAsTheBuiltInStack) {
  exchange("async+tcpplugin", "async+posix", 20);
  exchange("async+posix", "async+tcpplugin", 20);
}

TEST(StackPlugin, AnotherAbiVersionIsRefused) {
  const std::string what = setup_error(conf("async+wrongabi"));
  EXPECT_NE(what.find(stack_plugin_path(SIPHON_TEST_PLUGIN_DIR, "wrongabi")), std::string::npos) << what;
  EXPECT_NE(what.find("ABI version 42"), std::string::npos) << "names the plugin's version: " << what;
  EXPECT_NE(what.find("expects version " + std::to_string(SIPHON_STACK_PLUGIN_ABI_VERSION)), std::string::npos)
      << "names the expected version: " << what;
  EXPECT_NE(what.find("rebuild"), std::string::npos) << "names the remedy: " << what;
  for (const auto& n : StackRegistry::instance().names()) EXPECT_NE(n, "async+wrongabi");
  // Asking again gives the same answer (nothing half-registered).
  EXPECT_NE(setup_error(conf("async+wrongabi")).find("ABI version 42"), std::string::npos);
}

TEST(StackPlugin, AMissingPluginNamesTheDirectoryAndTheStacks) {
  const std::string what = setup_error(conf("async+nosuchplugin", "/nonexistent/plugins"));
  EXPECT_NE(what.find("async+nosuchplugin"), std::string::npos) << what;
  EXPECT_NE(what.find("libsiphon-stack-nosuchplugin.so"), std::string::npos) << what;
  EXPECT_NE(what.find("/nonexistent/plugins"), std::string::npos) << "the directory searched: " << what;
  EXPECT_NE(what.find("async+posix"), std::string::npos) << what;
  EXPECT_NE(what.find("async+rdma"), std::string::npos) << what;
  // With the option empty, the message names the default directory.
  const std::string dflt = setup_error("[global]\nms type = async+nosuchplugin\n");
  EXPECT_NE(dflt.find(default_stack_plugin_dir()), std::string::npos) << dflt;
}

TEST(StackPlugin, ADlopenFailureIsReportedNotFatal) {
  const fs::path dir = fs::temp_directory_path() / ("siphon-plugin-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "libsiphon-stack-garbage.so") << "this is not an ELF file\n";
  const std::string what = setup_error(conf("async+garbage", dir.string()));
  EXPECT_NE(what.find("libsiphon-stack-garbage.so cannot be loaded"), std::string::npos) << what;
  // A real shared library without the entry point: libm (this test uses it).
  Dl_info info{};
  double (*cosine)(double) = &::cos;
  void* addr = nullptr;
  std::memcpy(&addr, &cosine, sizeof(addr));
  ASSERT_NE(::dladdr(addr, &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  fs::create_symlink(fs::canonical(info.dli_fname), dir / "libsiphon-stack-notaplugin.so");
  const std::string what2 = setup_error(conf("async+notaplugin", dir.string()));
  EXPECT_NE(what2.find("is not a Siphon stack plugin"), std::string::npos) << what2;
  EXPECT_NE(what2.find("siphon_stack_plugin_entry"), std::string::npos) << what2;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace siphon::compat

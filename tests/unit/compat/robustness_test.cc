// Bad input never crashes or throws: every prefix of every corpus file,
// random bytes biased towards the grammar's special characters, random
// command lines and random values. (Run under ASan/UBSan in the asan preset.)
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "compat/config.h"
#include "compat/conf_file.h"
#include "compat/expand.h"
#include "compat/ms_type.h"
#include "test_util.h"

namespace siphon::compat {
namespace {

std::string random_text(std::mt19937& rng, std::size_t max_len) {
  static const std::vector<std::string> pieces = {
      "[", "]", "=", "#", ";", "\"", "'", "\\", " ", "\t", "\n", "\r\n", "\r", "$", "{", "}", "_", ".", "-",
      "\xc3\xa9", "\xff", std::string(1, '\0'), "global", "osd.1", "ms_type", "ms type", "async+rdma",
      "$ms_type", "${cluster}", "$ms_async_rdma_device_name", "ms_async_rdma_device_name", "128K", "true",
      "\xef\xbb\xbf", "a", "0"};
  std::uniform_int_distribution<std::size_t> len(0, max_len);
  std::uniform_int_distribution<std::size_t> pick(0, pieces.size() - 1);
  std::string s;
  const std::size_t n = len(rng);
  for (std::size_t i = 0; i < n; ++i) s += pieces[pick(rng)];
  return s;
}

void load_everything(std::string_view text) {
  Diagnostics d;
  const ConfFile f = ConfFile::parse(text, "fuzz.conf", d);
  for (const auto& diag : d.all()) {
    EXPECT_FALSE(diag.message.empty());
    EXPECT_EQ(diag.where.file, "fuzz.conf");
  }
  for (const char* name : {"osd.1"}) {
    ConfigRequest req;
    std::string error;
    req.name = *EntityName::parse(name, error);
    req.pid = "1";
    req.hostname = "h";
    req.check_all_sections = true;
    Diagnostics d2;
    const Config cfg = Config::load_text(text, "fuzz.conf", req, d2);
    (void)cfg.lookup("ms_type");
    (void)cfg.ms_types();
    for (std::size_t i = 0; i < kOptionCount; ++i) (void)cfg.value_string(static_cast<Opt>(i));
  }
}

TEST(Robustness, EveryPrefixOfEveryCorpusFile) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(SIPHON_COMPAT_CORPUS)) {
    if (!entry.is_regular_file()) continue;
    const std::string text = test::read_corpus(
        std::filesystem::relative(entry.path(), SIPHON_COMPAT_CORPUS).string());
    for (std::size_t n = 0; n <= text.size(); ++n)
      ASSERT_NO_THROW(load_everything(std::string_view(text).substr(0, n))) << entry.path() << " prefix " << n;
  }
}

TEST(Robustness, RandomFiles) {
  std::mt19937 rng(20240508);
  for (int i = 0; i < 3000; ++i) {
    const std::string text = random_text(rng, 60);
    ASSERT_NO_THROW(load_everything(text)) << testing::PrintToString(text);
  }
}

TEST(Robustness, RandomCommandLinesAndEnvironment) {
  std::mt19937 rng(7);
  const std::vector<std::string> words = {"-c", "--conf", "-n", "--name", "--id", "-i", "--cluster", "--",
                                          "--ms_type", "--ms-crc-data", "--no-ms_crc_data", "--ms_crc_data=",
                                          "--ms_async_op_threads=", "true", "0", "osd.1", "x", "=", "--no-",
                                          "-", "--ms_bind_port_min", "--no-ms_type", ""};
  std::uniform_int_distribution<std::size_t> pick(0, words.size() - 1);
  std::uniform_int_distribution<int> len(0, 8);
  for (int i = 0; i < 3000; ++i) {
    std::vector<std::string> args;
    std::string env;
    for (int k = len(rng); k > 0; --k) args.push_back(words[pick(rng)] + (k % 3 == 0 ? words[pick(rng)] : ""));
    for (int k = len(rng); k > 0; --k) env += words[pick(rng)] + " ";
    Diagnostics d;
    std::vector<std::string> rest;
    ASSERT_NO_THROW({
      ConfigRequest req = ConfigRequest::from_args(args, env.c_str(), nullptr, d, &rest);
      req.conf_search.clear();
      req.conf_required = false;
      Config::load_text("[global]\n", "x.conf", req, d);
    });
  }
}

TEST(Robustness, RandomValuesForEveryOption) {
  std::mt19937 rng(99);
  for (int i = 0; i < 400; ++i) {
    const std::string text = random_text(rng, 6);
    for (std::size_t o = 0; o < kOptionCount; ++o) {
      std::string error;
      ASSERT_NO_THROW((void)parse_option_value(static_cast<Opt>(o), text, error));
    }
    std::string error;
    ASSERT_NO_THROW((void)parse_ms_type(text, error));
    ASSERT_NO_THROW((void)rdma_type_error(text));
    MetaVariables vars;
    ASSERT_NO_THROW((void)expand_meta(text, vars, [](std::string_view) { return std::optional<OptionRef>(); },
                                      "", nullptr));
  }
}

TEST(Robustness, LongChainsAndLargeFiles) {
  // A chain of references through string options, ending in a loop.
  Diagnostics d;
  Config::load_text("[global]\nms_async_rdma_device_name = 1$ms_async_rdma_local_gid\n"
                    "ms_async_rdma_local_gid = 2$ms_stack_plugin_dir\nms_stack_plugin_dir = 3$mon_host\n"
                    "mon_host = 4$ms_inject_delay_type\nms_inject_delay_type = 5$ms_async_rdma_device_name\n",
                    "chain.conf", ConfigRequest{}, d);
  EXPECT_NE(test::find_diag(d, Severity::warning, "variable expansion loop"), nullptr);
  // 50,000 lines.
  std::string big = "[global]\n";
  for (int i = 0; i < 50000; ++i) big += "key_" + std::to_string(i) + " = value " + std::to_string(i) + "\n";
  Diagnostics d2;
  const ConfFile f = ConfFile::parse(big, "big.conf", d2);
  EXPECT_TRUE(f.ok());
  EXPECT_EQ(f.entries().size(), 50000u);
  EXPECT_EQ(f.find("global", "key_49999")->value, "value 49999");
  // One very long line.
  Diagnostics d3;
  const ConfFile g = ConfFile::parse("[global]\nk = " + std::string(1 << 20, 'x') + "\n", "long.conf", d3);
  EXPECT_EQ(g.find("global", "k")->value.size(), 1u << 20);
}

}  // namespace
}  // namespace siphon::compat

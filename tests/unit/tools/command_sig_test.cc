// siphon-ceph's command matching against a mon command table (a slice of
// what a Pacific mon returns for get_command_descriptions).
#include <gtest/gtest.h>

#include "command_sig.h"

namespace siphon::tools {
namespace {

const char* kTable = R"({
 "cmd000": {"sig": ["pg", "stat"], "help": "", "module": "pg", "perm": "r", "flags": 8},
 "cmd001": {"sig": ["status"], "help": "show cluster status", "module": "mon", "perm": "r", "flags": 0},
 "cmd002": {"sig": ["mon", "dump", {"name": "epoch", "range": "0", "req": "false", "type": "CephInt"}],
            "help": "", "module": "mon", "perm": "r", "flags": 0},
 "cmd003": {"sig": ["osd", "pool", "create", {"name": "pool", "type": "CephPoolname"},
            {"name": "pg_num", "range": "0", "req": "false", "type": "CephInt"},
            {"name": "pgp_num", "range": "0", "req": "false", "type": "CephInt"},
            {"name": "pool_type", "req": "false", "strings": "replicated|erasure", "type": "CephChoices"},
            {"name": "bulk", "req": "false", "type": "CephBool"},
            {"name": "target_size_ratio", "range": "0.0", "req": "false", "type": "CephFloat"}],
            "help": "create pool", "module": "osd", "perm": "rw", "flags": 0},
 "cmd004": {"sig": ["osd", "pool", "get", {"name": "pool", "type": "CephPoolname"},
            {"name": "var", "strings": "size|min_size|pg_num", "type": "CephChoices"}],
            "help": "", "module": "osd", "perm": "r", "flags": 0},
 "cmd005": {"sig": ["pg", "dump", {"n": "N", "name": "dumpcontents", "req": "false",
            "strings": "all|summary|pools", "type": "CephChoices"}], "help": "", "module": "pg", "perm": "r", "flags": 8},
 "cmd006": {"sig": ["osd", "pool", "stats", {"name": "pool_name", "req": "false", "type": "CephPoolname"}],
            "help": "", "module": "osd", "perm": "r", "flags": 0},
 "cmd007": {"bogus": true}
})";

std::vector<CommandSignature> table() {
  return parse_command_descriptions(nlohmann::json::parse(kTable));
}

std::string match(const std::vector<std::string>& words, std::string* error = nullptr) {
  static const auto sigs = table();
  std::string e;
  const auto m = match_command(sigs, words, e);
  if (error != nullptr) *error = e;
  return m ? to_ceph_json(m->args) : "";
}

TEST(CommandSig, ParsesTheTable) {
  const auto sigs = table();
  ASSERT_EQ(sigs.size(), 7u);  // the entry without a sig is skipped
  EXPECT_TRUE(sigs[0].is_mgr());
  EXPECT_FALSE(sigs[1].is_mgr());
  EXPECT_EQ(usage(sigs[3]),
            "osd pool create <pool> [<pg_num:int>] [<pgp_num:int>] [replicated|erasure] [<bulk>] "
            "[<target_size_ratio:float>]");
}

TEST(CommandSig, BuildsTheJsonCephSends) {
  EXPECT_EQ(match({"status"}), R"({"prefix": "status"})");
  EXPECT_EQ(match({"mon", "dump"}), R"({"prefix": "mon dump"})");
  EXPECT_EQ(match({"mon", "dump", "3"}), R"({"prefix": "mon dump", "epoch": 3})");
  EXPECT_EQ(match({"osd", "pool", "create", "rbd", "32"}),
            R"({"prefix": "osd pool create", "pool": "rbd", "pg_num": 32})");
  // An optional parameter a word is not is skipped (erasure is no pg_num).
  EXPECT_EQ(match({"osd", "pool", "create", "ec", "erasure"}),
            R"({"prefix": "osd pool create", "pool": "ec", "pool_type": "erasure"})");
  EXPECT_EQ(match({"osd", "pool", "create", "p", "--pg-num=8", "--bulk", "--target_size_ratio", "0.5"}),
            R"({"prefix": "osd pool create", "pool": "p", "pg_num": 8, "bulk": true, "target_size_ratio": 0.5})");
  EXPECT_EQ(match({"pg", "dump", "pools", "summary"}), R"({"prefix": "pg dump", "dumpcontents": ["pools", "summary"]})");
  EXPECT_EQ(match({"osd", "pool", "get", "rbd", "size"}),
            R"({"prefix": "osd pool get", "pool": "rbd", "var": "size"})");
}

TEST(CommandSig, ExplainsWhatIsWrong) {
  std::string e;
  EXPECT_EQ(match({"osd", "pool", "get", "rbd", "colour"}, &e), "");
  EXPECT_NE(e.find("'colour' is not one of size|min_size|pg_num"), std::string::npos) << e;
  EXPECT_EQ(match({"osd", "pool", "create"}, &e), "");
  EXPECT_NE(e.find("missing argument <pool>"), std::string::npos) << e;
  EXPECT_EQ(match({"mon", "dump", "x"}, &e), "");
  EXPECT_NE(e.find("unexpected argument 'x'"), std::string::npos) << e;
  EXPECT_EQ(match({"osd", "pool", "frob"}, &e), "");
  EXPECT_NE(e.find("no valid command found for 'osd pool frob'; closest matches:"), std::string::npos) << e;
  EXPECT_NE(e.find("osd pool stats [<pool_name>]"), std::string::npos) << e;
  EXPECT_EQ(match({"osd", "pool", "create", "p", "--colour", "red"}, &e), "");
  EXPECT_NE(e.find("unknown option '--colour'"), std::string::npos) << e;
}

TEST(CommandSig, OddTablesNeverCrash) {
  for (const char* t : {R"([1, 2])", R"({"a": 5})", R"({"a": {"sig": 5}})", R"({"a": {"sig": [{"name": 1}]}})",
                        R"({"a": {"sig": ["x", {"name": "p", "type": 7, "strings": 3, "req": [], "n": 2}]}})",
                        R"({"a": {"sig": ["x", {"name": "p"}, "y"]}})", R"({"a": {"sig": [], "flags": -1}})"}) {
    const auto sigs = parse_command_descriptions(nlohmann::json::parse(t));
    std::string e;
    (void)match_command(sigs, {"x", "1"}, e);
  }
  const auto sigs = parse_command_descriptions(
      nlohmann::json::parse(R"({"a": {"sig": ["x", {"name": "p", "type": 7, "strings": 3, "req": [], "n": 2}]}})"));
  ASSERT_EQ(sigs.size(), 1u);
  EXPECT_EQ(sigs[0].params[0].type, "CephString");
}

TEST(CommandSig, PythonStyleJson) {
  nlohmann::ordered_json j;
  j["prefix"] = "x";
  j["list"] = {1, 2};
  j["s"] = "caf\xc3\xa9 \"q\"";
  EXPECT_EQ(to_ceph_json(j), R"({"prefix": "x", "list": [1, 2], "s": "caf\u00e9 \"q\""})");
  EXPECT_EQ(to_ceph_json(plain_command({"mon", "dump"})), R"({"prefix": "mon dump"})");
}

}  // namespace
}  // namespace siphon::tools

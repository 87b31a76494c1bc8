// Value syntax, with the cases checked against Ceph 16.2 (corpus/values.tsv
// runs them through ceph-conf as well).
#include "compat/values.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace siphon::compat {
namespace {

template <typename F>
auto ok(F parse, std::string_view text) {
  std::string error;
  auto v = parse(text, error);
  EXPECT_TRUE(v.has_value()) << "'" << text << "': " << error;
  using T = typename decltype(v)::value_type;
  return v.value_or(T{});
}

template <typename F>
std::string bad(F parse, std::string_view text) {
  std::string error;
  const auto v = parse(text, error);
  EXPECT_FALSE(v.has_value()) << "'" << text << "' was accepted";
  EXPECT_FALSE(error.empty());
  return error;
}

TEST(Values, BoolIsTrueFalseOrAnInteger) {
  for (auto t : {"true", "TRUE", "True", "1", "-1", "2", "007"}) EXPECT_TRUE(ok(parse_bool, t)) << t;
  for (auto t : {"false", "FALSE", "False", "0", "00", "-0"}) EXPECT_FALSE(ok(parse_bool, t)) << t;
  // Ceph ignores these (keeps the default); Siphon says so.
  for (auto t : {"yes", "no", "on", "off", "NO"})
    EXPECT_NE(bad(parse_bool, t).find("Ceph, which would ignore it"), std::string::npos) << t;
  for (auto t : {"", "y", "n", "f", "false0", "0x0", "1.0", "99999999999"}) bad(parse_bool, t);
}

TEST(Values, IntegersTakeSiSuffixes) {
  EXPECT_EQ(ok(parse_uint, "5"), 5u);
  EXPECT_EQ(ok(parse_uint, "+5"), 5u);
  EXPECT_EQ(ok(parse_uint, "010"), 10u);  // decimal, not octal
  EXPECT_EQ(ok(parse_uint, "5K"), 5000u);
  EXPECT_EQ(ok(parse_uint, "5M"), 5000000u);
  EXPECT_EQ(ok(parse_uint, "2G"), 2000000000u);
  EXPECT_EQ(ok(parse_uint, "1E"), 1000000000000000000u);
  EXPECT_EQ(ok(parse_uint, "18E"), 18000000000000000000u);
  EXPECT_EQ(ok(parse_int, "-5K"), -5000);
  EXPECT_EQ(ok(parse_int, "9223372036854775807"), std::numeric_limits<std::int64_t>::max());
  EXPECT_NE(bad(parse_uint, "-5").find("negative"), std::string::npos);
  EXPECT_NE(bad(parse_uint, "5k").find("uppercase"), std::string::npos);
  EXPECT_NE(bad(parse_uint, "5B").find("without B"), std::string::npos);
  for (auto t : {"", "5Ki", "0x10", "1e3", "1.5", "1.5K", " 5", "5 ", "K", "--5", "19E", "9223372036854775808"})
    bad(parse_uint, t);
  for (auto t : {"10E", "9223372036854775808"}) bad(parse_int, t);
}

TEST(Values, SizesTakeIecSuffixes) {
  EXPECT_EQ(ok(parse_size, "64"), 64u);
  EXPECT_EQ(ok(parse_size, "64B"), 64u);
  EXPECT_EQ(ok(parse_size, "64K"), 65536u);
  EXPECT_EQ(ok(parse_size, "64Ki"), 65536u);
  EXPECT_EQ(ok(parse_size, "64KB"), 65536u);
  EXPECT_EQ(ok(parse_size, "64KiB"), 65536u);  // Ceph 17+; Ceph 16 ignores it
  EXPECT_EQ(ok(parse_size, "128K"), 131072u);
  EXPECT_EQ(ok(parse_size, "4M"), 4194304u);
  EXPECT_EQ(ok(parse_size, "1G"), 1073741824u);
  EXPECT_EQ(ok(parse_size, "1T"), 1099511627776u);
  EXPECT_EQ(ok(parse_size, "15E"), 17293822569102704640u);
  EXPECT_NE(bad(parse_size, "128_K").find("a file must say 128K"), std::string::npos);
  EXPECT_NE(bad(parse_size, "64k").find("case-sensitive"), std::string::npos);
  EXPECT_NE(bad(parse_size, "16E").find("too large"), std::string::npos);
  EXPECT_NE(bad(parse_size, "-1").find("negative"), std::string::npos);
  for (auto t : {"", "0x40", "1.5K", "64 K", "64Kx", "64BB", "1Bi", "K", "64KiBB"}) bad(parse_size, t);
}

TEST(Values, Floats) {
  EXPECT_DOUBLE_EQ(ok(parse_float, "0.2"), 0.2);
  EXPECT_DOUBLE_EQ(ok(parse_float, ".5"), 0.5);
  EXPECT_DOUBLE_EQ(ok(parse_float, "1e2"), 100.0);
  EXPECT_DOUBLE_EQ(ok(parse_float, "0x1p3"), 8.0);
  EXPECT_DOUBLE_EQ(ok(parse_float, "-2"), -2.0);
  for (auto t : {"", "1,5", "abc", "inf", "nan", "1e999", "1.5x"}) bad(parse_float, t);
  EXPECT_EQ(format_float(0.2), "0.200000");
  EXPECT_EQ(format_float(15), "15.000000");
}

TEST(Values, Durations) {
  using std::chrono::seconds;
  EXPECT_EQ(ok(parse_secs, "45"), seconds(45));
  EXPECT_EQ(ok(parse_secs, "45s"), seconds(45));
  EXPECT_EQ(ok(parse_secs, "1m 30s"), seconds(90));
  EXPECT_EQ(ok(parse_secs, "2 min"), seconds(120));
  EXPECT_EQ(ok(parse_secs, "1h30m"), seconds(5400));
  EXPECT_EQ(ok(parse_secs, "5m3"), seconds(303));
  EXPECT_EQ(ok(parse_secs, "3 s 4"), seconds(7));
  EXPECT_EQ(ok(parse_secs, "1 week"), seconds(604800));
  EXPECT_EQ(ok(parse_secs, ""), seconds(0));
  EXPECT_NE(bad(parse_secs, "1x").find("unknown time unit 'x'"), std::string::npos);
  for (auto t : {"1.5", "-3", "s", "99999999999999999999", "9999999999999999y"}) bad(parse_secs, t);
}

TEST(Values, Addresses) {
  const auto a = [](std::string_view t) { return ok(parse_addr, t).to_string(); };
  EXPECT_EQ(a("1.2.3.4"), "v2:1.2.3.4:0/0");
  EXPECT_EQ(a("1.2.3.4:6789"), "v2:1.2.3.4:6789/0");
  EXPECT_EQ(a("v2:1.2.3.4:3300"), "v2:1.2.3.4:3300/0");
  EXPECT_EQ(a("v1:1.2.3.4:6789/123"), "v1:1.2.3.4:6789/123");
  EXPECT_EQ(a("any:1.2.3.4"), "1.2.3.4:0/0");
  EXPECT_EQ(a("[::1]:6800"), "v2:[::1]:6800/0");
  EXPECT_EQ(a("::1"), "v2:[::1]:0/0");
  EXPECT_EQ(a("v2:[fe80::1]:3300/7"), "v2:[fe80::1]:3300/7");
  EXPECT_EQ(a("1.2.3.4:"), "v2:1.2.3.4:0/0");
  EXPECT_EQ(a("1.2.3.4/5"), "v2:1.2.3.4:0/5");
  EXPECT_EQ(a(""), "-");
  EXPECT_EQ(a("-"), "-");
  EXPECT_FALSE(ok(parse_addr, "").is_set());
  const EntityAddr x = ok(parse_addr, "v1:10.0.0.1:6789/9");
  EXPECT_EQ(x.type, EntityAddr::Type::legacy);
  EXPECT_EQ(x.ip.port(), 6789);
  EXPECT_EQ(x.nonce, 9u);
  EXPECT_NE(bad(parse_addr, "localhost").find("host names are not resolved"), std::string::npos);
  EXPECT_NE(bad(parse_addr, "1.2.3.4 junk").find("unexpected ' junk'"), std::string::npos);
  for (auto t : {"1.2.3.4:99999", "1.2.3", "[::1", "[zz::1]:1", "1.2.3.4/x", "v3:1.2.3.4", "1.2.3.4:1:2"})
    bad(parse_addr, t);
  EXPECT_EQ(ok(parse_addrvec, "[v2:1.2.3.4:3300,v1:1.2.3.4:6789]").to_string(),
            "[v2:1.2.3.4:3300/0,v1:1.2.3.4:6789/0]");
  EXPECT_EQ(ok(parse_addrvec, "v2:1.2.3.4:3300").to_string(), "v2:1.2.3.4:3300/0");
  EXPECT_EQ(ok(parse_addrvec, "[]").to_string(), "");
  bad(parse_addrvec, "[1.2.3.4");
  bad(parse_addrvec, "[1.2.3.4,junk]");
}

TEST(Values, Uuids) {
  const std::string canonical = "01234567-89ab-cdef-0123-456789abcdef";
  for (auto t : {"01234567-89ab-cdef-0123-456789abcdef", "0123456789abcdef0123456789abcdef",
                 "{01234567-89ab-cdef-0123-456789abcdef}", "01234567-89AB-CDEF-0123-456789ABCDEF"})
    EXPECT_EQ(ok(parse_uuid, t).to_string(), canonical) << t;
  EXPECT_TRUE(Uuid{}.is_zero());
  EXPECT_EQ(Uuid{}.to_string(), "00000000-0000-0000-0000-000000000000");
  for (auto t : {"", "0123", "01234567-89ab-cdef-0123-456789abcdeg", "0123-4567-89ab-cdef-0123-456789abcdef",
                 "{01234567-89ab-cdef-0123-456789abcdef", "01234567-89ab-cdef-0123-456789abcdef0"})
    bad(parse_uuid, t);
}

TEST(Values, DebugLevels) {
  EXPECT_EQ(ok(parse_debug_level, "5").to_string(), "5/5");
  EXPECT_EQ(ok(parse_debug_level, "5/7").to_string(), "5/7");
  EXPECT_EQ(ok(parse_debug_level, "0/20").to_string(), "0/20");
  EXPECT_EQ(ok(parse_debug_level, "99").log, 99);
  // Ceph's sscanf takes "5/x" as 5/5; Siphon wants what it says.
  for (auto t : {"", "100", "-1", "5/100", "a", "5/", "5/x", "5.5", "5 / 7", "+5"}) bad(parse_debug_level, t);
}

TEST(Values, Gids) {
  const auto g = ok(parse_gid, "fe80::5054:ff:fe12:3456");
  const std::array<std::uint8_t, 16> want{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56};
  EXPECT_EQ(g, want);
  EXPECT_EQ(ok(parse_gid, "fe80:0000:0000:0000:5054:00ff:fe12:3456"), want);
  EXPECT_NE(bad(parse_gid, "mlx5_0").find("IPv6 address"), std::string::npos);
}

TEST(Values, SplitList) {
  EXPECT_EQ(split_list("a, b;c  d"), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(split_list(" ,; "), std::vector<std::string>{});
  EXPECT_EQ(split_list("a|b", "|"), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace siphon::compat

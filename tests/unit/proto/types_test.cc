#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "msgr/proto/types.h"
#include "proto_test_util.h"

namespace siphon::proto {
namespace {

using namespace test;  // proto_test_util.h

// §6.1: any:127.0.0.1:0 with nonce 0x12345678.
constexpr const char* kClientAddrHex =
    "01 01 01 1c 00 00 00 03 00 00 00 78 56 34 12 10 00 00 00 02 00 00 00 7f 00 00 01"
    " 00 00 00 00 00 00 00 00";

EntityAddr mon_addr() {
  return EntityAddr(AddrType::msgr2, NetAddress::ipv4(0x7f000001, 3300), 0);
}

Result<EntityAddr> decode_addr(const BufferList& bl) {
  return decode_from<EntityAddr>(bl, "test");
}

TEST(EntityAddr, MonAddressGoldenBytes) {
  const BufferList enc = encode_to_list(mon_addr());
  EXPECT_EQ(enc.length(), kEntityAddrIpv4Size);
  EXPECT_EQ(to_hex(enc), norm_hex(kMonAddrHex));
  auto back = decode_addr(from_hex(kMonAddrHex));
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, mon_addr());
  EXPECT_EQ(back->to_string(), "v2:127.0.0.1:3300/0");
}

TEST(EntityAddr, ClientAnyAddressGoldenBytes) {
  const EntityAddr a(AddrType::any, NetAddress::ipv4(0x7f000001, 0), 0x12345678);
  EXPECT_EQ(to_hex(encode_to_list(a)), norm_hex(kClientAddrHex));
  EXPECT_EQ(a.to_string(), "127.0.0.1:0/305419896");  // ANY prints without a prefix
  auto back = decode_addr(from_hex(kClientAddrHex));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, a);
}

TEST(EntityAddr, FamilyIsLittleEndianAndPortBigEndianInAddr2) {
  // Pitfall 7: "02 00" (AF_INET, LE) then the port 3300 big-endian "0c e4".
  const std::string hex = to_hex(encode_to_list(mon_addr()));
  EXPECT_NE(hex.find("10 00 00 00 02 00 0c e4"), std::string::npos);
}

TEST(EntityAddr, BlankAddressIs28ZeroBytes) {
  const EntityAddr blank;
  std::string zeros28;
  for (int i = 0; i < 28; ++i) zeros28 += " 00";
  // struct_len 40 = type + nonce + elen + 28; elen 28 (sizeof sockaddr_in6).
  EXPECT_EQ(to_hex(encode_to_list(blank)),
            norm_hex("01 01 01 28 00 00 00 00 00 00 00 00 00 00 00 1c 00 00 00" + zeros28));
  auto back = decode_addr(encode_to_list(blank));
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->is_blank());
  EXPECT_EQ(*back, blank);
  // elen 0 is also a blank address.
  auto zero = decode_addr(from_hex("01 01 01 0c 00 00 00 02 00 00 00 05 00 00 00 00 00 00 00"));
  ASSERT_TRUE(zero) << zero.error().message();
  EXPECT_TRUE(zero->is_blank());
  EXPECT_EQ(zero->nonce, 5u);
  EXPECT_EQ(zero->type, AddrType::msgr2);
}

TEST(EntityAddr, Ipv6RoundTrip) {
  auto a = EntityAddr::parse("v2:[fe80::1:2]:6800/77");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->addr.is_ipv6());
  const BufferList enc = encode_to_list(*a);
  EXPECT_EQ(enc.length(), 1u + 6 + 12 + 28);
  // sockaddr_in6: family 0a 00 (LE), port 1a 90 (BE 6800), flowinfo, address.
  EXPECT_NE(to_hex(enc).find("1c 00 00 00 0a 00 1a 90 00 00 00 00 fe 80"), std::string::npos);
  auto back = decode_addr(enc);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, *a);
  EXPECT_EQ(back->to_string(), "v2:[fe80::1:2]:6800/77");
}

TEST(EntityAddr, ShortSockaddrIsZeroFilled) {
  // AF_INET with elen 8: family, port, address; the padding is implied.
  auto a = decode_addr(from_hex("01 01 01 14 00 00 00 01 00 00 00 00 00 00 00 08 00 00 00"
                                " 02 00 1a 85 0a 00 00 01"));
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->to_string(), "v1:10.0.0.1:6789/0");
}

TEST(EntityAddr, LegacyEncodingIs136BytesWithBigEndianFamily) {
  const EntityAddr a(AddrType::legacy, NetAddress::ipv4(0x7f000001, 6789), 9);
  Encoder e;
  a.encode(e, features::kSupported & ~features::kMsgAddr2);
  const BufferList enc = e.take();
  ASSERT_EQ(enc.length(), kEntityAddrLegacySize);
  const std::string hex = to_hex(enc);
  EXPECT_EQ(hex.substr(0, 3 * 14 - 1),
            norm_hex("00 00 00 00 09 00 00 00 00 02 1a 85 7f 00"));  // type 0, nonce, BE family
  auto back = decode_addr(enc);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, a);
  // A legacy blank address decodes as type NONE.
  Encoder eb;
  EntityAddr{}.encode_legacy(eb);
  const BufferList blank = eb.take();
  ASSERT_EQ(blank.length(), kEntityAddrLegacySize);
  auto b = decode_addr(blank);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->type, AddrType::none);
  EXPECT_TRUE(b->is_blank());
}

TEST(EntityAddr, LegacyIpv6RoundTrip) {
  auto a = EntityAddr::parse("v1:[2001:db8::5]:6800/3");
  ASSERT_TRUE(a);
  Encoder e;
  a->encode_legacy(e);
  const BufferList enc = e.take();
  ASSERT_EQ(enc.length(), kEntityAddrLegacySize);
  EXPECT_EQ(to_hex(enc).substr(0, 3 * 12 - 1), norm_hex("00 00 00 00 03 00 00 00 00 0a 1a 90"));
  auto back = decode_addr(enc);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, *a);
}

TEST(EntityAddr, AnyBecomesLegacyForPreNautilusPeers) {
  const EntityAddr a(AddrType::any, NetAddress::ipv4(0x0a000001, 0), 1);
  Encoder e;
  a.encode(e, features::kMsgAddr2);
  auto back = decode_addr(e.take());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->type, AddrType::legacy);
}

TEST(EntityAddr, MalformedInputsAreErrors) {
  struct Case {
    const char* hex;
    const char* reason;
  };
  const Case cases[] = {
      {"02", "bad marker (expected 1, or 0 for the legacy form)"},
      {"01 02 02 1c 00 00 00", "struct_compat is newer than this decoder supports"},
      {"01 01 01 ff 00 00 00 02 00 00 00", "struct_len exceeds remaining bytes"},
      // elen 1: smaller than the family field.
      {"01 01 01 0d 00 00 00 02 00 00 00 00 00 00 00 01 00 00 00 02",
       "sockaddr length is smaller than its family field"},
      // elen 17 for AF_INET (struct big enough).
      {"01 01 01 1d 00 00 00 02 00 00 00 00 00 00 00 11 00 00 00 02 00 0c e4 7f 00 00 01"
       " 00 00 00 00 00 00 00 00 00",
       "sockaddr length exceeds the family's sockaddr size"},
      // elen larger than the struct.
      {"01 01 01 1c 00 00 00 02 00 00 00 00 00 00 00 20 00 00 00 02 00 0c e4 7f 00 00 01"
       " 00 00 00 00 00 00 00 00",
       "sockaddr length exceeds the struct"},
      // family 1 (AF_UNIX) is not an IP address.
      {"01 01 01 1c 00 00 00 02 00 00 00 00 00 00 00 10 00 00 00 01 00 0c e4 7f 00 00 01"
       " 00 00 00 00 00 00 00 00",
       "unsupported sockaddr family"},
  };
  for (const Case& c : cases) {
    auto r = decode_addr(from_hex(c.hex));
    ASSERT_FALSE(r) << c.hex;
    EXPECT_EQ(r.code(), errc::decode_error);
    EXPECT_EQ(r.error().reason, c.reason) << c.hex << ": " << r.error().message();
  }
}

TEST(EntityAddr, EveryTruncationFails) {
  const BufferList full = from_hex(kMonAddrHex);
  for (std::size_t n = 0; n < full.length(); ++n)
    EXPECT_FALSE(decode_addr(test::prefix(full, n))) << n;
  Encoder e;
  mon_addr().encode_legacy(e);
  const BufferList legacy = e.take();
  for (std::size_t n = 0; n < legacy.length(); ++n)
    EXPECT_FALSE(decode_addr(test::prefix(legacy, n))) << n;
}

TEST(EntityAddr, UnknownTrailingStructBytesAreSkipped) {
  // struct_len 30: two extra bytes a future encoder appended.
  BufferList bl = from_hex(
      "01 01 01 1e 00 00 00 02 00 00 00 00 00 00 00 10 00 00 00 02 00 0c e4 7f 00 00 01"
      " 00 00 00 00 00 00 00 00 aa bb  07");
  Decoder d(bl);
  EntityAddr a;
  decode(d, a);
  EXPECT_EQ(d.u8(), 7);
  EXPECT_TRUE(d.ok());
  EXPECT_EQ(a, mon_addr());
}

TEST(EntityAddr, UnknownTypeValuesSurviveARoundTrip) {
  EntityAddr a = mon_addr();
  a.type = static_cast<AddrType>(7);
  auto back = decode_addr(encode_to_list(a));
  ASSERT_TRUE(back);
  EXPECT_EQ(static_cast<std::uint32_t>(back->type), 7u);
  EXPECT_EQ(to_string(back->type), "???");
}

TEST(EntityAddr, EqualityIsExact) {
  EntityAddr a = mon_addr();
  EntityAddr b = mon_addr();
  EXPECT_EQ(a, b);
  b.type = AddrType::any;  // pitfall 10: ANY is not MSGR2
  EXPECT_NE(a, b);
  b = mon_addr();
  b.nonce = 1;
  EXPECT_NE(a, b);
  b = mon_addr();
  b.addr.set_port(3301);
  EXPECT_NE(a, b);
}

TEST(EntityAddr, OrderingFollowsCephMemcmp) {
  const EntityAddr v1(AddrType::legacy, NetAddress::ipv4(0x7f000001, 6789), 0);
  const EntityAddr v2 = mon_addr();
  EXPECT_LT(v1, v2);  // type 1 < 2
  EntityAddr n1 = mon_addr();
  n1.nonce = 0x100;
  EntityAddr n2 = mon_addr();
  n2.nonce = 0x2;
  // memcmp of little-endian nonces: 00 01 .. < 02 00 ..
  EXPECT_LT(n1, n2);
  const EntityAddr lo(AddrType::msgr2, NetAddress::ipv4(0x0a000001, 3300), 0);
  const EntityAddr hi(AddrType::msgr2, NetAddress::ipv4(0x0a000002, 3300), 0);
  EXPECT_LT(lo, hi);
  EXPECT_EQ(lo <=> lo, std::strong_ordering::equal);
}

TEST(EntityAddrText, ParseAndPrint) {
  struct Case {
    const char* text;
    AddrType type;
    const char* ip_port;
    std::uint32_t nonce;
    const char* printed;
  };
  const Case cases[] = {
      {"v2:127.0.0.1:3300/0", AddrType::msgr2, "127.0.0.1:3300", 0, "v2:127.0.0.1:3300/0"},
      {"v1:10.1.2.3:6789/42", AddrType::legacy, "10.1.2.3:6789", 42, "v1:10.1.2.3:6789/42"},
      {"any:1.2.3.4:0/7", AddrType::any, "1.2.3.4:0", 7, "1.2.3.4:0/7"},
      {"127.0.0.1:6789", AddrType::any, "127.0.0.1:6789", 0, "127.0.0.1:6789/0"},
      {"127.0.0.1", AddrType::any, "127.0.0.1:0", 0, "127.0.0.1:0/0"},
      {"v2:[::1]:3300/5", AddrType::msgr2, "[::1]:3300", 5, "v2:[::1]:3300/5"},
      {"[2001:db8::7]:6800", AddrType::any, "[2001:db8::7]:6800", 0, "[2001:db8::7]:6800/0"},
      {"::1", AddrType::any, "[::1]:0", 0, "[::1]:0/0"},
      {"1.2.3.4:65535/4294967295", AddrType::any, "1.2.3.4:65535", 4294967295u,
       "1.2.3.4:65535/4294967295"},
  };
  for (const Case& c : cases) {
    auto a = EntityAddr::parse(c.text);
    ASSERT_TRUE(a) << c.text;
    EXPECT_EQ(a->type, c.type) << c.text;
    EXPECT_EQ(a->addr.to_string(), c.ip_port) << c.text;
    EXPECT_EQ(a->nonce, c.nonce) << c.text;
    EXPECT_EQ(a->to_string(), c.printed) << c.text;
    auto again = EntityAddr::parse(a->to_string());
    ASSERT_TRUE(again) << a->to_string();
    EXPECT_EQ(*again, *a);
  }
  auto none = EntityAddr::parse("-");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->type, AddrType::none);
  EXPECT_EQ(none->to_string(), "-");
  // A default type applies only without a prefix.
  EXPECT_EQ(EntityAddr::parse("1.2.3.4:5", AddrType::legacy)->type, AddrType::legacy);
  EXPECT_EQ(EntityAddr::parse("v2:1.2.3.4:5", AddrType::legacy)->type, AddrType::msgr2);
}

TEST(EntityAddrText, RejectsMalformedText) {
  for (const char* bad : {"", "v2:", "v3:1.2.3.4:1", "1.2.3.4:", "1.2.3.4:70000", "1.2.3.4:1/",
                          "1.2.3.4:1/4294967296", "1.2.3.4:1/x", "[::1", "[::1]x", "300.1.1.1",
                          "host.example:3300", "1.2.3.4:1 ", "-x", "v2:[1.2.3.4:1"}) {
    EXPECT_FALSE(EntityAddr::parse(bad)) << "'" << bad << "'";
  }
}

TEST(EntityAddrVec, GoldenSingleAddressVector) {
  const EntityAddrVec v(mon_addr());
  const BufferList enc = encode_to_list(v);
  EXPECT_EQ(enc.length(), 40u);
  EXPECT_EQ(to_hex(enc), norm_hex(std::string("02 01 00 00 00 ") + kMonAddrHex));
  auto back = decode_from<EntityAddrVec>(enc, "test");
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, v);
}

TEST(EntityAddrVec, AcceptsBareAddressAndLegacyMarkers) {
  auto one = decode_from<EntityAddrVec>(from_hex(kMonAddrHex), "test");
  ASSERT_TRUE(one) << one.error().message();
  EXPECT_EQ(one->addrs, std::vector<EntityAddr>{mon_addr()});
  Encoder e;
  const EntityAddr legacy(AddrType::legacy, NetAddress::ipv4(0x7f000001, 6789), 3);
  legacy.encode_legacy(e);
  auto old = decode_from<EntityAddrVec>(e.take(), "test");
  ASSERT_TRUE(old) << old.error().message();
  EXPECT_EQ(old->addrs, std::vector<EntityAddr>{legacy});
}

TEST(EntityAddrVec, WithoutMsgAddr2EncodesTheLegacyAddress) {
  const EntityAddr v1(AddrType::legacy, NetAddress::ipv4(0x7f000001, 6789), 0);
  const EntityAddrVec v({mon_addr(), v1});
  Encoder e;
  v.encode(e, 0);
  auto back = decode_from<EntityAddrVec>(e.take(), "test");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->addrs, std::vector<EntityAddr>{v1});
  EXPECT_EQ(EntityAddrVec(mon_addr()).legacy_addr(), EntityAddr{});
}

TEST(EntityAddrVec, MalformedInputsAreErrors) {
  auto bad_marker = decode_from<EntityAddrVec>(from_hex("03 01 00 00 00"), "test");
  ASSERT_FALSE(bad_marker);
  EXPECT_EQ(bad_marker.error().field, "entity_addrvec_t marker");
  auto huge = decode_from<EntityAddrVec>(from_hex(std::string("02 ff ff 0f 00 ") + kMonAddrHex),
                                         "test");
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().reason, "count exceeds what the remaining bytes can hold");
  auto inner = decode_from<EntityAddrVec>(from_hex("02 01 00 00 00 02 00 00 00 00 00 00 00 00 00"
                                                   " 00 00 00 00 00 00 00 00 00"),
                                          "test");
  ASSERT_FALSE(inner);
  EXPECT_EQ(inner.error().field, "entity_addr_t marker");
  const BufferList two = encode_to_list(EntityAddrVec({mon_addr(), mon_addr()}));
  for (std::size_t n = 0; n < two.length(); ++n)
    EXPECT_FALSE(decode_from<EntityAddrVec>(test::prefix(two, n), "test")) << n;
}

TEST(EntityAddrVec, TextForms) {
  auto v = EntityAddrVec::parse("[v2:127.0.0.1:3300/0,v1:127.0.0.1:6789/0]");
  ASSERT_TRUE(v);
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ(v->addrs[0], mon_addr());
  EXPECT_EQ(v->addrs[1].type, AddrType::legacy);
  EXPECT_EQ(v->to_string(), "[v2:127.0.0.1:3300/0,v1:127.0.0.1:6789/0]");
  ASSERT_NE(v->find(AddrType::legacy), nullptr);
  EXPECT_EQ(v->find(AddrType::legacy)->port(), 6789);
  EXPECT_EQ(v->find(AddrType::any), nullptr);
  EXPECT_TRUE(v->contains(mon_addr()));
  auto single = EntityAddrVec::parse("v2:127.0.0.1:3300/0");
  ASSERT_TRUE(single);
  EXPECT_EQ(single->to_string(), "v2:127.0.0.1:3300/0");
  auto bracketed_v6 = EntityAddrVec::parse("[::1]:3300");
  ASSERT_TRUE(bracketed_v6);
  ASSERT_EQ(bracketed_v6->size(), 1u);
  EXPECT_TRUE(bracketed_v6->front().addr.is_ipv6());
  auto vec_of_v6 = EntityAddrVec::parse("[v2:[::1]:3300/0,v1:[::1]:6789/0]");
  ASSERT_TRUE(vec_of_v6);
  EXPECT_EQ(vec_of_v6->size(), 2u);
  EXPECT_EQ(EntityAddrVec{}.to_string(), "");
  for (const char* bad : {"[]", "[v2:1.2.3.4:1", "[v2:1.2.3.4:1,]", "[v2:1.2.3.4:1]x", ""})
    EXPECT_FALSE(EntityAddrVec::parse(bad)) << bad;
}

TEST(MonAddr, AmbiguousAddressesResolveAsCephDoes) {
  auto resolve = [](const char* text) {
    auto a = EntityAddr::parse(text);
    EXPECT_TRUE(a) << text;
    return resolve_mon_addr(*a).to_string();
  };
  EXPECT_EQ(resolve("127.0.0.1:6789"), "v1:127.0.0.1:6789/0");
  EXPECT_EQ(resolve("127.0.0.1:3300"), "v2:127.0.0.1:3300/0");
  EXPECT_EQ(resolve("127.0.0.1"), "[v2:127.0.0.1:3300/0,v1:127.0.0.1:6789/0]");
  EXPECT_EQ(resolve("127.0.0.1:13301"), "[v2:127.0.0.1:13301/0,v1:127.0.0.1:13301/0]");
  EXPECT_EQ(resolve("v2:127.0.0.1"), "v2:127.0.0.1:3300/0");
  EXPECT_EQ(resolve("v1:127.0.0.1"), "v1:127.0.0.1:6789/0");
  EXPECT_EQ(resolve("v2:127.0.0.1:6789"), "v2:127.0.0.1:6789/0");
  EXPECT_TRUE(resolve_mon_addr(EntityAddr{}).empty());
}

TEST(MonAddr, ParseMonHost) {
  auto hosts = parse_mon_host("[v2:10.0.0.1:3300/0,v1:10.0.0.1:6789/0], 10.0.0.2:6789;10.0.0.3");
  ASSERT_TRUE(hosts);
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].to_string(), "[v2:10.0.0.1:3300/0,v1:10.0.0.1:6789/0]");
  EXPECT_EQ((*hosts)[1].to_string(), "v1:10.0.0.2:6789/0");
  EXPECT_EQ((*hosts)[2].to_string(), "[v2:10.0.0.3:3300/0,v1:10.0.0.3:6789/0]");
  auto v2only = parse_mon_host("v2:127.0.0.1:13301");
  ASSERT_TRUE(v2only);
  EXPECT_EQ((*v2only)[0].to_string(), "v2:127.0.0.1:13301/0");
  EXPECT_FALSE(parse_mon_host(""));
  EXPECT_FALSE(parse_mon_host(" ,; "));
  EXPECT_FALSE(parse_mon_host("10.0.0.1:3300x"));
  EXPECT_FALSE(parse_mon_host("mon.example.com"));
}

TEST(EntityName, GoldenBytesAndText) {
  const EntityName n{kEntityTypeClient, "admin"};
  EXPECT_EQ(to_hex(encode_to_list(n)), norm_hex("08 00 00 00 05 00 00 00 61 64 6d 69 6e"));
  EXPECT_EQ(n.to_string(), "client.admin");
  auto p = EntityName::parse("client.admin");
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, n);
  EXPECT_EQ(EntityName::parse("mon.a")->type, kEntityTypeMon);
  EXPECT_EQ(EntityName::parse("osd.")->id, "");
  EXPECT_FALSE(EntityName::parse("admin"));
  EXPECT_FALSE(EntityName::parse("bogus.admin"));
  auto back = decode_from<EntityName>(encode_to_list(n), "test");
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, n);
  EXPECT_FALSE(decode_from<EntityName>(from_hex("08 00 00 00 06 00 00 00 61 64 6d 69 6e"), "t"));
}

TEST(EntityNameT, GoldenBytesAndText) {
  const EntityNameT n{kEntityTypeClient, 4099};
  EXPECT_EQ(to_hex(encode_to_list(n)), norm_hex("08 03 10 00 00 00 00 00 00"));
  EXPECT_EQ(n.to_string(), "client.4099");
  EXPECT_EQ((EntityNameT{kEntityTypeMon, 0}).to_string(), "mon.0");
  EXPECT_EQ((EntityNameT{kEntityTypeClient, -1}).to_string(), "client.?");
  EXPECT_EQ(*EntityNameT::parse("client.4099"), n);
  EXPECT_EQ(EntityNameT::parse("client.?")->num, -1);
  EXPECT_FALSE(EntityNameT::parse("client.x"));
  EXPECT_FALSE(EntityNameT::parse("client."));
  EXPECT_FALSE(EntityNameT::parse("client.-5"));
  auto back = decode_from<EntityNameT>(encode_to_list(n), "test");
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, n);
  EXPECT_FALSE(decode_from<EntityNameT>(from_hex("08 03 10 00 00 00 00 00"), "t"));
}

TEST(EntityTypes, Names) {
  EXPECT_EQ(entity_type_name(kEntityTypeMgr), "mgr");
  EXPECT_EQ(entity_type_name(0x40), "unknown");
  EXPECT_EQ(entity_type_from_name("osd"), kEntityTypeOsd);
  EXPECT_FALSE(entity_type_from_name("unknown"));
}

TEST(Features, AdvertisedAndRequiredSets) {
  EXPECT_EQ(features::kSupported, 0x3f01cfbdfffdffffull);
  EXPECT_EQ(features::kRequired, 0x0800000000000000ull);
  EXPECT_EQ(features::missing(features::kObservedMonClientRequired, features::kSupported), 0u);
  EXPECT_EQ(features::missing(features::kObservedMonClientRequired, 0),
            features::kObservedMonClientRequired);
  // A reused bit counts only with its incarnation.
  EXPECT_FALSE(features::has_feature(features::kServerNautilus, features::kMaskServerNautilus));
  EXPECT_TRUE(features::has_feature(features::kServerNautilus | features::kIncarnation3,
                                    features::kMaskServerNautilus));
}

}  // namespace
}  // namespace siphon::proto

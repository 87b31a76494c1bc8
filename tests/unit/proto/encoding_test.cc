#include <gtest/gtest.h>

#include <array>
#include <list>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "msgr/proto/encoding.h"
#include "proto_test_util.h"

namespace siphon::proto {
namespace {

using namespace test;  // proto_test_util.h

TEST(Encoder, IntegersAreLittleEndian) {
  Encoder e;
  e.u8(0x01);
  e.u16(0x0302);
  e.u32(0x07060504);
  e.u64(0x0f0e0d0c0b0a0908ull);
  e.s32(-2);
  e.s64(-3);
  e.boolean(true);
  e.boolean(false);
  e.be16(0x1234);
  EXPECT_EQ(to_hex(e.take()), norm_hex("01 0203 04050607 08090a0b0c0d0e0f fe ffffff"
                                       "fd ffffffffffffff 01 00 12 34"));
}

TEST(Encoder, StringsAndBlobsHaveU32Length) {
  Encoder e;
  e.string("admin");
  e.blob(BufferList::copy_of("xy"));
  e.string("");
  e.put("ok");  // a literal encodes as a string
  EXPECT_EQ(to_hex(e.take()), norm_hex("05000000 61646d696e 02000000 7879 00000000 02000000 6f6b"));
}

TEST(Encoder, Containers) {
  Encoder e;
  e.put(std::vector<std::uint32_t>{1, 2});
  e.put(std::list<std::string>{"a"});
  e.put(std::set<std::uint16_t>{3, 1});
  e.put(std::map<std::string, std::uint8_t>{{"b", 2}, {"a", 1}});
  e.put(std::pair<std::uint8_t, std::uint16_t>{9, 10});
  e.put(std::array<std::uint8_t, 3>{7, 8, 9});
  e.put(std::array<std::uint16_t, 2>{1, 2});
  EXPECT_EQ(to_hex(e.take()),
            norm_hex("02000000 01000000 02000000"            // vector<u32>
                     "01000000 01000000 61"                  // list<string>
                     "02000000 0100 0300"                    // set<u16>, sorted
                     "02000000 01000000 61 01 01000000 62 02" // map in key order
                     "09 0a00"                               // pair
                     "070809"                                // array<u8,3>: no count
                     "0100 0200"));                          // array<u16,2>: no count
}

TEST(Encoder, UTimeAndUuid) {
  Encoder e;
  e.put(UTime{0x6b0cdcdc, 5});
  const auto u = Uuid::parse("00112233-4455-6677-8899-aabbccddeeff");
  ASSERT_TRUE(u);
  e.put(*u);
  EXPECT_EQ(to_hex(e.take()),
            norm_hex("dcdc0c6b 05000000 00112233445566778899aabbccddeeff"));
}

TEST(Encoder, VersionedStructBackPatchesLength) {
  Encoder e;
  e.u8(0xaa);
  {
    auto s = e.start_struct(3, 2);
    e.u32(7);
    e.versioned(1, 1, [](Encoder& in) { in.u16(5); });
  }
  e.u8(0xbb);
  EXPECT_EQ(to_hex(e.take()),
            norm_hex("aa 03 02 0c000000 07000000 01 01 02000000 0500 bb"));
}

TEST(Encoder, TakingWhileAStructIsOpenNeverPatchesLaterBytes) {
  Encoder e;
  auto s = e.start_struct(1, 1);
  e.u8(1);
  const BufferList first = e.take();  // misuse: the struct is still open
  EXPECT_EQ(to_hex(first), norm_hex("01 01 00 00 00 00 01"));
  e.u32(0xaabbccdd);
  e.u8(2);
  s.finish();  // must not write into the new encoding
  EXPECT_EQ(to_hex(e.take()), norm_hex("dd cc bb aa 02"));
}

TEST(Encoder, LargeBlobsAreSharedAndCountedInStructLength) {
  std::string big(Encoder::kShareThreshold + 100, 'z');
  BufferList blob = BufferList::copy_of(big);
  Encoder e;
  e.versioned(1, 1, [&](Encoder& in) {
    in.blob(blob);
    in.u8(1);
  });
  BufferList out = e.take();
  ASSERT_EQ(out.length(), 6 + 4 + big.size() + 1);
  // The blob's memory is referenced, not copied.
  bool shared = false;
  for (const BufferPtr& p : out.ptrs())
    if (p.segment() == blob.ptrs().front().segment()) shared = true;
  EXPECT_TRUE(shared);
  Decoder d(out);
  const auto h = d.begin_struct(1, "s");
  EXPECT_EQ(h.struct_len, 4 + big.size() + 1);
  EXPECT_EQ(d.blob().to_string(), big);
  EXPECT_EQ(d.u8(), 1);
  d.end_struct(h);
  EXPECT_TRUE(d.ok());
  EXPECT_EQ(d.remaining(), 0u);
}

TEST(Encoder, AppendToExtendsAnExistingList) {
  BufferList out = BufferList::copy_of("hd");
  Encoder e;
  e.u16(0x0201);
  e.append_to(out);
  EXPECT_EQ(to_hex(out), "68 64 01 02");
  EXPECT_EQ(e.length(), 0u);
}

TEST(Decoder, ReadsWhatEncoderWrote) {
  Encoder e;
  e.u8(1);
  e.put(std::uint16_t{2});
  e.u32(3);
  e.u64(4);
  e.s32(-5);
  e.s64(-6);
  e.boolean(true);
  e.string("str");
  e.blob(BufferList::copy_of("blob"));
  e.put(std::map<std::string, std::vector<std::uint32_t>>{{"k", {1, 2, 3}}});
  e.put(std::set<std::string>{"x", "y"});
  e.put(UTime{10, 20});
  const BufferList bl = e.take();
  for (const BufferList& in : {bl, test::fragmented(bl)}) {
    Decoder d(in);
    EXPECT_EQ(d.u8(), 1);
    EXPECT_EQ(d.u16(), 2);
    EXPECT_EQ(d.u32(), 3u);
    EXPECT_EQ(d.u64(), 4u);
    EXPECT_EQ(d.s32(), -5);
    EXPECT_EQ(d.s64(), -6);
    EXPECT_TRUE(d.boolean());
    EXPECT_EQ(d.string(), "str");
    EXPECT_EQ(d.blob().to_string(), "blob");
    std::map<std::string, std::vector<std::uint32_t>> m;
    d.get(m);
    EXPECT_EQ(m.at("k"), (std::vector<std::uint32_t>{1, 2, 3}));
    std::set<std::string> s;
    d.get(s);
    EXPECT_EQ(s, (std::set<std::string>{"x", "y"}));
    UTime t;
    d.get(t);
    EXPECT_EQ(t, (UTime{10, 20}));
    EXPECT_TRUE(d.ok()) << d.error().message();
    EXPECT_EQ(d.remaining(), 0u);
  }
}

TEST(Decoder, ListPairArrayAndBigEndian) {
  Encoder e;
  e.put(std::list<std::int64_t>{-1, 2});
  e.put(std::pair<std::string, std::uint32_t>{"k", 9});
  e.put(std::array<std::uint32_t, 2>{5, 6});
  e.put(std::array<std::uint8_t, 2>{7, 8});
  e.be16(0x0ce4);
  const BufferList bl = e.take();
  Decoder d(bl);
  std::list<std::int64_t> l;
  std::pair<std::string, std::uint32_t> p;
  std::array<std::uint32_t, 2> a{};
  std::array<std::uint8_t, 2> b{};
  d.get(l).get(p).get(a).get(b);
  EXPECT_EQ(l, (std::list<std::int64_t>{-1, 2}));
  EXPECT_EQ(p.first, "k");
  EXPECT_EQ(p.second, 9u);
  EXPECT_EQ(a, (std::array<std::uint32_t, 2>{5, 6}));
  EXPECT_EQ(b, (std::array<std::uint8_t, 2>{7, 8}));
  EXPECT_EQ(d.be16(), 3300);
  EXPECT_TRUE(d.ok());
}

TEST(Decoder, FailedRawReadZeroFillsTheDestination) {
  const BufferList bl = from_hex("01 02");
  Decoder d(bl);
  std::array<std::uint8_t, 4> out{9, 9, 9, 9};
  d.raw(out.data(), out.size(), "digest");
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(out, (std::array<std::uint8_t, 4>{}));
}

TEST(Decoder, RefusesTemporaries) {
  // The decoder reads the list in place; binding it to a temporary would
  // dangle, so that does not compile.
  static_assert(!std::is_constructible_v<Decoder, BufferList&&>);
  static_assert(std::is_constructible_v<Decoder, const BufferList&>);
}

TEST(Decoder, BoolIsAnyNonZeroByte) {
  const BufferList bl = from_hex("00 01 02 ff");
  Decoder d(bl);
  EXPECT_FALSE(d.boolean());
  EXPECT_TRUE(d.boolean());
  EXPECT_TRUE(d.boolean());
  EXPECT_TRUE(d.boolean());
  EXPECT_TRUE(d.ok());
}

TEST(Decoder, TruncationIsAnErrorAndSticky) {
  const BufferList bl = from_hex("01 02 03");
  Decoder d(bl);
  EXPECT_EQ(d.u16("first"), 0x0201);
  EXPECT_EQ(d.u32("nonce"), 0u);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, errc::decode_error);
  EXPECT_EQ(d.error().field, "nonce");
  EXPECT_EQ(d.error().offset, 2u);
  EXPECT_EQ(d.error().value, 4u);  // needed
  EXPECT_EQ(d.error().limit, 1u);  // available
  // Sticky: later reads yield zero values and consume nothing.
  EXPECT_EQ(d.u8(), 0);
  EXPECT_EQ(d.string(), "");
  EXPECT_EQ(d.position(), 2u);
  EXPECT_EQ(d.remaining(), 0u);
  EXPECT_EQ(d.error().field, "nonce");  // the first error is kept
}

TEST(Decoder, StringLengthLargerThanInputIsRejectedBeforeAllocating) {
  const BufferList bl = from_hex("ffffffff 61 62");
  Decoder d(bl);
  EXPECT_EQ(d.string("id"), "");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().reason, "length exceeds remaining bytes");
  EXPECT_EQ(d.error().offset, 0u);  // where the length field starts
  EXPECT_EQ(d.error().value, 0xffffffffu);
  EXPECT_EQ(d.error().limit, 2u);
  Decoder d2(bl);
  EXPECT_TRUE(d2.blob().empty());
  EXPECT_FALSE(d2.ok());
}

TEST(Decoder, CountLargerThanRemainingBytesIsAnErrorNotAnAllocation) {
  // 0xffffffff u32 elements would be 16 GiB; only 4 bytes follow.
  const BufferList bl = from_hex("ffffffff 01000000");
  std::vector<std::uint32_t> v;
  DecodeLimits unlimited;
  unlimited.max_elements = 0xffffffffu;  // only the remaining-bytes rule applies
  Decoder d(bl, unlimited);
  d.get(v);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().reason, "count exceeds what the remaining bytes can hold");
  EXPECT_EQ(d.error().value, 0xffffffffu);
  EXPECT_EQ(d.error().limit, 1u);  // one u32 fits in the 4 remaining bytes
  EXPECT_TRUE(v.empty());
  // Each element needs 4 bytes: 2 elements cannot fit in 4 bytes either.
  const BufferList two = from_hex("02000000 01000000");
  Decoder d2(two);
  d2.get(v);
  EXPECT_FALSE(d2.ok());
  // Maps count key + value.
  const BufferList m = from_hex("02000000 01 02 03");
  std::map<std::uint8_t, std::uint8_t> mm;
  Decoder d3(m);
  d3.get(mm);
  EXPECT_FALSE(d3.ok());
}

TEST(Decoder, ElementLimitApplies) {
  Encoder e;
  e.put(std::vector<std::uint8_t>(100, 1));
  const BufferList bl = e.take();
  DecodeLimits lim;
  lim.max_elements = 99;
  Decoder d(bl, lim);
  std::vector<std::uint8_t> v;
  d.get(v);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().reason, "count exceeds the decoder's element limit");
  lim.max_elements = 100;
  Decoder ok(bl, lim);
  ok.get(v);
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(v.size(), 100u);
}

TEST(Decoder, NestedContainerCountsAreBoundedToo) {
  // vector<vector<u8>> claiming 2^20 inner vectors in 8 bytes.
  const BufferList bl = from_hex("00001000 00000000 00000000");
  std::vector<std::vector<std::uint8_t>> v;
  Decoder d(bl);
  d.get(v);
  EXPECT_FALSE(d.ok());
  EXPECT_TRUE(v.empty());
}

TEST(Decoder, VersionedStructSkipsUnknownTrailingBytes) {
  // A "v2" struct with an extra field, read by a v1 decoder, then a field
  // after the struct.
  Encoder e;
  e.versioned(2, 1, [](Encoder& in) {
    in.u32(42);
    in.string("added in v2");
  });
  e.u16(0xbeef);
  const BufferList bl = e.take();
  Decoder d(bl);
  std::uint32_t x = 0;
  d.versioned(1, "thing", [&](const Decoder::StructHeader& h) {
    EXPECT_EQ(h.struct_v, 2);
    EXPECT_EQ(h.struct_compat, 1);
    x = d.u32();
  });
  EXPECT_EQ(x, 42u);
  EXPECT_EQ(d.u16(), 0xbeef);
  EXPECT_TRUE(d.ok());
}

TEST(Decoder, StructCompatNewerThanDecoderIsRejected) {
  const BufferList bl = from_hex("03 02 04000000 01000000");
  Decoder d(bl);
  bool body_ran = false;
  d.versioned(1, "thing", [&](const Decoder::StructHeader&) { body_ran = true; });
  EXPECT_FALSE(body_ran);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().reason, "struct_compat is newer than this decoder supports");
  EXPECT_EQ(d.error().value, 2u);
  EXPECT_EQ(d.error().limit, 1u);
  EXPECT_EQ(d.error().offset, 1u);
  EXPECT_EQ(d.error().depth, 1u);
  EXPECT_EQ(d.error().context[0], "thing");
  // compat == max_v is fine.
  Decoder ok(bl);
  ok.versioned(2, "thing", [&](const Decoder::StructHeader&) { EXPECT_EQ(ok.u32(), 1u); });
  EXPECT_TRUE(ok.ok());
}

TEST(Decoder, StructLenBeyondInputIsRejected) {
  const BufferList bl = from_hex("01 01 09000000 01000000");
  Decoder d(bl);
  d.versioned(1, "thing", [&](const Decoder::StructHeader&) { d.u32(); });
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().reason, "struct_len exceeds remaining bytes");
  EXPECT_EQ(d.error().field, "struct_len");
  EXPECT_EQ(d.error().offset, 2u);
  EXPECT_EQ(d.error().value, 9u);
  EXPECT_EQ(d.error().limit, 4u);
}

TEST(Decoder, BodyCannotReadPastStructLen) {
  // struct_len 2 but the body reads a u32: the outer bytes are not touched.
  const BufferList bl = from_hex("01 01 02000000 aabb ccdd");
  Decoder d(bl);
  d.versioned(1, "inner", [&](const Decoder::StructHeader&) {
    EXPECT_EQ(d.remaining(), 2u);
    d.u32("field");
  });
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().field, "field");
  EXPECT_EQ(d.error().context[0], "inner");
  // A count inside the struct is checked against the struct's bytes.
  const BufferList c = from_hex("01 01 04000000 02000000 0100 0200");
  Decoder d2(c);
  std::vector<std::uint16_t> v;
  d2.versioned(1, "inner", [&](const Decoder::StructHeader&) { d2.get(v); });
  EXPECT_FALSE(d2.ok());
}

TEST(Decoder, NestedStructsRestoreTheOuterBound) {
  Encoder e;
  e.versioned(1, 1, [](Encoder& o) {
    o.versioned(5, 1, [](Encoder& i) {
      i.u8(1);
      i.u8(2);  // unknown to the reader
    });
    o.u32(77);
  });
  const BufferList bl = e.take();
  Decoder d(bl);
  std::uint32_t after = 0;
  d.versioned(1, "outer", [&](const Decoder::StructHeader&) {
    d.versioned(1, "inner", [&](const Decoder::StructHeader&) { EXPECT_EQ(d.u8(), 1); });
    after = d.u32();
  });
  EXPECT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(after, 77u);
}

TEST(Decoder, LegacyCompatLenVariants) {
  // MonMap uses DECODE_START_LEGACY_COMPAT_LEN_16(9, 3, 3): old encodings
  // (struct_v < 3) have a u16 version (one extra byte to skip), no compat
  // byte and no length.
  {
    const BufferList bl = from_hex("02 00 2a000000");
    Decoder d(bl);
    const auto h = d.begin_struct_legacy(9, 3, 3, 1, "MonMap");
    EXPECT_EQ(h.struct_v, 2);
    EXPECT_FALSE(h.has_len);
    EXPECT_EQ(d.u32(), 42u);
    d.end_struct(h);
    EXPECT_TRUE(d.ok());
  }
  {
    const BufferList bl = from_hex("09 06 05000000 2a000000 ff 11");
    Decoder d(bl);
    const auto h = d.begin_struct_legacy(9, 3, 3, 1, "MonMap");
    EXPECT_EQ(h.struct_v, 9);
    EXPECT_EQ(h.struct_compat, 6);
    EXPECT_TRUE(h.has_len);
    EXPECT_EQ(d.u32(), 42u);
    d.end_struct(h);  // skips the unknown byte
    EXPECT_EQ(d.u8(), 0x11);
    EXPECT_TRUE(d.ok());
  }
  {
    // compat too new.
    const BufferList bl = from_hex("0a 0a 00000000");
    Decoder d(bl);
    d.begin_struct_legacy(9, 3, 3, 1, "MonMap");
    EXPECT_FALSE(d.ok());
  }
  {
    // Version with compat byte but no length (compatv <= v < lenv).
    const BufferList bl = from_hex("04 01 2a000000");
    Decoder d(bl);
    const auto h = d.begin_struct_legacy(6, 3, 5, 0, "X");
    EXPECT_EQ(h.struct_compat, 1);
    EXPECT_FALSE(h.has_len);
    EXPECT_EQ(d.u32(), 42u);
    d.end_struct(h);
    EXPECT_TRUE(d.ok());
  }
  {
    // The skipped bytes must be present.
    const BufferList bl = from_hex("01");
    Decoder d(bl);
    d.begin_struct_legacy(9, 3, 3, 3, "X");
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().field, "legacy version bytes");
  }
}

TEST(Decoder, EveryTruncationOfAComplexEncodingFails) {
  Encoder e;
  e.versioned(2, 1, [](Encoder& in) {
    in.put(std::map<std::string, std::uint64_t>{{"osdmap", 5}, {"monmap", 7}});
    in.string("host");
    in.put(std::vector<UTime>{{1, 2}});
  });
  const BufferList bl = e.take();
  auto decode_all = [](const BufferList& in) {
    Decoder d(in);
    std::map<std::string, std::uint64_t> m;
    std::string s;
    std::vector<UTime> v;
    d.versioned(2, "t", [&](const Decoder::StructHeader&) {
      d.get(m);
      s = d.string();
      d.get(v);
    });
    return d.ok();
  };
  EXPECT_TRUE(decode_all(bl));
  for (std::size_t n = 0; n < bl.length(); ++n)
    EXPECT_FALSE(decode_all(test::prefix(bl, n))) << "prefix of " << n << " bytes decoded";
}

TEST(Decoder, RawListSharesInput) {
  const BufferList bl = BufferList::copy_of("abcdef");
  Decoder d(bl);
  d.skip(1);
  BufferList part = d.raw_list(3);
  EXPECT_EQ(part.to_string(), "bcd");
  EXPECT_EQ(part.ptrs().front().segment(), bl.ptrs().front().segment());
  d.raw_list(3);
  EXPECT_FALSE(d.ok());
}

TEST(DecodeError, MessageNamesContextFieldAndNumbers) {
  const BufferList bl = from_hex("01 01 02000000 0000");
  Decoder d(bl);
  Decoder::Scope scope(d, "CLIENT_IDENT");
  d.versioned(1, "entity_addr_t", [&](const Decoder::StructHeader&) { d.u32("nonce"); });
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message(),
            "decode error at byte 6 in CLIENT_IDENT > entity_addr_t: nonce: input ends inside "
            "this field (value 4, limit 2)");
}

TEST(DecodeFrom, WholeValueHelper) {
  const BufferList bl = encode_to_list(std::vector<std::string>{"a", "bc"});
  auto r = decode_from<std::vector<std::string>>(bl, "names");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::string>{"a", "bc"}));
  auto bad = decode_from<std::vector<std::string>>(test::prefix(bl, bl.length() - 1), "names");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.code(), errc::decode_error);
  EXPECT_EQ(bad.error().context[0], "names");
}

TEST(Uuid, ParseAndPrint) {
  const auto u = Uuid::parse("6A1B2C3D-0000-4000-8000-00000000BEEF");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->to_string(), "6a1b2c3d-0000-4000-8000-00000000beef");
  EXPECT_EQ(u->bytes[0], 0x6a);
  EXPECT_EQ(u->bytes[15], 0xef);
  EXPECT_FALSE(u->is_zero());
  EXPECT_TRUE(Uuid{}.is_zero());
  EXPECT_FALSE(Uuid::parse("6a1b2c3d00004000800000000000beef"));
  EXPECT_FALSE(Uuid::parse("6a1b2c3d-0000-4000-8000-00000000beeg"));
  EXPECT_FALSE(Uuid::parse("6a1b2c3d+0000-4000-8000-00000000beef"));
  EXPECT_FALSE(Uuid::parse(""));
  const BufferList enc = encode_to_list(*u);
  EXPECT_EQ(enc.length(), 16u);
  Decoder d(enc);
  Uuid back;
  d.get(back);
  EXPECT_EQ(back, *u);
}

TEST(UTime, NanosecondConversions) {
  const UTime t = UTime::from_nanoseconds(1'796'529'372'000'000'005ull);
  EXPECT_EQ(t, (UTime{1796529372, 5}));
  EXPECT_EQ(t.nanoseconds(), 1'796'529'372'000'000'005ull);
}

TEST(UTime, Print) {
  EXPECT_EQ((UTime{1796529372, 5}).to_string(), "1796529372.000000005");
  EXPECT_EQ((UTime{0, 999999999}).to_string(), "0.999999999");
}

// A small payload is one exact-size segment: a queued control frame (e.g. a
// KEEPALIVE2_ACK) must not pin a whole 4 KiB BufferList chunk for 8 bytes
// (found by the keepalive-flood hostile-peer test).
TEST(Encoder, TakeReturnsAnExactSizeSegment) {
  Encoder e;
  e.u64(42);
  const BufferList bl = e.take();
  ASSERT_EQ(bl.length(), 8u);
  ASSERT_EQ(bl.ptrs().size(), 1u);
  EXPECT_EQ(bl.ptrs().front().segment()->capacity(), 8u);
  // The encoder is reusable afterwards.
  e.u32(7);
  EXPECT_EQ(e.take().length(), 4u);
}

}  // namespace
}  // namespace siphon::proto

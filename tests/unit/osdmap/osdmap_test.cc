// OSDMap and CRUSH decoding against the reference map of a Ceph 16.2.15 lab
// cluster (data/osdmap-4osd.bin, epoch 88, as `ceph osd getmap` returned
// it), the hash test vectors of rados-client.md §2.2–2.6, and malformed
// input (every truncation, random corruption): errors, never a crash.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "rados/osdmap/hash.h"
#include "rados/osdmap/osdmap.h"
#include "test_data.h"

namespace siphon::osdmap {
namespace {

TEST(OsdmapHash, ObjectNameHashesMatchCeph) {
  // [W] rows of rados-client.md §2.2: printed by `ceph osd map` as the raw pg.
  EXPECT_EQ(str_hash_rjenkins("a"), 0x29eec818u);
  EXPECT_EQ(str_hash_rjenkins("foo"), 0x7fc1f406u);
  EXPECT_EQ(str_hash_rjenkins("eleven_char"), 0x26835d79u);
  EXPECT_EQ(str_hash_rjenkins("twelve_chars"), 0x93ed3221u);
  EXPECT_EQ(str_hash_rjenkins("benchmark_data_vm_21000_object0"), 0xe7c3f02du);
  EXPECT_EQ(str_hash_rjenkins("rbd_data.1234567890abcdef.0000000000000000"), 0xe7d0eecbu);
  EXPECT_EQ(str_hash_rjenkins(std::string_view("ns1\x1f" "foo")), 0xf4569544u);
  EXPECT_EQ(str_hash_linux(""), 0u);
  EXPECT_EQ(str_hash_linux("a"), 0x42f2u);
  EXPECT_EQ(str_hash_linux("foo"), 0x0024db2au);
  EXPECT_EQ(str_hash(kStrHashLinux, "obj1"), 0x01b158efu);
  EXPECT_EQ(str_hash(9, "obj1"), 0xffffffffu);
}

TEST(OsdmapHash, CrushHashesAndLn) {
  EXPECT_EQ(crush_hash32_2(0, 0, 0), 0x19ad4ce9u);
  EXPECT_EQ(crush_hash32_2(0, 6, 1), 0xd77484f9u);
  EXPECT_EQ(crush_hash32_2(0, 0x12345678, 0xffffffff), 0x54cdaa36u);
  EXPECT_EQ(crush_hash32_3(0, 0xd77484f9u, static_cast<std::uint32_t>(-5), 0), 0x051c79c1u);
  EXPECT_EQ(crush_hash32_3(0, 1, 2, 3), 0x735ad42bu);
  EXPECT_EQ(crush_hash32_2(1, 0, 0), 0u);  // unknown hash type, as Ceph
  EXPECT_EQ(crush_ln(0), 0u);
  EXPECT_EQ(crush_ln(1), 0x100000000000u);
  EXPECT_EQ(crush_ln(2), 0x195c01a39fbdu);
  EXPECT_EQ(crush_ln(0xff), 0x800000000000u);
  EXPECT_EQ(crush_ln(0x100), 0x80171e3b6d7au);
  EXPECT_EQ(crush_ln(0x8000), 0xf0002e2a60a0u);
  EXPECT_EQ(crush_ln(0xabcd), 0xf6cb4f87c148u);
  EXPECT_EQ(crush_ln(0xffff), 0xfffff0000000u);
}

TEST(OsdmapDecode, ReferenceMap) {
  const BufferList bl = test::read_data("osdmap-4osd.bin");
  ASSERT_EQ(bl.length(), 3977u);
  auto r = decode_osdmap(bl);
  ASSERT_TRUE(r) << r.error().message();
  const OsdMap& m = *r;
  EXPECT_EQ(m.fsid.to_string(), "3f0d7b25-4c86-4f9f-9976-657c90f59e74");
  EXPECT_EQ(m.epoch, 88u);
  EXPECT_EQ(m.flags, 0x588000u);
  ASSERT_EQ(m.pools.size(), 3u);
  EXPECT_EQ(m.lookup_pool("rep3"), 1);
  EXPECT_EQ(m.lookup_pool("rep2"), 2);
  EXPECT_EQ(m.lookup_pool("ec21"), 3);
  EXPECT_EQ(m.lookup_pool("nope"), -1);
  const Pool& rep2 = m.pools.at(2);
  EXPECT_EQ(rep2.type, kPoolReplicated);
  EXPECT_EQ(rep2.size, 2);
  EXPECT_EQ(rep2.pg_num, 12u);
  EXPECT_EQ(rep2.pg_num_mask, 15u);
  EXPECT_EQ(rep2.crush_rule, 1);
  EXPECT_EQ(rep2.object_hash, kStrHashRjenkins);
  EXPECT_TRUE(rep2.hashpspool());
  EXPECT_EQ(rep2.read_tier, -1);
  EXPECT_EQ(m.pools.at(3).type, kPoolErasure);
  EXPECT_EQ(m.pools.at(1).pg_num_mask, 31u);
  EXPECT_EQ(m.max_osd, 4);
  for (int o = 0; o < 4; ++o) EXPECT_TRUE(m.is_up(o)) << o;
  EXPECT_FALSE(m.exists(4));
  EXPECT_FALSE(m.exists(-1));
  EXPECT_EQ(m.weight(1), 0x8000u);
  EXPECT_EQ(m.weight(0), 0x10000u);
  EXPECT_EQ(m.affinity(2), 0x8000u);
  EXPECT_EQ(m.affinity(0), 0x10000u);
  ASSERT_EQ(m.client_addrs.size(), 4u);
  EXPECT_EQ(m.client_addrs[0].front().port(), 3601);
  EXPECT_EQ(m.pg_upmap.size(), 3u);
  EXPECT_EQ(m.pg_upmap.at(PgId{1, 4}), (std::vector<std::int32_t>{3, 2, 1}));
  EXPECT_EQ(m.pg_upmap_items.at(PgId{2, 0}),
            (std::vector<std::pair<std::int32_t, std::int32_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(m.pg_temp.size(), 3u);
  EXPECT_EQ(m.primary_temp.at(PgId{1, 7}), 3);
  EXPECT_EQ(m.erasure_code_profiles.count("ec21"), 1u);
  // CRUSH: the tree of crushmap-4osd.txt.
  const CrushMap& c = m.crush;
  EXPECT_EQ(c.max_devices, 4);
  EXPECT_EQ(c.tunables.choose_total_tries, 50u);
  EXPECT_EQ(c.tunables.chooseleaf_vary_r, 1);
  EXPECT_EQ(c.tunables.chooseleaf_stable, 1);
  EXPECT_EQ(c.tunables.allowed_bucket_algs, 54u);
  const CrushBucket* root = c.bucket(-1);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->alg, static_cast<std::uint8_t>(BucketAlg::straw2));
  EXPECT_EQ(root->items, (std::vector<std::int32_t>{-5, -7, -9}));
  EXPECT_EQ(root->item_weights, (std::vector<std::uint32_t>{0x30000, 0x18000, 0x10000}));
  EXPECT_EQ(c.item_names.at(-5), "hostA");
  EXPECT_EQ(c.type_names.at(11), "root");
  EXPECT_EQ(c.rule_names.at(2), "ec21");
  EXPECT_EQ(c.find_rule(1, 1, 3), 1);
  EXPECT_EQ(c.find_rule(2, 3, 3), 2);
  EXPECT_EQ(c.find_rule(2, 3, 4), -1);  // size outside min/max
  EXPECT_TRUE(c.choose_args.empty());
  EXPECT_EQ(c.class_names.at(0), "hdd");
}

TEST(OsdmapDecode, ExportedCrushMapEqualsTheEmbeddedOne) {
  auto m = decode_osdmap(test::read_data("osdmap-4osd.bin"));
  ASSERT_TRUE(m);
  auto c = decode_crush(test::read_data("crushmap-4osd.bin"));
  ASSERT_TRUE(c) << c.error().message();
  ASSERT_EQ(c->buckets.size(), m->crush.buckets.size());
  for (std::size_t i = 0; i < c->buckets.size(); ++i) {
    ASSERT_EQ(c->buckets[i].has_value(), m->crush.buckets[i].has_value());
    if (c->buckets[i]) {
      EXPECT_EQ(c->buckets[i]->items, m->crush.buckets[i]->items);
    }
  }
  EXPECT_EQ(c->item_names, m->crush.item_names);
}

TEST(OsdmapDecode, CrcMismatchIsAnError) {
  std::string bytes = test::read_data("osdmap-4osd.bin").to_string();
  bytes[100] = static_cast<char>(bytes[100] ^ 0x01);  // inside the pools
  auto r = decode_osdmap(BufferList::copy_of(bytes));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("crc"), std::string::npos) << r.error().message();
}

TEST(OsdmapDecode, ClassicEncodingIsRefusedByName) {
  auto r = decode_osdmap(BufferList::copy_of(std::string("\x06\x00\x00\x00\x00\x00", 6)));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("classic"), std::string::npos) << r.error().message();
}

TEST(OsdmapDecode, EveryTruncationFailsCleanly) {
  // The wrapper's length catches these up front...
  const std::string bytes = test::read_data("osdmap-4osd.bin").to_string();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto r = decode_osdmap(BufferList::copy_of(bytes.data(), n));
    EXPECT_FALSE(r) << "a map cut at " << n << " bytes decoded";
  }
  // ...the CRUSH encoding has no length: every field is read against the
  // bytes left. Its tail (tunables, classes, choose_args) is optional, so a
  // cut after the name maps still decodes, with legacy values.
  const std::string crush = test::read_data("crushmap-4osd.bin").to_string();
  std::size_t decoded = 0;
  for (std::size_t n = 0; n < crush.size(); ++n) {
    if (decode_crush(BufferList::copy_of(crush.data(), n))) ++decoded;
  }
  EXPECT_LT(decoded, 20u);
}

TEST(OsdmapDecode, RandomCorruptionNeverCrashes) {
  const std::string bytes = test::read_data("osdmap-4osd.bin").to_string();
  std::mt19937 rng(1234);
  int decoded = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string b = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<char>(rng());
    auto r = decode_osdmap(BufferList::copy_of(b));
    if (r) ++decoded;  // only when the flips hit bytes outside the crc's reach
  }
  EXPECT_LT(decoded, 3000);
}

TEST(OsdmapDecode, CorruptCrushNeverCrashes) {
  // The CRUSH bytes carry no crc of their own: corrupt them directly and
  // run placement over whatever still decodes.
  const std::string bytes = test::read_data("crushmap-4osd.bin").to_string();
  std::mt19937 rng(99);
  const std::vector<std::uint32_t> weights(4, 0x10000);
  for (int i = 0; i < 400; ++i) {
    std::string b = bytes;
    for (int f = 0; f < 3; ++f) b[rng() % b.size()] = static_cast<char>(rng());
    auto c = decode_crush(BufferList::copy_of(b));
    if (!c) continue;
    for (int rule = 0; rule < 3; ++rule)
      for (std::uint32_t x = 0; x < 4; ++x) (void)c->do_rule(rule, x, 3, weights, nullptr);
  }
}

}  // namespace
}  // namespace siphon::osdmap

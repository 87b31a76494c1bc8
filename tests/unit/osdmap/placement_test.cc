// Placement against what Ceph's own tools printed for the reference map
// (data/osdmap-4osd-expected.txt, read here line by line; nothing of it is
// copied into this file): section A, objects (`ceph osd map` and
// osdmaptool --test-map-object), section B, every PG (osdmaptool
// --test-map-pgs-dump-all: raw, up, acting, primaries), section C, crushtool
// --test --show-mappings vectors over the bare CRUSH map with reweights.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "rados/osdmap/placement.h"
#include "test_data.h"

namespace siphon::osdmap {
namespace {

std::vector<std::int32_t> parse_set(const std::string& s) {
  std::vector<std::int32_t> v;
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') {
    ADD_FAILURE() << "not a set: " << s;
    return v;
  }
  std::stringstream in(s.substr(1, s.size() - 2));
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(static_cast<std::int32_t>(std::stoll(item)));
  return v;
}

PgId parse_pgid(const std::string& s) {
  const auto dot = s.find('.');
  return PgId{std::stoull(s.substr(0, dot)),
              static_cast<std::uint32_t>(std::stoul(s.substr(dot + 1), nullptr, 16))};
}

// The lines of one section ("## A." ...) that are not comments.
std::vector<std::string> section(const std::string& text, char which) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string line;
  char cur = 0;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) {
      cur = line.size() > 3 ? line[3] : 0;
      continue;
    }
    if (cur == which && !line.empty()) out.push_back(line);
  }
  return out;
}

class ReferenceMap : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = decode_osdmap(test::read_data("osdmap-4osd.bin"));
    ASSERT_TRUE(r) << r.error().message();
    map_ = std::move(*r);
    text_ = test::read_text("osdmap-4osd-expected.txt");
  }
  OsdMap map_;
  std::string text_;
};

TEST_F(ReferenceMap, EveryObjectMapsAsCephPrinted) {
  int rows = 0;
  for (const std::string& line : section(text_, 'A')) {
    if (line[0] == '#') continue;
    std::stringstream in(line);
    std::string pool, object, nspace, rawhash, pgid, pps, up, upp, acting, actp, verified;
    in >> pool >> object >> nspace >> rawhash >> pgid >> pps >> up >> upp >> acting >> actp >> verified;
    ASSERT_FALSE(verified.empty()) << "short row: " << line;
    SCOPED_TRACE(line);
    const std::int64_t pool_id = map_.lookup_pool(pool);
    ASSERT_GE(pool_id, 0);
    const auto o = map_object(map_, pool_id, object, nspace == "-" ? "" : nspace);
    ASSERT_TRUE(o);
    EXPECT_EQ(o->raw_hash, std::stoul(rawhash, nullptr, 16));
    EXPECT_EQ(o->pg.pg, parse_pgid(pgid));
    EXPECT_EQ(o->pg.pps, std::stoul(pps, nullptr, 16));
    EXPECT_EQ(o->pg.up, parse_set(up));
    EXPECT_EQ(o->pg.up_primary, std::stoi(upp));
    EXPECT_EQ(o->pg.acting, parse_set(acting));
    EXPECT_EQ(o->pg.acting_primary, std::stoi(actp));
    ++rows;
  }
  EXPECT_EQ(rows, 28);
}

TEST_F(ReferenceMap, EveryPgMapsAsOsdmaptoolPrinted) {
  int rows = 0;
  for (const std::string& line : section(text_, 'B')) {
    if (line[0] == '#') continue;
    std::stringstream in(line);
    std::string pgid, pps, raw, up, upp, acting, actp;
    in >> pgid >> pps >> raw >> up >> upp >> acting >> actp;
    ASSERT_FALSE(actp.empty()) << "short row: " << line;
    SCOPED_TRACE(line);
    const PgMapping m = map_pg(map_, parse_pgid(pgid));
    EXPECT_EQ(m.pg, parse_pgid(pgid));
    EXPECT_EQ(m.pps, std::stoul(pps, nullptr, 16));
    EXPECT_EQ(m.raw, parse_set(raw));
    EXPECT_EQ(m.up, parse_set(up));
    EXPECT_EQ(m.up_primary, std::stoi(upp));
    EXPECT_EQ(m.acting, parse_set(acting));
    EXPECT_EQ(m.acting_primary, std::stoi(actp));
    ++rows;
  }
  EXPECT_EQ(rows, 52);  // 32 + 12 + 8 PGs
}

TEST_F(ReferenceMap, CrushtoolVectors) {
  auto crush = decode_crush(test::read_data("crushmap-4osd.bin"));
  ASSERT_TRUE(crush) << crush.error().message();
  std::vector<std::uint32_t> weights;
  int num_rep = 0, rows = 0, groups = 0;
  for (const std::string& line : section(text_, 'C')) {
    if (line[0] == '#') {
      // The crushtool command of the vectors that follow: its --num-rep and
      // --weight DEVICE W options (W as a float, scaled as crushtool does).
      const auto cmd = line.find("crushtool ");
      if (cmd == std::string::npos) continue;
      std::stringstream in(line.substr(cmd));
      std::string w;
      weights.assign(static_cast<std::size_t>(crush->max_devices), 0x10000);
      while (in >> w) {
        if (w == "--num-rep") in >> num_rep;
        if (w == "--weight") {
          int dev = 0;
          double f = 0;
          in >> dev >> f;
          weights.at(static_cast<std::size_t>(dev)) = static_cast<std::uint32_t>(f * 0x10000);
        }
      }
      ++groups;
      continue;
    }
    // "CRUSH rule 1 x 0 [0,3,2]"
    std::stringstream in(line);
    std::string crush_word, rule_word, x_word, set;
    int rule = 0;
    long long x = 0;
    in >> crush_word >> rule_word >> rule >> x_word >> x >> set;
    ASSERT_EQ(crush_word, "CRUSH") << line;
    SCOPED_TRACE(line);
    EXPECT_EQ(crush->do_rule(rule, static_cast<std::uint32_t>(x), num_rep, weights, nullptr),
              parse_set(set));
    ++rows;
  }
  EXPECT_EQ(groups, 5);
  EXPECT_GE(rows, 60);
}

TEST_F(ReferenceMap, MissingPoolMapsToNothing) {
  EXPECT_FALSE(map_object(map_, 42, "foo"));
  const PgMapping m = map_pg(map_, PgId{42, 0});
  EXPECT_TRUE(m.up.empty());
  EXPECT_EQ(m.acting_primary, -1);
}

}  // namespace
}  // namespace siphon::osdmap

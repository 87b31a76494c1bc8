// MOSDOp / MOSDOpReply / MOSDBackoff against Ceph's own bytes: every
// request and reply the rados CLI and the OSDs exchanged in
// shared/reference/ceph-lab/rados-put-get.pcap (data/rados-put-get-osd-ops.txt)
// decodes to the values rados-client.md §3.6-3.7 lists and re-encodes to the
// same bytes; a request built from fields alone equals the captured WRITE;
// malformed replies are errors, never crashes.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "rados/client/osd_messages.h"

namespace siphon::rados {
namespace {

struct Captured {
  int port = 0;
  bool request = false;
  std::uint64_t tid = 0;
  std::uint16_t compat = 0;
  BufferList front, data;
};

BufferList from_hex(const std::string& hex) {
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return BufferList::copy_of(bytes);
}

std::string field(const std::string& line, const std::string& key) {
  const auto at = line.find(" " + key + "=");
  if (at == std::string::npos) return {};
  const auto start = at + key.size() + 2;
  return line.substr(start, line.find(' ', start) - start);
}

std::vector<Captured> load() {
  std::ifstream in(SIPHON_RADOS_DATA "/rados-put-get-osd-ops.txt");
  std::vector<Captured> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Captured c;
    c.port = std::stoi(line.substr(0, line.find(' ')));
    c.request = field(line, "type") == "42";
    c.tid = std::stoull(field(line, "tid"));
    c.compat = static_cast<std::uint16_t>(std::stoi(field(line, "c")));
    c.front = from_hex(field(line, "front"));
    c.data = from_hex(field(line, "data"));
    out.push_back(std::move(c));
  }
  return out;
}

TEST(OsdMessages, TheCaptureHasTenRequestsAndTenReplies) {
  const auto all = load();
  ASSERT_EQ(all.size(), 20u);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].request, i % 2 == 0) << i;
}

TEST(OsdMessages, EveryCapturedRequestDecodesAndReencodesToTheSameBytes) {
  for (const Captured& c : load()) {
    if (!c.request) continue;
    auto r = decode_osd_op(c.front, c.data);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->features, 0x3f01cfbdfffdffffull);
    EXPECT_EQ(r->snapid, kNoSnap);
    EXPECT_EQ(r->shard, -1);
    EXPECT_EQ(r->pool, 1);
    ASSERT_EQ(r->ops.size(), 1u);
    BufferList data;
    const BufferList front = encode_osd_op(*r, data);
    EXPECT_EQ(front, c.front) << r->oid;
    EXPECT_EQ(data, c.data) << r->oid;
  }
}

// rados-client.md §3.6: `rados -p rep3 put objw payload64.bin --offset 0`.
TEST(OsdMessages, AWriteBuiltFromFieldsEqualsTheCapturedOne) {
  const auto all = load();
  const Captured* cap = nullptr;
  for (const Captured& c : all)
    if (c.request && c.port == 3609 && !c.data.empty()) cap = &c;
  ASSERT_NE(cap, nullptr);
  OsdOpRequest r;
  r.pgid = {1, 0x0a};
  r.hash = 0x8af227aa;
  r.epoch = 57;
  r.flags = flag::known_redir | flag::write | flag::ondisk;
  r.mtime = {0x6b0e997e, 0x1f781930};
  r.pool = 1;
  r.oid = "objw";
  r.ops.push_back(OsdOp::write(0, BufferList::copy_of("hello rados, this is a 64-byte test payload for the MOSDOp dump!")));
  r.features = 0x3f01cfbdfffdffffull;
  BufferList data;
  const BufferList front = encode_osd_op(r, data);
  EXPECT_EQ(front.length(), 213u);
  EXPECT_EQ(front, cap->front);
  EXPECT_EQ(data, cap->data);
}

TEST(OsdMessages, CapturedRepliesCarryWhatTheOsdAnswered) {
  const auto all = load();
  int checked = 0;
  for (std::size_t i = 1; i < all.size(); i += 2) {
    const Captured& req = all[i - 1];
    const Captured& c = all[i];
    auto q = decode_osd_op(req.front, req.data);
    ASSERT_TRUE(q);
    auto r = decode_osd_op_reply(c.front, c.data, c.compat);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->oid, q->oid);
    EXPECT_EQ(r->pgid, q->pgid);
    EXPECT_EQ(c.tid, req.tid);
    ASSERT_EQ(r->ops.size(), 1u);
    EXPECT_EQ(r->ops[0].op, q->ops[0].op);
    const std::uint16_t op = q->ops[0].op;
    // The ack type: ACK|ONDISK added to the request's flags when the op
    // executed; an error before execution (a missing object) keeps ONDISK only.
    if (r->result == -2) {
      EXPECT_EQ(op, op::stat);
      EXPECT_EQ(r->flags, 0x400014u);
    } else {
      EXPECT_EQ(r->flags, q->flags | flag::ack | flag::ondisk);
    }
    if (op == op::read) {
      EXPECT_EQ(r->result, 0);
      EXPECT_EQ(r->ops[0].outdata.length(), 64u);
      EXPECT_EQ(r->ops[0].length, 64u);  // rewritten to the bytes returned
    }
    if (op == op::stat && r->result == 0) {
      ASSERT_EQ(r->ops[0].outdata.length(), 16u);
      proto::Decoder d(r->ops[0].outdata);
      EXPECT_EQ(d.u64(), 64u);  // size, then the mtime
    }
    if (op == op::create && r->result != 0) {
      EXPECT_EQ(r->result, -17);  // EXCL on an existing object
      EXPECT_EQ(r->ops[0].rval, -17);
    }
    if (op == op::write) {
      EXPECT_EQ(r->replay_version, 1u);
      EXPECT_EQ(r->replay_epoch, 57u);
      EXPECT_EQ(r->user_version, 1u);
    }
    BufferList data;
    EXPECT_EQ(encode_osd_op_reply(*r, data), c.front);
    EXPECT_EQ(data, c.data);
    ++checked;
  }
  EXPECT_EQ(checked, 10);
}

TEST(OsdMessages, EveryTruncatedReplyIsAnError) {
  for (const Captured& c : load()) {
    if (c.request) continue;
    for (std::size_t n = 0; n < c.front.length(); ++n) {
      // The trailing blkin trace is optional (older senders); anything shorter fails.
      auto r = decode_osd_op_reply(c.front.slice(0, n), c.data, c.compat);
      if (n < c.front.length() - 24) {
        EXPECT_FALSE(r) << "length " << n;
      }
    }
  }
}

TEST(OsdMessages, ADataSegmentThatDoesNotMatchPayloadLenIsAnError) {
  for (const Captured& c : load()) {
    if (c.request || c.data.empty()) continue;
    BufferList more = c.data;
    more.append("x");
    auto r = decode_osd_op_reply(c.front, more, c.compat);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message().find("payload_len"), std::string::npos) << r.error().message();
    EXPECT_FALSE(decode_osd_op_reply(c.front, c.data.slice(0, c.data.length() - 1), c.compat));
  }
}

TEST(OsdMessages, ARedirectAndANewerCompatVersionAreRefused) {
  const auto all = load();
  const Captured& c = all[1];
  auto r = decode_osd_op_reply(c.front, c.data, 9);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("compat_version"), std::string::npos);
  auto ok = decode_osd_op_reply(c.front, c.data, c.compat);
  ASSERT_TRUE(ok);
  ok->redirect = true;
  BufferList data;
  BufferList front = encode_osd_op_reply(*ok, data);
  // encode writes do_redirect 0: set the byte (24 bytes of trace follow it).
  std::string bytes = front.to_string();
  bytes[bytes.size() - 25] = 1;
  auto red = decode_osd_op_reply(BufferList::copy_of(bytes), data, c.compat);
  ASSERT_FALSE(red);
  EXPECT_NE(red.error().message().find("redirect"), std::string::npos);
}

TEST(OsdMessages, AHugeOpCountIsRefusedBeforeAllocating) {
  OsdOpReply r;
  r.oid = "x";
  BufferList data;
  std::string bytes = encode_osd_op_reply(r, data).to_string();
  // num_ops sits after oid (4+1), pg_t (17), flags (8), result (4), bad_replay_version (12), epoch (4).
  const std::size_t at = 5 + 17 + 8 + 4 + 12 + 4;
  bytes[at] = bytes[at + 1] = bytes[at + 2] = bytes[at + 3] = '\xff';
  EXPECT_FALSE(decode_osd_op_reply(BufferList::copy_of(bytes), data, 2));
}

TEST(OsdMessages, RandomlyDamagedRepliesNeverCrash) {
  std::mt19937 rng(16);
  int decoded = 0;
  for (const Captured& c : load()) {
    if (c.request) continue;
    for (int i = 0; i < 2000; ++i) {
      std::string bytes = c.front.to_string();
      for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k)
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
      if (decode_osd_op_reply(BufferList::copy_of(bytes), c.data, c.compat)) ++decoded;
    }
  }
  EXPECT_GT(decoded, 0);  // many flips land in values, not structure
}

// rados-client.md §4.2: the BLOCK osd.1 sent for pg 1.15 (peered, not active).
constexpr const char* kBlock =
    "010112000000" "01" "0100000000000000" "15000000" "ffffffff" "ff" "42000000" "01" "0100000000000000"
    "040321000000" "00000000" "00000000" "0000000000000000" "15000000" "00" "00000000" "0100000000000000"
    "040321000000" "00000000" "00000000" "feffffffffffffff" "0d000000" "00" "00000000" "0100000000000000";

TEST(OsdMessages, TheCapturedBackoffDecodesAndReencodes) {
  const BufferList front = from_hex(kBlock);
  ASSERT_EQ(front.length(), 115u);
  auto b = decode_osd_backoff(front);
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(b->pgid, (osdmap::PgId{1, 0x15}));
  EXPECT_EQ(b->shard, -1);
  EXPECT_EQ(b->epoch, 66u);
  EXPECT_EQ(b->op, kBackoffBlock);
  EXPECT_EQ(b->id, 1u);
  EXPECT_EQ(b->begin.hash, 0x15u);
  EXPECT_EQ(b->begin.snap, 0u);
  EXPECT_EQ(b->end.hash, 0x0du);
  EXPECT_EQ(b->end.snap, kNoSnap);
  EXPECT_EQ(b->end.pool, 1);
  EXPECT_EQ(encode_osd_backoff(*b), front);
  for (std::size_t n = 0; n < front.length(); ++n) EXPECT_FALSE(decode_osd_backoff(front.slice(0, n))) << n;
}

// The backoff covers pg 1.15 of a pool with 32 PGs (mask 0x1f): every
// object whose hash ends in 0x15 sorts inside [begin, end), others outside.
TEST(OsdMessages, TheBackoffRangeHoldsExactlyThePgsObjects) {
  auto b = decode_osd_backoff(from_hex(kBlock));
  ASSERT_TRUE(b);
  std::mt19937 rng(1);
  int inside = 0;
  for (int i = 0; i < 20000; ++i) {
    HObject h;
    h.pool = 1;
    h.oid = "obj" + std::to_string(i);
    h.snap = kNoSnap;
    h.hash = static_cast<std::uint32_t>(rng());
    const bool in = compare_bitwise(b->begin, h) <= 0 && compare_bitwise(h, b->end) < 0;
    EXPECT_EQ(in, (h.hash & 0x1f) == 0x15) << std::hex << h.hash;
    inside += in;
  }
  EXPECT_GT(inside, 0);
}

}  // namespace
}  // namespace siphon::rados

namespace siphon::rados {
namespace {

// rados bench's write (rados-client.md §3.4, §5.2): SETALLOCHINT (FAILOK,
// expected object size, expected write size, hint flags 0x35) then WRITE,
// in one MOSDOp whose front is 277 bytes for a 30-character name.
TEST(OsdMessages, TheBenchAllocHintHasCephsBytes) {
  const OsdOp hint = OsdOp::setallochint(4096, 4096, kAllocHintBench);
  OsdOpRequest r;
  r.pgid = {1, 0x0d};
  r.hash = 0xe7c3f02d;
  r.epoch = 88;
  r.flags = flag::known_redir | flag::write | flag::ondisk;
  r.pool = 1;
  r.oid = "benchmark_data_vm_21000_object0";
  r.oid.resize(30);
  r.ops = {hint, OsdOp::write(0, BufferList::copy_of(std::string(4096, 'z')))};
  BufferList data;
  const BufferList front = encode_osd_op(r, data);
  EXPECT_EQ(front.length(), 277u);
  EXPECT_EQ(data.length(), 4096u);  // the hint carries no payload
  // ceph_osd_op: u16 0x2223, u32 FAILOK, u64 4096, u64 4096, u32 0x35 and
  // four zero bytes (the rest of the 28-byte union), u32 payload_len 0.
  const std::string golden(
      "\x23\x22"
      "\x02\x00\x00\x00"
      "\x00\x10\x00\x00\x00\x00\x00\x00"
      "\x00\x10\x00\x00\x00\x00\x00\x00"
      "\x35\x00\x00\x00\x00\x00\x00\x00"
      "\x00\x00\x00\x00"
      "\x00\x00\x00\x00",
      38);
  const std::string bytes = front.to_string();
  const std::size_t at = bytes.find(golden);
  ASSERT_NE(at, std::string::npos);
  // Right after the u16 op count, before the WRITE.
  EXPECT_EQ(bytes.substr(at - 2, 2), std::string("\x02\x00", 2));
  EXPECT_EQ(bytes.substr(at + 38, 2), std::string("\x01\x22", 2));
  // And it decodes back to the same fields.
  auto back = decode_osd_op(front, data);
  ASSERT_TRUE(back) << back.error().message();
  ASSERT_EQ(back->ops.size(), 2u);
  EXPECT_EQ(back->ops[0].op, op::setallochint);
  EXPECT_EQ(back->ops[0].flags, kOpFlagFailOk);
  EXPECT_EQ(back->ops[0].offset, 4096u);
  EXPECT_EQ(back->ops[0].length, 4096u);
  EXPECT_EQ(back->ops[0].truncate_size, 0x35u);
}

}  // namespace
}  // namespace siphon::rados

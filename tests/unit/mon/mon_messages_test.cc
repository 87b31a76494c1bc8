// Typed mon messages against real bytes: the MESSAGE frames of a captured
// `ceph -s` (ceph 16.2.15, data/msgr2-ceph-s.pcap) decode into the expected
// fields and re-encode byte for byte; MMonGetVersion(Reply) against the
// wire reference's bytes (msgr2-wire.md §10.7); round trips; MonMap
// versions; and malformed payloads, which throw and never crash.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "msgr/mon/messages.h"
#include "msgr/proto/frame.h"
#include "msgr/proto/message_header.h"
#include "pcap_streams.h"

namespace siphon::mon {
namespace {

struct Captured {
  proto::MessageHeader2 header;
  BufferList front, data;
};

// The MESSAGE frames of one direction of one captured connection.
std::vector<Captured> messages(std::size_t stream, bool from_server) {
  std::vector<testing::TcpStream> streams;
  std::string error;
  EXPECT_TRUE(testing::read_tcp_streams(std::string(SIPHON_INTEROP_DATA) + "/msgr2-ceph-s.pcap",
                                        3310, streams, error))
      << error;
  std::vector<Captured> out;
  if (stream >= streams.size()) return out;
  const auto& bytes = from_server ? streams[stream].server_to_client : streams[stream].client_to_server;
  BufferList bl = BufferList::copy_of(bytes.data(), bytes.size());
  const auto banner = proto::decode_banner(bl);
  bl.consume_front(banner.consumed);
  proto::FrameDecoder dec(proto::FrameRev::rev1, proto::FrameLimits{});
  dec.feed(std::move(bl));
  proto::Frame f;
  while (dec.next(f) == proto::FrameDecoder::Status::frame) {
    if (f.tag != proto::Tag::message) continue;
    auto h = proto::MessageHeader2::decode(f.segments[0]);
    EXPECT_TRUE(h.has_value());
    out.push_back({*h, f.segments[1], f.segments[3]});
  }
  return out;
}

// What the messenger does on receipt: a registry instance with the
// sender's header and payloads, then decode_payload().
template <class M>
boost::intrusive_ptr<M> receive(const Captured& c) {
  MessageRegistry reg;
  register_mon_messages(reg);
  MessageRef m = reg.create(c.header.type);
  EXPECT_TRUE(m) << "type " << c.header.type << " not registered";
  auto typed = boost::dynamic_pointer_cast<M>(m);
  EXPECT_TRUE(typed);
  typed->header().version = c.header.version;
  typed->header().compat_version = c.header.compat_version;
  typed->header().tid = c.header.tid;
  typed->front() = c.front;
  typed->data() = c.data;
  typed->decode_payload();
  return typed;
}

template <class M>
BufferList reencode(M& m) {
  m.front().clear();
  m.encode_payload(0);
  return m.front();
}

TEST(MonMessages, CapturedMonMapDecodesAndReencodesByteForByte) {
  const auto msgs = messages(1, true);
  ASSERT_GE(msgs.size(), 3u);
  ASSERT_EQ(msgs[0].header.type, kMsgMonMap);
  auto m = receive<MMonMap>(msgs[0]);
  const MonMap& map = m->monmap;
  EXPECT_EQ(map.decoded_version, 9);
  EXPECT_EQ(map.epoch, 1u);
  EXPECT_FALSE(map.fsid.is_zero());
  ASSERT_EQ(map.size(), 1u);
  EXPECT_EQ(map.ranks[0], "a");
  const MonInfo* a = map.by_rank(0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->public_addrs.to_string(), "v2:127.0.0.1:3310/0");
  EXPECT_EQ(map.min_mon_release, 16);
  EXPECT_EQ(release_name(map.min_mon_release), "pacific");
  EXPECT_EQ(map.persistent_features, 0xffu);
  EXPECT_EQ(mon_feature_names(map.persistent_features).back(), "elector-pinging");
  EXPECT_EQ(map.election_strategy, 1);
  EXPECT_FALSE(map.stretch_mode_enabled);
  EXPECT_EQ(proto::encode_to_list(map), m->monmap_bl) << "MonMap v9 re-encoding differs";
  const BufferList original = msgs[0].front;
  m->monmap_bl.clear();  // encode from the decoded map
  EXPECT_EQ(reencode(*m), original);
}

TEST(MonMessages, CapturedSubscribeDecodesAndReencodes) {
  const auto msgs = messages(1, false);
  std::vector<std::map<std::string, MMonSubscribe::Item>> seen;
  for (const auto& c : msgs) {
    if (c.header.type != kMsgMonSubscribe) continue;
    EXPECT_EQ(c.header.version, 3);
    EXPECT_EQ(c.header.compat_version, 1);
    auto m = receive<MMonSubscribe>(c);
    seen.push_back(m->what);
    EXPECT_EQ(reencode(*m), c.front);
  }
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_TRUE(seen[0].count("monmap"));
  EXPECT_TRUE(seen[1].count("mgrmap") || seen[1].count("osdmap"));
}

TEST(MonMessages, CapturedCommandsAndAcks) {
  const auto out = messages(1, false);
  std::vector<std::string> cmds;
  for (const auto& c : out) {
    if (c.header.type != kMsgMonCommand) continue;
    auto m = receive<MMonCommand>(c);
    ASSERT_EQ(m->cmd.size(), 1u);
    cmds.push_back(m->cmd[0]);
    EXPECT_EQ(m->paxos, PaxosHeader{});
    EXPECT_FALSE(m->fsid.is_zero());
    EXPECT_EQ(reencode(*m), c.front);
  }
  ASSERT_EQ(cmds.size(), 2u);
  EXPECT_EQ(cmds[0], R"({"prefix": "get_command_descriptions"})");
  EXPECT_EQ(cmds[1], R"({"prefix": "status"})");
  std::vector<std::string> outputs;
  for (const auto& c : messages(1, true)) {
    if (c.header.type != kMsgMonCommandAck) continue;
    auto m = receive<MMonCommandAck>(c);
    EXPECT_EQ(m->r, 0);
    EXPECT_EQ(reencode(*m), c.front);
    ASSERT_EQ(m->cmd.size(), 1u);
    outputs.push_back(m->data().to_string());
  }
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].size(), 73271u);
  EXPECT_EQ(outputs[0].front(), '{');
  EXPECT_NE(outputs[1].find("cluster:"), std::string::npos);
  EXPECT_NE(outputs[1].find("HEALTH_OK"), std::string::npos);
}

BufferList hex(const std::string& h) {
  std::vector<std::uint8_t> b;
  for (std::size_t i = 0; i + 1 < h.size();) {
    if (h[i] == ' ') {
      ++i;
      continue;
    }
    b.push_back(static_cast<std::uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
    i += 2;
  }
  return BufferList::copy_of(b.data(), b.size());
}

TEST(MonMessages, GetVersionMatchesTheWireReference) {
  // msgr2-wire.md §10.7: front of MMonGetVersion{handle 1, "osdmap"} and of
  // the mon's reply {handle 1, version 1, oldest 1}, v2/compat 2.
  auto q = make_message<MMonGetVersion>();
  q->handle = 1;
  q->what = "osdmap";
  EXPECT_EQ(reencode(*q), hex("01 00 00 00 00 00 00 00 06 00 00 00 6f 73 64 6d 61 70"));
  EXPECT_EQ(q->get_version(), 1);
  Captured reply{proto::MessageHeader2::make(kMsgMonGetVersionReply, 1, 1, 2, 2),
                 hex("01 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00"), {}};
  auto r = receive<MMonGetVersionReply>(reply);
  EXPECT_EQ(r->handle, 1u);
  EXPECT_EQ(r->version, 1u);
  EXPECT_EQ(r->oldest_version, 1u);
  EXPECT_EQ(reencode(*r), reply.front);
  // A version 1 sender has no oldest_version.
  reply.header.version = 1;
  reply.front = hex("07 00 00 00 00 00 00 00 05 00 00 00 00 00 00 00");
  r = receive<MMonGetVersionReply>(reply);
  EXPECT_EQ(r->version, 5u);
  EXPECT_EQ(r->oldest_version, 0u);
}

TEST(MonMessages, PingRoundTrip) {
  auto p = make_message<MPing>();
  EXPECT_TRUE(reencode(*p).empty());  // a client's ping: header only
  p->json = R"({"health": {}})";
  Captured c{proto::MessageHeader2::make(kMsgPing, 2, 0), reencode(*p), {}};
  EXPECT_EQ(receive<MPing>(c)->json, p->json);
}

MonMap sample_map() {
  MonMap m;
  m.fsid = *proto::Uuid::parse("412d7f51-b85c-4e5b-a10c-3e23e03c277e");
  m.epoch = 3;
  m.created = {1796529372, 189263000};
  m.last_changed = {1796529400, 5};
  m.persistent_features = 0xff;
  for (const char* n : {"b", "a", "c"}) {
    MonInfo i;
    i.name = n;
    i.public_addrs = *EntityAddrVec::parse(std::string("[v2:10.0.0.") + (n[0] == 'a' ? "1" : n[0] == 'b' ? "2" : "3") +
                                           ":3300/0,v1:10.0.0." + (n[0] == 'a' ? "1" : n[0] == 'b' ? "2" : "3") + ":6789/0]");
    i.priority = 1;
    i.weight = 2;
    i.crush_loc = {{"host", n}};
    m.mon_info[n] = i;
  }
  m.ranks = {"a", "b", "c"};
  m.min_mon_release = 16;
  m.removed_ranks = {4};
  m.disallowed_leaders = {"c"};
  m.tiebreaker_mon = "c";
  return m;
}

TEST(MonMessages, MonMapRoundTripsAndLegacyVersionsDecode) {
  const MonMap m = sample_map();
  auto r = proto::decode_from<MonMap>(proto::encode_to_list(m), "MonMap");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, m);
  // v4 (a pre-Nautilus mon): a legacy mon_addr map instead of mon_info;
  // ranks are computed (by address) and the release inferred from the features.
  proto::Encoder e4;
  e4.versioned(4, 3, [&](proto::Encoder& b) {
    proto::encode(b, m.fsid);
    b.u32(7);
    b.u32(2);
    for (const char* n : {"x", "y"}) {
      b.string(n);
      EntityAddr::parse(std::string("v1:10.0.0.") + (n[0] == 'x' ? "9" : "8") + ":6789/0")->encode_legacy(b);
    }
    proto::encode(b, m.last_changed);
    proto::encode(b, m.created);
    for (std::uint64_t f : {std::uint64_t{0x1f}, std::uint64_t{0}}) b.versioned(1, 1, [&](proto::Encoder& s) { s.u64(f); });
  });
  auto v4 = proto::decode_from<MonMap>(e4.take(), "MonMap");
  ASSERT_TRUE(v4) << v4.error().message();
  EXPECT_EQ(v4->epoch, 7u);
  EXPECT_EQ(v4->ranks, (std::vector<std::string>{"y", "x"}));  // 10.0.0.8 before 10.0.0.9
  EXPECT_EQ(v4->min_mon_release, 14);                          // nautilus bit (4) set
  EXPECT_EQ(v4->mon_info.at("x").public_addrs.to_string(), "v1:10.0.0.9:6789/0");
}

TEST(MonMessages, MalformedPayloadsThrowAndNeverCrash) {
  std::vector<std::pair<std::uint16_t, Captured>> corpus;
  for (bool from_server : {false, true})
    for (const auto& c : messages(1, from_server))
      if (c.header.type == kMsgMonMap || c.header.type == kMsgMonSubscribe ||
          c.header.type == kMsgMonCommand || c.header.type == kMsgMonCommandAck)
        corpus.emplace_back(c.header.type, c);
  ASSERT_GE(corpus.size(), 7u);
  MessageRegistry reg;
  register_mon_messages(reg);
  std::mt19937 rng(42);
  std::size_t threw = 0;
  for (const auto& entry : corpus) {  // (clang 14 cannot capture structured bindings)
    const std::uint16_t type = entry.first;
    const Captured& c = entry.second;
    const std::string bytes = c.front.to_string();
    auto attempt = [&](const std::string& front) {
      MessageRef m = reg.create(type);
      m->header().version = c.header.version;
      m->front() = BufferList::copy_of(front);
      try {
        m->decode_payload();
      } catch (const MonDecodeError&) {
        ++threw;
      }
    };
    for (std::size_t len = 0; len < bytes.size(); ++len) attempt(bytes.substr(0, len));
    for (int i = 0; i < 200; ++i) {
      std::string b = bytes;
      for (int k = 0; k < 3; ++k) b[rng() % b.size()] = static_cast<char>(rng());
      attempt(b);
    }
  }
  EXPECT_GT(threw, 100u);
  // An MMonMap whose blob claims more bytes than there are.
  MMonMap m;
  m.front() = hex("ff ff ff 7f 09 06");
  EXPECT_THROW(m.decode_payload(), MonDecodeError);
}

}  // namespace
}  // namespace siphon::mon

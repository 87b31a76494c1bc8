#include <gtest/gtest.h>

#include <string>

#include "msgr/base/crc32c.h"
#include "msgr/proto/control.h"
#include "proto_test_util.h"

namespace siphon::proto {
namespace {

using namespace test;  // proto_test_util.h

// Payloads copied from msgr2-wire.md §4.6 / §10. Each dump's trailing frame
// CRC (crc32c seed -1 over the payload) is checked too, which proves the
// bytes below were transcribed correctly.
const std::string kClientHello = std::string("08 ") + kMonAddrHex;
constexpr const char* kMonHello =
    "01 01 01 01 1c 00 00 00 02 00 00 00 00 00 00 00 10 00 00 00 02 00 d7 dc 7f 00 00 01"
    " 00 00 00 00 00 00 00 00";
constexpr const char* kAuthRequest =
    "01 00 00 00 01 00 00 00 01 00 00 00 16 00 00 00 0a 08 00 00 00 05 00 00 00 61 64 6d 69 6e"
    " 00 00 00 00 00 00 00 00";
constexpr const char* kAuthDone = "04 10 00 00 00 00 00 00 01 00 00 00 00 00 00 00";
constexpr const char* kClientIdent =
    "02 01 00 00 00"
    " 01 01 01 1c 00 00 00 03 00 00 00 78 56 34 12"
    " 10 00 00 00 02 00 00 00 7f 00 00 01 00 00 00 00 00 00 00 00"
    " 01 01 01 1c 00 00 00 02 00 00 00 00 00 00 00"
    " 10 00 00 00 02 00 0c e4 7f 00 00 01 00 00 00 00 00 00 00 00"
    " 03 10 00 00 00 00 00 00"
    " 01 00 00 00 00 00 00 00"
    " ff ff fd ff bd cf 01 3f"
    " 00 00 00 00 00 00 00 00"
    " 01 00 00 00 00 00 00 00"
    " 00 00 00 00 00 00 00 00";
constexpr const char* kServerIdent =
    "02 01 00 00 00 01 01 01 1c 00 00 00 02 00 00 00"
    " 00 00 00 00 10 00 00 00 02 00 33 f5 7f 00 00 01"
    " 00 00 00 00 00 00 00 00"
    " 00 00 00 00 00 00 00 00"
    " 04 00 00 00 00 00 00 00"
    " ff ff fd ff bd cf 01 3f"
    " 00 00 04 02 00 02 01 0c"
    " 01 00 00 00 00 00 00 00"
    " 00 00 00 00 00 00 00 00";
constexpr const char* kKeepalive2 = "dc dc 0c 6b 00 00 00 00";
constexpr const char* kAck5 = "05 00 00 00 00 00 00 00";

std::uint32_t frame_crc(const BufferList& payload) { return payload.crc32c(0xffffffffu); }

EntityAddr mon_addr(std::uint16_t port = 3300) {
  return EntityAddr(AddrType::msgr2, NetAddress::ipv4(0x7f000001, port), 0);
}
EntityAddr client_addr() {
  return EntityAddr(AddrType::any, NetAddress::ipv4(0x7f000001, 0), 0x12345678);
}

TEST(ControlGolden, ClientHello) {
  const Hello h{kEntityTypeClient, mon_addr()};
  const BufferList p = h.encode();
  EXPECT_EQ(p.length(), 36u);
  EXPECT_EQ(to_hex(p), norm_hex(kClientHello));
  EXPECT_EQ(frame_crc(p), 0x073e887du);
  auto back = Hello::decode(p);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, h);
}

TEST(ControlGolden, MonHelloObserved) {
  const BufferList p = from_hex(kMonHello);
  ASSERT_EQ(frame_crc(p), 0xfb2cff6eu);
  auto h = Hello::decode(p);
  ASSERT_TRUE(h) << h.error().message();
  EXPECT_EQ(h->entity_type, kEntityTypeMon);
  EXPECT_EQ(h->peer_addr.to_string(), "v2:127.0.0.1:55260/0");
}

TEST(ControlGolden, AuthRequestNoneToMon) {
  AuthRequest r;
  r.method = kAuthMethodNone;
  r.preferred_modes = {kConModeCrc};
  r.auth_payload = auth_none_mon_payload(EntityName{kEntityTypeClient, "admin"}, 0);
  const BufferList p = r.encode();
  EXPECT_EQ(p.length(), 38u);
  EXPECT_EQ(to_hex(p), norm_hex(kAuthRequest));
  EXPECT_EQ(frame_crc(p), 0x0ce5edd8u);
  auto back = AuthRequest::decode(p);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, r);
  auto none = AuthNonePayload::decode(back->auth_payload);
  ASSERT_TRUE(none) << none.error().message();
  EXPECT_TRUE(none->is_mon());
  EXPECT_EQ(none->name.to_string(), "client.admin");
  EXPECT_EQ(none->global_id, 0u);
}

TEST(ControlGolden, AuthDoneObserved) {
  const BufferList p = from_hex(kAuthDone);
  ASSERT_EQ(frame_crc(p), 0x563152efu);
  auto d = AuthDone::decode(p);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->global_id, 4100u);
  EXPECT_EQ(d->con_mode, kConModeCrc);
  EXPECT_TRUE(d->auth_payload.empty());
  EXPECT_EQ(to_hex(d->encode()), norm_hex(kAuthDone));
}

TEST(ControlGolden, AuthSignatureZeros) {
  const AuthSignature s{};
  const BufferList p = s.encode();
  EXPECT_EQ(p.length(), 32u);  // no length prefix (pitfall 24)
  EXPECT_EQ(frame_crc(p), 0x756ec955u);
  auto back = AuthSignature::decode(p);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, s);
}

TEST(ControlGolden, ClientIdentEncodesExactly) {
  ClientIdent c;
  c.addrs = EntityAddrVec(client_addr());
  c.target_addr = mon_addr();
  c.gid = 4099;
  c.global_seq = 1;
  c.supported_features = features::kSupported;
  c.required_features = 0;
  c.flags = kMsgConnectLossy;
  c.cookie = 0;
  const BufferList p = c.encode();
  EXPECT_EQ(p.length(), 123u);
  EXPECT_EQ(to_hex(p), norm_hex(kClientIdent));
  EXPECT_EQ(frame_crc(p), 0xae4e5f6cu);
  auto back = ClientIdent::decode(p);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, c);
}

TEST(ControlGolden, ServerIdentObserved) {
  const BufferList p = from_hex(kServerIdent);
  ASSERT_EQ(p.length(), 88u);
  ASSERT_EQ(frame_crc(p), 0x91251a53u);
  auto s = ServerIdent::decode(p);
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->addrs.to_string(), "v2:127.0.0.1:13301/0");
  EXPECT_TRUE(s->addrs.contains(mon_addr(13301)));
  EXPECT_EQ(s->gid, 0);
  EXPECT_EQ(s->global_seq, 4u);
  EXPECT_EQ(s->supported_features, 0x3f01cfbdfffdffffull);
  EXPECT_EQ(s->required_features, features::kObservedMonClientRequired);
  EXPECT_EQ(s->flags, kMsgConnectLossy);
  EXPECT_EQ(s->cookie, 0u);
  EXPECT_EQ(to_hex(s->encode()), norm_hex(kServerIdent));
}

TEST(ControlGolden, AuthBadMethodObserved) {
  // §10.11: method CEPHX, -EOPNOTSUPP, methods [NONE], modes [SECURE, CRC].
  const BufferList p = from_hex("02 00 00 00 a1 ff ff ff 01 00 00 00 01 00 00 00"
                                " 02 00 00 00 02 00 00 00 01 00 00 00");
  auto b = AuthBadMethod::decode(p);
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(b->method, kAuthMethodCephx);
  EXPECT_EQ(b->result, -95);
  EXPECT_EQ(b->allowed_methods, std::vector<std::uint32_t>{kAuthMethodNone});
  EXPECT_EQ(b->allowed_modes, (std::vector<std::uint32_t>{kConModeSecure, kConModeCrc}));
  EXPECT_EQ(to_hex(b->encode()), to_hex(p));
}

TEST(ControlGolden, IdentMissingFeatures) {
  const IdentMissingFeatures m{features::kObservedMonClientRequired};
  EXPECT_EQ(to_hex(m.encode()), norm_hex("00 00 04 02 00 02 01 0c"));
}

TEST(ControlGolden, KeepaliveAndAck) {
  const Keepalive2 k{UTime{0x6b0cdcdc, 0}};
  EXPECT_EQ(to_hex(k.encode()), norm_hex(kKeepalive2));
  EXPECT_EQ(frame_crc(k.encode()), 0x31971f7eu);
  // The ACK echoes the same 8 bytes.
  auto ack = Keepalive2Ack::decode(k.encode());
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->timestamp, k.timestamp);
  const Ack a{5};
  EXPECT_EQ(to_hex(a.encode()), norm_hex(kAck5));
  EXPECT_EQ(frame_crc(a.encode()), 0x1bf6b23fu);
}

// Round trip, fragmentation, truncation and trailing-byte behaviour for one
// payload value.
template <class T>
void check_payload(const T& sample) {
  SCOPED_TRACE(std::string(T::kName));
  const BufferList p = sample.encode();
  auto back = T::decode(p);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, sample);
  auto frag = T::decode(test::fragmented(p));
  ASSERT_TRUE(frag) << frag.error().message();
  EXPECT_EQ(*frag, sample);
  // Trailing bytes from a newer peer are ignored.
  BufferList longer = p;
  longer.append("\x01\x02\x03", 3);
  auto tolerant = T::decode(longer);
  ASSERT_TRUE(tolerant) << tolerant.error().message();
  EXPECT_EQ(*tolerant, sample);
  // Every truncation is an error naming the payload.
  for (std::size_t n = 0; n < p.length(); ++n) {
    auto r = T::decode(test::prefix(p, n));
    ASSERT_FALSE(r) << "prefix of " << n << " bytes decoded";
    EXPECT_EQ(r.code(), errc::decode_error);
    EXPECT_EQ(r.error().context[0], T::kName);
    EXPECT_FALSE(r.error().message().empty());
  }
  // Frames.
  const Frame f = sample.frame();
  EXPECT_EQ(f.tag, T::kTag);
  auto via_frame = decode_control<T>(f);
  ASSERT_TRUE(via_frame);
  EXPECT_EQ(*via_frame, sample);
}

TEST(ControlRoundTrip, EveryPayload) {
  const EntityAddrVec two({mon_addr(), EntityAddr(AddrType::legacy,
                                                  NetAddress::ipv4(0x7f000001, 6789), 0)});
  check_payload(Hello{kEntityTypeOsd, client_addr()});
  check_payload(AuthRequest{kAuthMethodCephx, {kConModeSecure, kConModeCrc},
                            BufferList::copy_of("ticket")});
  check_payload(AuthRequest{kAuthMethodNone, {}, {}});
  check_payload(AuthBadMethod{kAuthMethodCephx, -95, {1, 2}, {2, 1}});
  check_payload(AuthReplyMore{BufferList::copy_of("more")});
  check_payload(AuthRequestMore{BufferList::copy_of(std::string(1000, 'm'))});
  check_payload(AuthDone{4100, kConModeSecure, BufferList::copy_of("secret")});
  AuthSignature sig;
  for (std::size_t i = 0; i < sig.sha256.size(); ++i) sig.sha256[i] = static_cast<std::uint8_t>(i);
  check_payload(sig);
  check_payload(ClientIdent{two, mon_addr(), -1, 7, features::kSupported, features::kRequired,
                            0, 0x1122334455667788ull});
  check_payload(ServerIdent{two, 3, 9, features::kSupported, features::kRequired,
                            kMsgConnectLossy, 0xabcdef});
  check_payload(IdentMissingFeatures{features::kObservedMonClientRequired});
  check_payload(SessionReconnect{two, 1, 2, 3, 4, 5});
  check_payload(SessionReset{true});
  check_payload(SessionReset{false});
  check_payload(SessionRetry{12});
  check_payload(SessionRetryGlobal{13});
  check_payload(SessionReconnectOk{14});
  check_payload(Wait{});
  check_payload(Keepalive2{UTime{1, 2}});
  check_payload(Keepalive2Ack{UTime{3, 4}});
  check_payload(Ack{0xffffffffffffffffull});
}

TEST(ControlMalformed, BadAddressInsideIdent) {
  BufferList p = from_hex(kClientIdent);
  std::string bytes = p.to_string();
  bytes[5] = 9;  // the first address's marker
  auto r = ClientIdent::decode(BufferList::copy_of(bytes));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "entity_addr_t marker");
  EXPECT_EQ(r.error().offset, 5u);  // the offending byte
  EXPECT_EQ(r.error().message(),
            "decode error at byte 5 in client_ident > entity_addrvec_t: entity_addr_t marker: "
            "bad marker (expected 1, or 0 for the legacy form) (value 9, limit 1)");
}

TEST(ControlMalformed, OversizedCountsAndLengths) {
  // AUTH_REQUEST with 2^20 - 1 modes.
  auto modes = AuthRequest::decode(from_hex("01 00 00 00 ff ff 0f 00 01 00 00 00"));
  ASSERT_FALSE(modes);
  EXPECT_EQ(modes.error().reason, "count exceeds what the remaining bytes can hold");
  // AUTH_DONE payload length 4 GiB.
  auto done = AuthDone::decode(from_hex("04 10 00 00 00 00 00 00 01 00 00 00 ff ff ff ff 00"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().field, "auth payload");
  // SERVER_IDENT whose address vector claims more addresses than fit.
  auto ident = ServerIdent::decode(from_hex("02 05 00 00 00"));
  ASSERT_FALSE(ident);
  EXPECT_EQ(ident.error().field, "entity_addrvec_t count");
}

TEST(ControlMalformed, StructCompatTooNewInAddress) {
  std::string bytes = from_hex(kClientHello).to_string();
  bytes[3] = 2;  // struct_compat of the address
  auto r = Hello::decode(BufferList::copy_of(bytes));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().reason, "struct_compat is newer than this decoder supports");
  EXPECT_EQ(r.error().offset, 3u);
  EXPECT_EQ(r.error().depth, 2u);
  EXPECT_EQ(r.error().context[1], "entity_addr_t");
}

TEST(ControlFrames, DecodeControlChecksTagAndSegments) {
  Frame f = Ack{3}.frame();
  auto wrong = decode_control<Keepalive2>(f);
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().field, "tag");
  EXPECT_EQ(wrong.error().value, static_cast<std::uint64_t>(Tag::ack));
  f.segments[2] = BufferList::copy_of("x");
  auto extra = decode_control<Ack>(f);
  ASSERT_FALSE(extra);
  EXPECT_EQ(extra.error().reason, "control frame has more than one segment");
  EXPECT_EQ(Wait{}.frame().segments[0].length(), 0u);
}

TEST(AuthNone, AuthorizerAndMonForms) {
  const EntityName name{kEntityTypeClient, "admin"};
  EXPECT_EQ(to_hex(auth_none_authorizer_payload(name, 4100)),
            norm_hex("01 08 00 00 00 05 00 00 00 61 64 6d 69 6e 04 10 00 00 00 00 00 00"));
  auto a = AuthNonePayload::decode(auth_none_authorizer_payload(name, 4100));
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->is_mon());
  EXPECT_EQ(a->mode, kAuthModeAuthorizer);
  EXPECT_EQ(a->global_id, 4100u);
  for (std::uint8_t bad : {std::uint8_t{0}, std::uint8_t{20}, std::uint8_t{255}}) {
    AuthNonePayload p{bad, name, 1};
    auto r = AuthNonePayload::decode(p.encode());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().field, "auth mode");
  }
  const BufferList full = auth_none_mon_payload(name, 7);
  for (std::size_t n = 0; n < full.length(); ++n)
    EXPECT_FALSE(AuthNonePayload::decode(test::prefix(full, n))) << n;
}

}  // namespace
}  // namespace siphon::proto

// libFuzzer target: the msgr2 handshake state machines (msgr/session), client
// and server side at once, fed frame sequences the fuzzer chooses.
//
// A ClientHandshake and a ServerHandshake run against each other through two
// frame queues, as the messenger's driver would connect them. The fuzzer
// input is a script; each step picks a side and an action:
//   * deliver the next genuine frame the peer sent (as is, or with a few
//     payload bytes changed, its tag replaced, or a segment cut short);
//   * drop it, duplicate it, or swap it with the one after it (reordering);
//   * inject a well-formed frame of any handshake tag, built with msgr/proto
//     from field values the fuzzer picks (cookies, seqs, features, flags,
//     entity types, addresses), or a frame with raw payload bytes;
//   * when the server asks its driver (ident_request / reconnect_request),
//     the fuzzer picks the driver's answer (new session, reconnect, reset,
//     retry, retry-global, wait, refuse).
// The policies, features and the client's prior session ids (so the
// reconnect paths are reachable) come from the first input bytes.
//
// Oracles besides "no crash, no sanitizer report":
//   * a fault always names its cause (error code and reason) and leaves the
//     machine failed; a failed machine stays failed and faults every frame;
//   * the outcomes match the states (ready <-> ready, the server's questions
//     <-> decide, WAIT only on the client);
//   * every frame a machine sends is a frame the wire can carry: it encodes
//     in both revisions and decodes back to itself.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "msgr/proto/control.h"
#include "msgr/proto/features.h"
#include "msgr/proto/frame.h"
#include "msgr/session/handshake.h"

namespace {

using namespace siphon;
using namespace siphon::session;
using Outcome = Step::Outcome;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// A frame the machines send must survive the wire unchanged.
void check_wire(const Frame& f) {
  for (const proto::FrameRev rev : {proto::FrameRev::rev0, proto::FrameRev::rev1}) {
    BufferList wire = proto::encode_frame(f, rev);
    check(wire.length() == proto::encoded_length(f, rev));
    proto::FrameDecoder d(rev, proto::FrameLimits{});
    d.feed(std::move(wire));
    Frame g;
    check(d.next(g) == proto::FrameDecoder::Status::frame);
    check(g.tag == f.tag);
    for (std::size_t i = 0; i < proto::kMaxSegments; ++i) check(g.segments[i] == f.segments[i]);
  }
}

EntityAddr fuzz_addr(FuzzedDataProvider& p) {
  EntityAddr a;
  switch (p.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: a.type = AddrType::msgr2; break;
    case 1: a.type = AddrType::legacy; break;
    case 2: a.type = AddrType::any; break;
    default: a.type = AddrType::none; break;
  }
  a.nonce = p.ConsumeIntegral<std::uint32_t>();
  if (p.ConsumeBool()) {
    a.addr = NetAddress::ipv4(p.ConsumeIntegral<std::uint32_t>(), p.ConsumeIntegral<std::uint16_t>());
  } else if (p.ConsumeBool()) {
    a.addr = NetAddress::parse("::1").value();
    a.addr.set_port(p.ConsumeIntegral<std::uint16_t>());
  }
  return a;
}

EntityAddrVec fuzz_addrvec(FuzzedDataProvider& p) {
  EntityAddrVec v;
  const int n = p.ConsumeIntegralInRange<int>(0, 2);
  for (int i = 0; i < n; ++i) v.addrs.push_back(fuzz_addr(p));
  return v;
}

std::uint64_t fuzz_features(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return proto::features::kSupported;
    case 1: return proto::features::kRequired;
    case 2: return 0;
    default: return p.ConsumeIntegral<std::uint64_t>();
  }
}

std::uint8_t fuzz_entity_type(FuzzedDataProvider& p) {
  static constexpr std::uint8_t kTypes[] = {proto::kEntityTypeMon, proto::kEntityTypeMds,
                                            proto::kEntityTypeOsd, proto::kEntityTypeClient,
                                            proto::kEntityTypeMgr, 0,  0xff};
  return p.PickValueInArray(kTypes);
}

BufferList fuzz_bytes(FuzzedDataProvider& p, std::size_t max) {
  const std::string s = p.ConsumeBytesAsString(p.ConsumeIntegralInRange<std::size_t>(0, max));
  return BufferList::copy_of(s);
}

// A well-formed frame of a handshake tag, built from fuzzed field values.
Frame synth_frame(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange<int>(0, 17)) {
    case 0: return encode(Hello{fuzz_entity_type(p), fuzz_addr(p)});
    case 1: {
      AuthRequest r;
      r.method = p.ConsumeBool() ? proto::kAuthMethodNone : p.ConsumeIntegral<std::uint32_t>();
      if (p.ConsumeBool()) r.preferred_modes = {p.ConsumeIntegral<std::uint32_t>()};
      if (p.ConsumeBool()) {
        proto::AuthNonePayload none;
        none.name = {fuzz_entity_type(p), p.ConsumeRandomLengthString(16)};
        none.global_id = p.ConsumeIntegral<std::uint64_t>();
        r.auth_payload = none.encode();
      } else {
        r.auth_payload = fuzz_bytes(p, 32);
      }
      return encode(r);
    }
    case 2: {
      AuthBadMethod b;
      b.method = p.ConsumeIntegral<std::uint32_t>();
      b.result = p.ConsumeIntegral<std::int32_t>();
      b.allowed_methods.push_back(p.ConsumeIntegral<std::uint32_t>());
      b.allowed_modes.push_back(p.ConsumeIntegral<std::uint32_t>());
      return encode(b);
    }
    case 3: {
      AuthDone d;
      d.global_id = p.ConsumeIntegral<std::uint64_t>();
      d.con_mode = p.ConsumeBool() ? proto::kConModeCrc : p.ConsumeIntegral<std::uint32_t>();
      d.auth_payload = fuzz_bytes(p, 16);
      return encode(d);
    }
    case 4: {
      AuthSignature s;
      if (p.ConsumeBool()) {
        for (auto& b : s.sha256) b = p.ConsumeIntegral<std::uint8_t>();
      }
      return encode(s);
    }
    case 5: {
      ClientIdent c;
      c.addrs = fuzz_addrvec(p);
      c.target_addr = fuzz_addr(p);
      c.gid = p.ConsumeIntegral<std::int64_t>();
      c.global_seq = p.ConsumeIntegral<std::uint64_t>();
      c.supported_features = fuzz_features(p);
      c.required_features = fuzz_features(p);
      c.flags = p.ConsumeBool() ? proto::kMsgConnectLossy : p.ConsumeIntegral<std::uint64_t>();
      c.cookie = p.ConsumeIntegral<std::uint64_t>();
      return encode(c);
    }
    case 6: {
      ServerIdent s;
      s.addrs = fuzz_addrvec(p);
      s.gid = p.ConsumeIntegral<std::int64_t>();
      s.global_seq = p.ConsumeIntegral<std::uint64_t>();
      s.supported_features = fuzz_features(p);
      s.required_features = fuzz_features(p);
      s.flags = p.ConsumeBool() ? proto::kMsgConnectLossy : p.ConsumeIntegral<std::uint64_t>();
      s.cookie = p.ConsumeIntegral<std::uint64_t>();
      return encode(s);
    }
    case 7: return encode(IdentMissingFeatures{fuzz_features(p)});
    case 8: {
      SessionReconnect r;
      r.addrs = fuzz_addrvec(p);
      r.client_cookie = p.ConsumeIntegral<std::uint64_t>();
      r.server_cookie = p.ConsumeIntegral<std::uint64_t>();
      r.global_seq = p.ConsumeIntegral<std::uint64_t>();
      r.connect_seq = p.ConsumeIntegral<std::uint64_t>();
      r.msg_seq = p.ConsumeIntegral<std::uint64_t>();
      return encode(r);
    }
    case 9: return encode(SessionReset{p.ConsumeBool()});
    case 10: return encode(SessionRetry{p.ConsumeIntegral<std::uint64_t>()});
    case 11: return encode(SessionRetryGlobal{p.ConsumeIntegral<std::uint64_t>()});
    case 12: return encode(ReconnectOk{p.ConsumeIntegral<std::uint64_t>()});
    case 13: return encode(Wait{});
    case 14: return encode(Keepalive2{{p.ConsumeIntegral<std::uint32_t>(), p.ConsumeIntegral<std::uint32_t>()}});
    case 15: return encode(Ack{p.ConsumeIntegral<std::uint64_t>()});
    case 16: {
      // A MESSAGE frame: header segment plus a front.
      MsgHeader2 h;
      h.seq = p.ConsumeIntegral<std::uint64_t>();
      h.type = p.ConsumeIntegral<std::uint16_t>();
      Frame f;
      f.tag = Tag::message;
      f.segments[0] = h.encode();
      f.segments[1] = fuzz_bytes(p, 16);
      return f;
    }
    default: {
      // Any tag (known or not) with raw payload bytes in up to four segments.
      Frame f;
      f.tag = static_cast<Tag>(p.ConsumeIntegralInRange<int>(0, proto::kMaxKnownTag + 1));
      const int n = p.ConsumeIntegralInRange<int>(1, 4);
      for (int i = 0; i < n; ++i) f.segments[i] = fuzz_bytes(p, 48);
      return f;
    }
  }
}

// Changes a genuine frame the way a broken or hostile peer would.
void mutate(FuzzedDataProvider& p, Frame& f) {
  switch (p.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: {  // overwrite a few payload bytes
      std::string bytes = f.segments[0].to_string();
      if (bytes.empty()) break;
      const int n = p.ConsumeIntegralInRange<int>(1, 4);
      for (int i = 0; i < n; ++i)
        bytes[p.ConsumeIntegralInRange<std::size_t>(0, bytes.size() - 1)] =
            static_cast<char>(p.ConsumeIntegral<std::uint8_t>());
      f.segments[0] = BufferList::copy_of(bytes);
      break;
    }
    case 1:  // another tag on the same payload
      f.tag = static_cast<Tag>(p.ConsumeIntegralInRange<int>(1, proto::kMaxKnownTag));
      break;
    case 2: {  // cut the payload short
      const std::size_t len = f.segments[0].length();
      f.segments[0] = f.segments[0].slice(0, p.ConsumeIntegralInRange<std::size_t>(0, len));
      break;
    }
    default:  // an extra segment the tag does not carry
      f.segments[p.ConsumeIntegralInRange<std::size_t>(1, 3)] = fuzz_bytes(p, 16);
      break;
  }
}

struct Services {
  std::uint64_t global_seq = 0;
  std::uint64_t cookie = 0x1000;
  HandshakeServices make(PolicyView server_policy) {
    HandshakeServices s;
    s.next_global_seq = [this](std::uint64_t at_least) {
      return global_seq = std::max(global_seq, at_least) + 1;
    };
    s.random_cookie = [this] { return ++cookie; };
    s.policy_for = [server_policy](std::uint8_t) { return server_policy; };
    s.new_global_id = [] { return std::uint64_t{4100}; };
    return s;
  }
};

class Run {
 public:
  explicit Run(FuzzedDataProvider& p)
      : p_(p),
        client_(client_me(), client_policy(p), server_addr(), p.ConsumeBool() ? proto::kEntityTypeOsd : proto::kEntityTypeAny,
                prior_ids(p), csvc_.make({})),
        server_(server_me(), client_addr().addr, ssvc_.make(server_policy(p))) {}

  void go() {
    on_client(client_.start());
    on_server(server_.start());
    for (int step = 0; step < 256 && p_.remaining_bytes() > 0; ++step) {
      const bool to_server = p_.ConsumeBool();
      std::deque<Frame>& q = to_server ? to_server_ : to_client_;
      const int action = p_.ConsumeIntegralInRange<int>(0, 9);
      Frame f;
      switch (action) {
        case 0:
        case 1:
        case 2:
        case 3:  // the genuine next frame
          if (q.empty()) continue;
          f = std::move(q.front());
          q.pop_front();
          break;
        case 4:  // the next frame, damaged
          if (q.empty()) continue;
          f = std::move(q.front());
          q.pop_front();
          mutate(p_, f);
          break;
        case 5:  // drop it
          if (!q.empty()) q.pop_front();
          continue;
        case 6:  // deliver it twice
          if (q.empty()) continue;
          q.push_front(q.front());
          continue;
        case 7:  // reorder
          if (q.size() >= 2) std::swap(q[0], q[1]);
          continue;
        default:  // a frame of the fuzzer's making
          f = synth_frame(p_);
          break;
      }
      if (to_server) deliver_server(f);
      else deliver_client(f);
    }
  }

 private:
  static EntityAddr v2(std::uint32_t ip, std::uint16_t port, std::uint32_t nonce) {
    return EntityAddr(AddrType::msgr2, NetAddress::ipv4(ip, port), nonce);
  }
  static EntityAddr server_addr() { return v2(0x7f000001, 6800, 77); }
  static EntityAddr client_addr() { return v2(0x7f000001, 6801, 88); }
  static LocalIdentity server_me() {
    LocalIdentity me;
    me.entity_type = proto::kEntityTypeOsd;
    me.gid = 3;
    me.addrs = EntityAddrVec(server_addr());
    me.nonce = 77;
    me.auth_name = {proto::kEntityTypeOsd, "3"};
    return me;
  }
  static LocalIdentity client_me() {
    LocalIdentity me;
    me.entity_type = proto::kEntityTypeClient;
    me.gid = 4099;
    me.addrs = EntityAddrVec(client_addr());
    me.nonce = 88;
    me.auth_name = {proto::kEntityTypeClient, "admin"};
    return me;
  }
  static PolicyView client_policy(FuzzedDataProvider& p) {
    PolicyView v;
    v.lossy = p.ConsumeBool();
    v.resetcheck = !v.lossy;
    v.features_supported = proto::features::kSupported;
    v.features_required = p.ConsumeBool() ? 0 : fuzz_features(p);
    return v;
  }
  static PolicyView server_policy(FuzzedDataProvider& p) {
    PolicyView v;
    v.lossy = p.ConsumeBool();
    v.server = true;
    v.resetcheck = p.ConsumeBool();
    v.features_supported = proto::features::kSupported;
    v.features_required = p.ConsumeBool() ? 0 : fuzz_features(p);
    return v;
  }
  static SessionIds prior_ids(FuzzedDataProvider& p) {
    SessionIds ids;
    if (p.ConsumeBool()) {  // a session that existed before: the client reconnects
      ids.client_cookie = p.ConsumeIntegral<std::uint64_t>();
      ids.server_cookie = p.ConsumeIntegral<std::uint64_t>();
      ids.global_seq = p.ConsumeIntegralInRange<std::uint64_t>(0, 16);
      ids.connect_seq = p.ConsumeIntegralInRange<std::uint64_t>(0, 16);
      ids.in_seq = p.ConsumeIntegralInRange<std::uint64_t>(0, 16);
    }
    return ids;
  }

  static void check_fault(const Step& s) {
    check(static_cast<bool>(s.error));
    check(!s.reason.empty());
  }

  void deliver_client(const Frame& f) {
    const bool was_failed = client_.state() == ClientHandshake::State::failed;
    const Step s = client_.on_frame(f);
    if (was_failed) {
      check(s.outcome == Outcome::fault);
      check(client_.state() == ClientHandshake::State::failed);
    }
    on_client(s);
  }

  void deliver_server(const Frame& f) {
    const bool was_failed = server_.state() == ServerHandshake::State::failed;
    const Step s = server_.on_frame(f);
    if (was_failed) {
      check(s.outcome == Outcome::fault);
      check(server_.state() == ServerHandshake::State::failed);
    }
    on_server(s);
  }

  void on_client(const Step& s) {
    for (const Frame& f : s.send) {
      check_wire(f);
      to_server_.push_back(f);
    }
    switch (s.outcome) {
      case Outcome::fault:
        check_fault(s);
        check(client_.state() == ClientHandshake::State::failed);
        break;
      case Outcome::ready: check(client_.state() == ClientHandshake::State::ready); break;
      case Outcome::ident_request:
      case Outcome::reconnect_request: check(false); break;  // server-only questions
      case Outcome::wait:
      case Outcome::none: break;
    }
  }

  void on_server(Step s) {
    for (int guard = 0; guard < 8; ++guard) {
      for (const Frame& f : s.send) {
        check_wire(f);
        to_client_.push_back(f);
      }
      switch (s.outcome) {
        case Outcome::fault:
          check_fault(s);
          check(server_.state() == ServerHandshake::State::failed);
          return;
        case Outcome::ready: check(server_.state() == ServerHandshake::State::ready); return;
        case Outcome::wait: check(false); return;  // WAIT is the client's outcome
        case Outcome::none: return;
        case Outcome::ident_request:
        case Outcome::reconnect_request:
          check(server_.state() == ServerHandshake::State::decide);
          s = answer(s.outcome);
          break;
      }
    }
  }

  // The driver's decision, chosen by the fuzzer.
  Step answer(Outcome asked) {
    switch (p_.ConsumeIntegralInRange<int>(0, 6)) {
      case 0:
        return server_.accept_new_session(p_.ConsumeIntegralInRange<std::uint64_t>(1, 64),
                                          p_.ConsumeBool() ? 0 : p_.ConsumeIntegral<std::uint64_t>());
      case 1: return server_.accept_reconnect(p_.ConsumeIntegralInRange<std::uint64_t>(0, 64));
      case 2: return server_.reply_reset(p_.ConsumeBool());
      case 3: return server_.reply_retry(p_.ConsumeIntegralInRange<std::uint64_t>(0, 64));
      case 4: return server_.reply_retry_global(p_.ConsumeIntegralInRange<std::uint64_t>(0, 64));
      case 5: return server_.reply_wait();
      default:
        (void)asked;
        return server_.refuse("fuzz: the driver refused");
    }
  }

  FuzzedDataProvider& p_;
  Services csvc_, ssvc_;
  ClientHandshake client_;
  ServerHandshake server_;
  std::deque<Frame> to_server_, to_client_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider p(data, size);
  Run run(p);
  run.go();
  return 0;
}

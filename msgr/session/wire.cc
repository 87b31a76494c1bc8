#include "msgr/session/wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace siphon::session {
namespace {

// Little-endian writer into a BufferList.
class Writer {
 public:
  void u8(std::uint8_t v) { bl_.append(&v, 1); }
  void u16(std::uint16_t v) { le(v); }
  void u32(std::uint32_t v) { le(v); }
  void u64(std::uint64_t v) { le(v); }
  void raw(const void* p, std::size_t n) { bl_.append(p, n); }
  void blob(const BufferList& b) {
    u32(static_cast<std::uint32_t>(b.length()));
    bl_.append(b);
  }
  void addr(const EntityAddr& a) {
    u8(1);  // marker: ADDR2
    u8(1);  // struct_v
    u8(1);  // struct_compat
    const std::uint32_t elen = sockaddr_len(a);
    u32(12 + elen);
    u32(a.type);
    u32(a.nonce);
    u32(elen);
    const int fam = a.addr.family();
    if (fam == AF_INET) {
      sockaddr_in in{};
      std::memcpy(&in, a.addr.sockaddr_ptr(), sizeof(in));
      u16(AF_INET);
      raw(&in.sin_port, 2);
      raw(&in.sin_addr, 4);
      const std::uint8_t zero[8] = {};
      raw(zero, 8);
    } else if (fam == AF_INET6) {
      sockaddr_in6 in6{};
      std::memcpy(&in6, a.addr.sockaddr_ptr(), sizeof(in6));
      u16(AF_INET6);
      raw(&in6.sin6_port, 2);
      raw(&in6.sin6_flowinfo, 4);
      raw(&in6.sin6_addr, 16);
      u32(in6.sin6_scope_id);
    } else {
      const std::uint8_t zero[28] = {};
      raw(zero, 28);
    }
  }
  void addrvec(const EntityAddrVec& v) {
    u8(2);
    u32(static_cast<std::uint32_t>(v.v.size()));
    for (const auto& a : v.v) addr(a);
  }
  Frame frame(Tag t) { return Frame::control(t, std::move(bl_)); }
  BufferList take() { return std::move(bl_); }

 private:
  static std::uint32_t sockaddr_len(const EntityAddr& a) {
    return a.addr.family() == AF_INET ? 16 : 28;
  }
  template <typename U>
  void le(U v) {
    std::uint8_t b[sizeof(U)];
    for (std::size_t i = 0; i < sizeof(U); ++i) b[i] = static_cast<std::uint8_t>(v >> (8 * i));
    bl_.append(b, sizeof(U));
  }
  BufferList bl_;
};

// Bounds-checked little-endian reader; the first failure sticks.
class Reader {
 public:
  explicit Reader(const BufferList& bl) : cur_(bl) {}
  bool ok() const { return why_.empty(); }
  std::string_view why() const { return why_; }
  std::size_t remaining() const { return ok() ? cur_.remaining() : 0; }
  void fail(std::string_view w) {
    if (why_.empty()) why_ = w;
  }
  std::uint8_t u8(std::string_view f) { return le<std::uint8_t>(f); }
  std::uint16_t u16(std::string_view f) { return le<std::uint16_t>(f); }
  std::uint32_t u32(std::string_view f) { return le<std::uint32_t>(f); }
  std::uint64_t u64(std::string_view f) { return le<std::uint64_t>(f); }
  bool raw(void* dst, std::size_t n, std::string_view f) {
    if (!ok()) return false;
    if (!cur_.read(dst, n)) {
      fail(f);
      return false;
    }
    return true;
  }
  void skip(std::size_t n, std::string_view f) {
    if (ok() && !cur_.skip(n)) fail(f);
  }
  BufferList blob(std::string_view f) {
    const std::uint32_t n = u32(f);
    BufferList out;
    if (ok() && !cur_.read_list(n, out)) fail(f);
    return out;
  }
  std::vector<std::uint32_t> u32s(std::string_view f) {
    const std::uint32_t n = u32(f);
    std::vector<std::uint32_t> out;
    if (!ok()) return out;
    if (n > remaining() / 4) {
      fail(f);
      return out;
    }
    out.reserve(n);
    for (std::uint32_t i = 0; i < n; ++i) out.push_back(u32(f));
    return out;
  }
  EntityAddr addr() {
    const std::uint8_t marker = u8("entity_addr_t marker");
    if (ok() && marker != 1) fail("entity_addr_t: not the msgr2 (ADDR2) encoding");
    return addr_body();
  }
  EntityAddrVec addrvec() {
    EntityAddrVec v;
    const std::uint8_t marker = u8("entity_addrvec_t marker");
    if (!ok()) return v;
    if (marker == 1) {  // a bare ADDR2 address: a one-element vector (Ceph accepts it)
      v.v.push_back(addr_body());
      return v;
    }
    if (marker != 2) {
      fail("entity_addrvec_t: unsupported marker");
      return v;
    }
    const std::uint32_t n = u32("entity_addrvec_t count");
    if (ok() && n > remaining() / 19) {  // each address is at least 19 bytes
      fail("entity_addrvec_t: count exceeds payload");
      return v;
    }
    for (std::uint32_t i = 0; i < n && ok(); ++i) v.v.push_back(addr());
    if (!ok()) v.v.clear();
    return v;
  }

 private:
  // entity_addr_t after its marker byte.
  EntityAddr addr_body() {
    EntityAddr a;
    u8("entity_addr_t struct_v");
    const std::uint8_t compat = u8("entity_addr_t struct_compat");
    const std::uint32_t len = u32("entity_addr_t struct_len");
    if (!ok()) return a;
    if (compat > 1) return fail("entity_addr_t: struct_compat too new"), a;
    if (len < 12 || len > remaining()) return fail("entity_addr_t: bad struct_len"), a;
    const std::size_t end_remaining = remaining() - len;
    a.type = u32("entity_addr_t type");
    a.nonce = u32("entity_addr_t nonce");
    const std::uint32_t elen = u32("entity_addr_t sockaddr length");
    if (!ok()) return a;
    if (elen > len - 12) return fail("entity_addr_t: sockaddr length exceeds struct"), a;
    if (elen >= 2) {
      const std::uint16_t fam = u16("sockaddr family");
      if (fam == AF_INET && elen >= 8) {
        sockaddr_in in{};
        in.sin_family = AF_INET;
        raw(&in.sin_port, 2, "sockaddr_in port");
        raw(&in.sin_addr, 4, "sockaddr_in addr");
        skip(elen - 8, "sockaddr_in padding");
        a.addr = NetAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&in), sizeof(in));
      } else if (fam == AF_INET6 && elen >= 28) {
        sockaddr_in6 in6{};
        in6.sin6_family = AF_INET6;
        raw(&in6.sin6_port, 2, "sockaddr_in6 port");
        raw(&in6.sin6_flowinfo, 4, "sockaddr_in6 flowinfo");
        raw(&in6.sin6_addr, 16, "sockaddr_in6 addr");
        in6.sin6_scope_id = u32("sockaddr_in6 scope");
        skip(elen - 28, "sockaddr_in6 padding");
        a.addr = NetAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&in6), sizeof(in6));
      } else {
        skip(elen - 2, "sockaddr");
      }
    } else {
      skip(elen, "sockaddr");
    }
    if (ok() && remaining() > end_remaining) skip(remaining() - end_remaining, "entity_addr_t tail");
    return a;
  }
  template <typename U>
  U le(std::string_view f) {
    std::uint8_t b[sizeof(U)] = {};
    if (!raw(b, sizeof(U), f)) return 0;
    U v = 0;
    for (std::size_t i = 0; i < sizeof(U); ++i) v = static_cast<U>(v | (static_cast<U>(b[i]) << (8 * i)));
    return v;
  }
  BufferCursor cur_;
  std::string_view why_;
};


template <typename F>
bool finish(Reader& r, std::string_view& why, F&&) {
  if (!r.ok()) why = r.why();
  return r.ok();
}

}  // namespace

Frame encode(const Hello& v) {
  Writer w;
  w.u8(v.entity_type);
  w.addr(v.peer_addr);
  return w.frame(Tag::hello);
}
bool decode(const Frame& f, Hello& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.entity_type = r.u8("HELLO entity_type");
  v.peer_addr = r.addr();
  return finish(r, why, 0);
}

Frame encode(const AuthRequest& v) {
  Writer w;
  w.u32(v.method);
  w.u32(static_cast<std::uint32_t>(v.preferred_modes.size()));
  for (auto m : v.preferred_modes) w.u32(m);
  w.blob(v.payload);
  return w.frame(Tag::auth_request);
}
bool decode(const Frame& f, AuthRequest& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.method = r.u32("AUTH_REQUEST method");
  v.preferred_modes = r.u32s("AUTH_REQUEST modes");
  v.payload = r.blob("AUTH_REQUEST payload");
  return finish(r, why, 0);
}

Frame encode(const AuthBadMethod& v) {
  Writer w;
  w.u32(v.method);
  w.u32(static_cast<std::uint32_t>(v.result));
  w.u32(static_cast<std::uint32_t>(v.allowed_methods.size()));
  for (auto m : v.allowed_methods) w.u32(m);
  w.u32(static_cast<std::uint32_t>(v.allowed_modes.size()));
  for (auto m : v.allowed_modes) w.u32(m);
  return w.frame(Tag::auth_bad_method);
}
bool decode(const Frame& f, AuthBadMethod& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.method = r.u32("AUTH_BAD_METHOD method");
  v.result = static_cast<std::int32_t>(r.u32("AUTH_BAD_METHOD result"));
  v.allowed_methods = r.u32s("AUTH_BAD_METHOD methods");
  v.allowed_modes = r.u32s("AUTH_BAD_METHOD modes");
  return finish(r, why, 0);
}

Frame encode(const AuthDone& v) {
  Writer w;
  w.u64(v.global_id);
  w.u32(v.con_mode);
  w.blob(v.payload);
  return w.frame(Tag::auth_done);
}
bool decode(const Frame& f, AuthDone& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.global_id = r.u64("AUTH_DONE global_id");
  v.con_mode = r.u32("AUTH_DONE con_mode");
  v.payload = r.blob("AUTH_DONE payload");
  return finish(r, why, 0);
}

Frame encode(const AuthSignature& v) {
  Writer w;
  w.raw(v.sig.data(), v.sig.size());
  return w.frame(Tag::auth_signature);
}
bool decode(const Frame& f, AuthSignature& v, std::string_view& why) {
  Reader r(f.segments[0]);
  r.raw(v.sig.data(), v.sig.size(), "AUTH_SIGNATURE: shorter than 32 bytes");
  return finish(r, why, 0);
}

Frame encode(const ClientIdent& v) {
  Writer w;
  w.addrvec(v.addrs);
  w.addr(v.target_addr);
  w.u64(static_cast<std::uint64_t>(v.gid));
  w.u64(v.global_seq);
  w.u64(v.features_supported);
  w.u64(v.features_required);
  w.u64(v.flags);
  w.u64(v.client_cookie);
  return w.frame(Tag::client_ident);
}
bool decode(const Frame& f, ClientIdent& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.addrs = r.addrvec();
  v.target_addr = r.addr();
  v.gid = static_cast<std::int64_t>(r.u64("CLIENT_IDENT gid"));
  v.global_seq = r.u64("CLIENT_IDENT global_seq");
  v.features_supported = r.u64("CLIENT_IDENT features_supported");
  v.features_required = r.u64("CLIENT_IDENT features_required");
  v.flags = r.u64("CLIENT_IDENT flags");
  v.client_cookie = r.u64("CLIENT_IDENT client_cookie");
  return finish(r, why, 0);
}

Frame encode(const ServerIdent& v) {
  Writer w;
  w.addrvec(v.addrs);
  w.u64(static_cast<std::uint64_t>(v.gid));
  w.u64(v.global_seq);
  w.u64(v.features_supported);
  w.u64(v.features_required);
  w.u64(v.flags);
  w.u64(v.server_cookie);
  return w.frame(Tag::server_ident);
}
bool decode(const Frame& f, ServerIdent& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.addrs = r.addrvec();
  v.gid = static_cast<std::int64_t>(r.u64("SERVER_IDENT gid"));
  v.global_seq = r.u64("SERVER_IDENT global_seq");
  v.features_supported = r.u64("SERVER_IDENT features_supported");
  v.features_required = r.u64("SERVER_IDENT features_required");
  v.flags = r.u64("SERVER_IDENT flags");
  v.server_cookie = r.u64("SERVER_IDENT server_cookie");
  return finish(r, why, 0);
}

Frame encode(const IdentMissingFeatures& v) {
  Writer w;
  w.u64(v.features);
  return w.frame(Tag::ident_missing_features);
}
bool decode(const Frame& f, IdentMissingFeatures& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.features = r.u64("IDENT_MISSING_FEATURES features");
  return finish(r, why, 0);
}

Frame encode(const SessionReconnect& v) {
  Writer w;
  w.addrvec(v.addrs);
  w.u64(v.client_cookie);
  w.u64(v.server_cookie);
  w.u64(v.global_seq);
  w.u64(v.connect_seq);
  w.u64(v.msg_seq);
  return w.frame(Tag::session_reconnect);
}
bool decode(const Frame& f, SessionReconnect& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.addrs = r.addrvec();
  v.client_cookie = r.u64("SESSION_RECONNECT client_cookie");
  v.server_cookie = r.u64("SESSION_RECONNECT server_cookie");
  v.global_seq = r.u64("SESSION_RECONNECT global_seq");
  v.connect_seq = r.u64("SESSION_RECONNECT connect_seq");
  v.msg_seq = r.u64("SESSION_RECONNECT msg_seq");
  return finish(r, why, 0);
}

Frame encode(const SessionReset& v) {
  Writer w;
  w.u8(v.full ? 1 : 0);
  return w.frame(Tag::session_reset);
}
bool decode(const Frame& f, SessionReset& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.full = r.u8("SESSION_RESET full") != 0;
  return finish(r, why, 0);
}

Frame encode(const SessionRetry& v) {
  Writer w;
  w.u64(v.connect_seq);
  return w.frame(Tag::session_retry);
}
bool decode(const Frame& f, SessionRetry& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.connect_seq = r.u64("SESSION_RETRY connect_seq");
  return finish(r, why, 0);
}

Frame encode(const SessionRetryGlobal& v) {
  Writer w;
  w.u64(v.global_seq);
  return w.frame(Tag::session_retry_global);
}
bool decode(const Frame& f, SessionRetryGlobal& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.global_seq = r.u64("SESSION_RETRY_GLOBAL global_seq");
  return finish(r, why, 0);
}

Frame encode(const ReconnectOk& v) {
  Writer w;
  w.u64(v.msg_seq);
  return w.frame(Tag::session_reconnect_ok);
}
bool decode(const Frame& f, ReconnectOk& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.msg_seq = r.u64("SESSION_RECONNECT_OK msg_seq");
  return finish(r, why, 0);
}

Frame encode(const Wait&) { return Frame::control(Tag::wait, {}); }

Frame encode(const Keepalive2& v) {
  Writer w;
  w.u32(v.stamp.sec);
  w.u32(v.stamp.nsec);
  return w.frame(Tag::keepalive2);
}
bool decode(const Frame& f, Keepalive2& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.stamp.sec = r.u32("KEEPALIVE2 stamp");
  v.stamp.nsec = r.u32("KEEPALIVE2 stamp");
  return finish(r, why, 0);
}
Frame encode(const Keepalive2Ack& v) {
  Writer w;
  w.u32(v.stamp.sec);
  w.u32(v.stamp.nsec);
  return w.frame(Tag::keepalive2_ack);
}
bool decode(const Frame& f, Keepalive2Ack& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.stamp.sec = r.u32("KEEPALIVE2_ACK stamp");
  v.stamp.nsec = r.u32("KEEPALIVE2_ACK stamp");
  return finish(r, why, 0);
}

Frame encode(const Ack& v) {
  Writer w;
  w.u64(v.seq);
  return w.frame(Tag::ack);
}
bool decode(const Frame& f, Ack& v, std::string_view& why) {
  Reader r(f.segments[0]);
  v.seq = r.u64("ACK seq");
  return finish(r, why, 0);
}

void encode_header2(const MsgHeader2& h, BufferList& out) {
  std::byte* p = out.append_uninitialized(MsgHeader2::kSize);
  auto put = [&p](auto v) {
    for (std::size_t i = 0; i < sizeof(v); ++i) *p++ = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  };
  put(h.seq);
  put(h.tid);
  put(h.type);
  put(h.priority);
  put(h.version);
  put(h.data_pre_padding_len);
  put(h.data_off);
  put(h.ack_seq);
  put(h.flags);
  put(h.compat_version);
  put(h.reserved);
}

bool decode_header2(const BufferList& seg0, MsgHeader2& h, std::string_view& why) {
  if (seg0.length() < MsgHeader2::kSize) {
    why = "MESSAGE: header2 shorter than 41 bytes";
    return false;
  }
  Reader r(seg0);
  h.seq = r.u64("seq");
  h.tid = r.u64("tid");
  h.type = r.u16("type");
  h.priority = r.u16("priority");
  h.version = r.u16("version");
  h.data_pre_padding_len = r.u32("data_pre_padding_len");
  h.data_off = r.u16("data_off");
  h.ack_seq = r.u64("ack_seq");
  h.flags = r.u8("flags");
  h.compat_version = r.u16("compat_version");
  h.reserved = r.u16("reserved");
  return finish(r, why, 0);
}

BufferList auth_none_payload(bool to_monitor, const proto::EntityName& name,
                             std::uint64_t global_id) {
  Writer w;
  w.u8(to_monitor ? kAuthModeMon : kAuthModeAuthorizer);
  w.u32(name.type);
  w.u32(static_cast<std::uint32_t>(name.id.size()));
  w.raw(name.id.data(), name.id.size());
  w.u64(global_id);
  return w.take();
}

bool decode_auth_none(const BufferList& payload, AuthNoneRequest& out, std::string_view& why) {
  Reader r(payload);
  out.mode = r.u8("auth none mode");
  out.name.type = r.u32("auth none EntityName type");
  const std::uint32_t n = r.u32("auth none EntityName id length");
  if (r.ok() && n > r.remaining()) r.fail("auth none: EntityName id longer than payload");
  if (r.ok()) {
    out.name.id.resize(n);
    r.raw(out.name.id.data(), n, "auth none EntityName id");
  }
  out.global_id = r.u64("auth none global_id");
  return finish(r, why, 0);
}

namespace {
// The bytes Ceph's memcmp sees for entity_addr_t on a little-endian host:
// u32 type, u32 nonce, then the sockaddr union (family in host order, port
// and address in network order), zero padded.
std::array<std::uint8_t, 8 + sizeof(sockaddr_in6)> race_key(const EntityAddr& a) {
  std::array<std::uint8_t, 8 + sizeof(sockaddr_in6)> k{};
  const std::uint32_t type = 1;  // legacy_addr(): type LEGACY for both sides
  std::memcpy(k.data(), &type, 4);
  std::memcpy(k.data() + 4, &a.nonce, 4);
  const socklen_t len = std::min<socklen_t>(a.addr.sockaddr_len(), sizeof(sockaddr_in6));
  if (!a.addr.is_unspecified()) std::memcpy(k.data() + 8, a.addr.sockaddr_ptr(), len);
  return k;
}
}  // namespace

int compare_for_race(const EntityAddr& a, const EntityAddr& b) noexcept {
  const auto ka = race_key(a);
  const auto kb = race_key(b);
  return std::memcmp(ka.data(), kb.data(), ka.size());
}

bool same_addr(const EntityAddr& a, const EntityAddr& b) noexcept {
  return a.type == b.type && a.nonce == b.nonce && a.addr == b.addr;
}

bool contains(const EntityAddrVec& v, const EntityAddr& a) noexcept {
  return std::any_of(v.v.begin(), v.v.end(), [&](const EntityAddr& x) { return same_addr(x, a); });
}

std::string to_string(const EntityAddr& a) {
  const char* t = a.type == EntityAddr::kMsgr2 ? "v2" : a.type == EntityAddr::kLegacy ? "v1"
                  : a.type == EntityAddr::kAny ? "any" : "none";
  return std::string(t) + ":" + a.addr.to_string() + "/" + std::to_string(a.nonce);
}

std::string to_string(const EntityAddrVec& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.v.size(); ++i) {
    if (i != 0) s += ",";
    s += to_string(v.v[i]);
  }
  return s + "]";
}

}  // namespace siphon::session

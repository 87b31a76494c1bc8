#include "msgr/auth/cephx.h"

#include "msgr/auth/aes256k.h"

#include <fmt/format.h>

namespace siphon::auth {
namespace {

void put_u16(Bytes& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v));
  out.push_back(static_cast<std::uint8_t>(v >> 8));
}
void put_u32(Bytes& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_u64(Bytes& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// A bounds-checked little-endian reader over a byte span. The first failure
// sticks and names the field.
class Reader {
 public:
  Reader(ByteView in, std::size_t& pos, std::string& why) : in_(in), pos_(pos), why_(why) {}
  bool ok() const noexcept { return ok_; }
  std::uint64_t uint(std::size_t n, std::string_view field) {
    if (!need(n, field)) return 0;
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8) | in_[pos_ + i];
    pos_ += n;
    return v;
  }
  std::uint8_t u8(std::string_view f) { return static_cast<std::uint8_t>(uint(1, f)); }
  std::uint16_t u16(std::string_view f) { return static_cast<std::uint16_t>(uint(2, f)); }
  std::uint32_t u32(std::string_view f) { return static_cast<std::uint32_t>(uint(4, f)); }
  std::uint64_t u64(std::string_view f) { return uint(8, f); }
  // u32 length + bytes.
  ByteView blob(std::string_view field) {
    const std::uint32_t len = u32(field);
    if (!need(len, field)) return {};
    ByteView v = in_.subspan(pos_, len);
    pos_ += len;
    return v;
  }
  void expect_version(std::uint8_t want, std::string_view field) {
    const std::uint8_t v = u8(field);
    if (ok_ && v != want) fail(fmt::format("{} version {} (expected {})", field, v, want));
  }
  void fail(std::string why) {
    if (ok_) why_ = std::move(why);
    ok_ = false;
  }

 private:
  bool need(std::size_t n, std::string_view field) {
    if (ok_ && in_.size() - pos_ < n)
      fail(fmt::format("{} truncated: needs {} bytes, {} remain", field, n, in_.size() - pos_));
    return ok_;
  }
  ByteView in_;
  std::size_t& pos_;
  std::string& why_;
  bool ok_ = true;
};

// A key handed to us inside a cephx structure: AES with 16 bytes or more,
// aes256k with 32 or more (Ceph's validate_secret), nothing else.
void check_key(std::string_view what, const CryptoKey& k, Reader& r) {
  if (k.type == kCryptoAes && k.secret.size() < kAesKeySize)
    r.fail(fmt::format("{} (aes) has {} bytes, needs at least {}", what, k.secret.size(), kAesKeySize));
  else if (k.type == kCryptoAes256k && k.secret.size() < kAes256kKeySize)
    r.fail(fmt::format("{} (aes256k) has {} bytes, needs at least {}", what, k.secret.size(), kAes256kKeySize));
  else if (k.type != kCryptoAes && k.type != kCryptoAes256k)
    r.fail(fmt::format("{} has key {}, neither aes (1) nor aes256k (2)", what, key_type_name(k.type)));
}

}  // namespace

std::optional<std::uint64_t> challenge_proof(KeyRef secret, std::uint64_t server_challenge,
                                             std::uint64_t client_challenge, std::string& why) {
  Bytes blob;
  put_u64(blob, server_challenge);
  put_u64(blob, client_challenge);
  std::optional<Bytes> enc;
  if (secret.type == kCryptoAes256k) {
    // aes256k's confounder makes its ciphertext differ on every call, so
    // Ceph (cephx_calc_client_server_challenge, 19.2.6+) folds
    // HMAC-SHA256(secret, blob) instead: no envelope, no length.
    const Sha256 mac = hmac_sha256(secret.secret, blob);
    enc.emplace(mac.begin(), mac.end());
  } else {
    enc = seal_with_length(secret, kUsageNone, blob, why);
  }
  if (!enc) return std::nullopt;
  std::uint64_t k = 0;
  for (std::size_t off = 0; off + 8 <= enc->size(); off += 8) {
    std::uint64_t w = 0;
    for (std::size_t i = 8; i-- > 0;) w = (w << 8) | (*enc)[off + i];
    k ^= w;
  }
  return k;
}

std::optional<std::uint64_t> decode_server_challenge(ByteView payload, std::string& why) {
  std::size_t pos = 0;
  Reader r(payload, pos, why);
  r.expect_version(1, "CephXServerChallenge");
  const std::uint64_t c = r.u64("server_challenge");
  if (!r.ok()) return std::nullopt;
  return c;
}

std::optional<Bytes> authenticate_payload(KeyRef secret, std::uint64_t server_challenge,
                                          std::uint64_t client_challenge, std::uint32_t other_keys,
                                          std::string& why) {
  auto key = challenge_proof(secret, server_challenge, client_challenge, why);
  if (!key) return std::nullopt;
  Bytes out;
  put_u16(out, kCephxGetAuthSessionKey);
  out.push_back(3);  // CephXAuthenticate v3
  put_u64(out, client_challenge);
  put_u64(out, *key);
  out.push_back(1);  // CephXTicketBlob v1, empty: no reclaim
  put_u64(out, 0);
  put_u32(out, 0);
  put_u32(out, other_keys);
  return out;
}

bool decode_ticket_reply(ByteView in, std::size_t& pos, KeyRef key, std::vector<ServiceTicket>& out,
                         std::string& why) {
  Reader r(in, pos, why);
  r.expect_version(1, "service ticket reply");
  const std::uint32_t n = r.u32("ticket count");
  if (r.ok() && n > 64) r.fail(fmt::format("{} service tickets in one reply", n));
  for (std::uint32_t i = 0; i < n && r.ok(); ++i) {
    ServiceTicket t;
    t.service_id = r.u32("service_id");
    r.expect_version(1, "service ticket");
    const ByteView ct = r.blob("CephXServiceTicket");
    const std::uint8_t ticket_enc = r.u8("ticket_enc");
    const ByteView blob = r.blob("ticket blob");
    if (!r.ok()) return false;
    std::string e;
    auto plain = open(key, kUsageTicketSessionKey, ct, e);
    if (!plain) {
      r.fail(fmt::format("service {:#x} ticket: {}", t.service_id, e));
      return false;
    }
    std::size_t p = 0;
    Reader tr(*plain, p, e);
    tr.expect_version(1, "CephXServiceTicket");
    if (tr.ok() && !CryptoKey::decode(*plain, p, t.session_key, e)) tr.fail(e);
    t.validity_sec = tr.u32("validity");
    t.validity_nsec = tr.u32("validity");
    if (tr.ok()) check_key("session key", t.session_key, tr);
    if (!tr.ok()) {
      r.fail(fmt::format("service {:#x} ticket: {}", t.service_id, e));
      return false;
    }
    if (ticket_enc != 0) {
      // Only a reclaiming client (global_id != 0 with its old ticket) gets
      // an encrypted ticket blob; Siphon never reclaims.
      r.fail(fmt::format("service {:#x}: encrypted ticket blob, but no global_id was reclaimed", t.service_id));
      return false;
    }
    t.ticket_blob.assign(blob.begin(), blob.end());
    std::size_t bp = 0;
    Reader br(blob, bp, e);
    br.expect_version(1, "CephXTicketBlob");
    t.secret_id = br.u64("secret_id");
    br.blob("ticket");
    if (!br.ok()) {
      r.fail(fmt::format("service {:#x}: {}", t.service_id, e));
      return false;
    }
    out.push_back(std::move(t));
  }
  return r.ok();
}

std::optional<MonAuthResult> decode_mon_auth_done(KeyRef entity_secret, ByteView payload, std::string& why) {
  std::size_t pos = 0;
  Reader r(payload, pos, why);
  const std::uint16_t type = r.u16("request_type");
  const auto status = static_cast<std::int32_t>(r.u32("status"));
  if (!r.ok()) return std::nullopt;
  if (type != kCephxGetAuthSessionKey) {
    why = fmt::format("reply to request type {:#06x}, expected {:#06x}", type, kCephxGetAuthSessionKey);
    return std::nullopt;
  }
  if (status != 0) {
    why = fmt::format("mon answered status {}", status);
    return std::nullopt;
  }
  std::vector<ServiceTicket> tickets;
  if (!decode_ticket_reply(payload, pos, entity_secret, tickets, why)) {
    why = "AUTH ticket (opened with the entity's key): " + why;
    return std::nullopt;
  }
  MonAuthResult res;
  bool have_auth = false;
  for (auto& t : tickets)
    if (t.service_id == kServiceAuth) {
      res.auth = std::move(t);
      have_auth = true;
    }
  if (!have_auth) {
    why = "the reply holds no AUTH ticket";
    return std::nullopt;
  }
  const KeyRef session = res.auth.session_key;
  if (pos == payload.size()) return res;  // other_keys was 0: no secret, no extra tickets
  const ByteView cbl = r.blob("connection secret");
  if (!r.ok()) return std::nullopt;
  if (!cbl.empty()) {
    std::size_t cp = 0;
    std::string e;
    Reader cr(cbl, cp, e);
    const ByteView ct = cr.blob("connection secret");
    std::optional<Bytes> plain;
    if (cr.ok()) plain = open(session, kUsageAuthConnectionSecret, ct, e);
    if (!plain) {
      why = "connection secret: " + e;
      return std::nullopt;
    }
    std::size_t sp = 0;
    Reader sr(*plain, sp, e);
    const ByteView secret = sr.blob("connection secret");
    if (!sr.ok()) {
      why = "connection secret: " + e;
      return std::nullopt;
    }
    res.connection_secret.assign(secret.begin(), secret.end());
  }
  const ByteView extra = r.blob("extra tickets");
  if (!r.ok()) return std::nullopt;
  if (!extra.empty()) {
    std::size_t ep = 0;
    if (!decode_ticket_reply(extra, ep, session, res.extra, why)) {
      why = "service tickets: " + why;
      return std::nullopt;
    }
  }
  return res;
}

// ---------------------------------------------------------------------------
// The authorizer

std::optional<Bytes> authorizer_payload(std::uint64_t global_id, const ServiceTicket& ticket, std::uint64_t nonce,
                                        std::optional<std::uint64_t> server_challenge, std::string& why) {
  if (ticket.ticket_blob.empty()) {
    why = fmt::format("no ticket for service {:#x}", ticket.service_id);
    return std::nullopt;
  }
  Bytes body;
  body.push_back(2);  // CephXAuthorize v2
  put_u64(body, nonce);
  body.push_back(server_challenge ? 1 : 0);
  put_u64(body, server_challenge ? *server_challenge + 1 : 0);  // mod 2^64, as Ceph
  auto sealed = seal_with_length(ticket.session_key, kUsageAuthorize, body, why);
  if (!sealed) return std::nullopt;
  Bytes out;
  out.push_back(1);  // authorizer_v (AUTH_MODE_AUTHORIZER)
  put_u64(out, global_id);
  put_u32(out, ticket.service_id);
  out.insert(out.end(), ticket.ticket_blob.begin(), ticket.ticket_blob.end());
  out.insert(out.end(), sealed->begin(), sealed->end());
  return out;
}

std::optional<std::uint64_t> decode_authorizer_challenge(KeyRef session_key, ByteView payload, std::string& why) {
  auto plain = open(session_key, kUsageAuthorizeChallenge, payload, why);
  if (!plain) {
    why = "authorizer challenge: " + why;
    return std::nullopt;
  }
  std::size_t pos = 0;
  Reader r(*plain, pos, why);
  r.expect_version(1, "CephXAuthorizeChallenge");
  const std::uint64_t c = r.u64("server_challenge");
  if (!r.ok()) return std::nullopt;
  return c;
}

std::optional<Bytes> decode_authorize_reply(KeyRef session_key, ByteView payload, std::uint64_t nonce,
                                            std::string& why) {
  std::size_t pos = 0;
  Reader r(payload, pos, why);
  const ByteView ct = r.blob("CephXAuthorizeReply");
  if (!r.ok()) return std::nullopt;
  auto plain = open(session_key, kUsageAuthorizeReply, ct, why);
  if (!plain) {
    why = "CephXAuthorizeReply: " + why;
    return std::nullopt;
  }
  std::size_t pp = 0;
  Reader pr(*plain, pp, why);
  const std::uint8_t v = pr.u8("CephXAuthorizeReply");
  const std::uint64_t nonce_plus_one = pr.u64("nonce_plus_one");
  if (!pr.ok()) return std::nullopt;
  if (v < 1 || v > 2) {
    why = fmt::format("CephXAuthorizeReply version {} (1 or 2 expected)", v);
    return std::nullopt;
  }
  if (nonce_plus_one != nonce + 1) {
    why = fmt::format("the reply answers nonce {:#x}, ours was {:#x} (a replayed or forged reply)",
                      nonce_plus_one - 1, nonce);
    return std::nullopt;
  }
  Bytes secret;
  if (v >= 2) {
    const ByteView s = pr.blob("connection_secret");
    if (!pr.ok()) return std::nullopt;
    secret.assign(s.begin(), s.end());
  }
  return secret;
}

std::optional<Bytes> principal_session_key_request(std::uint64_t global_id, const ServiceTicket& auth_ticket,
                                                   std::uint64_t nonce, std::uint32_t keys, std::string& why) {
  auto authorizer = authorizer_payload(global_id, auth_ticket, nonce, std::nullopt, why);
  if (!authorizer) return std::nullopt;
  Bytes out;
  put_u16(out, kCephxGetPrincipalSessionKey);
  out.insert(out.end(), authorizer->begin(), authorizer->end());
  out.push_back(1);  // CephXServiceTicketRequest v1
  put_u32(out, keys);
  return out;
}

std::optional<std::vector<ServiceTicket>> decode_principal_session_key_reply(KeyRef auth_session_key,
                                                                             ByteView result_bl, std::string& why) {
  std::size_t pos = 0;
  Reader r(result_bl, pos, why);
  const std::uint16_t type = r.u16("request_type");
  const auto status = static_cast<std::int32_t>(r.u32("status"));
  if (!r.ok()) return std::nullopt;
  if (type != kCephxGetPrincipalSessionKey) {
    why = fmt::format("reply to request type {:#06x}, expected {:#06x}", type, kCephxGetPrincipalSessionKey);
    return std::nullopt;
  }
  if (status != 0) {
    why = fmt::format("mon answered status {}", status);
    return std::nullopt;
  }
  std::vector<ServiceTicket> tickets;
  if (!decode_ticket_reply(result_bl, pos, auth_session_key, tickets, why)) return std::nullopt;
  return tickets;
}

// ---------------------------------------------------------------------------
// The accepting side

std::optional<AuthenticateRequest> decode_authenticate(ByteView payload, std::string& why) {
  std::size_t pos = 0;
  Reader r(payload, pos, why);
  const std::uint16_t type = r.u16("request_type");
  if (r.ok() && type != kCephxGetAuthSessionKey)
    r.fail(fmt::format("request type {:#06x}, expected {:#06x} (get auth session key)", type,
                       kCephxGetAuthSessionKey));
  const std::uint8_t v = r.u8("CephXAuthenticate");
  // v1 lacks other_keys; Siphon needs it (no connection secret without it).
  if (r.ok() && (v < 2 || v > 3)) r.fail(fmt::format("CephXAuthenticate version {} (2 or 3 accepted)", v));
  AuthenticateRequest req;
  req.client_challenge = r.u64("client_challenge");
  req.key = r.u64("key");
  r.expect_version(1, "old ticket");
  req.old_secret_id = r.u64("old ticket secret_id");
  const ByteView old = r.blob("old ticket");
  req.other_keys = r.u32("other_keys");
  if (!r.ok()) return std::nullopt;
  if (pos != payload.size()) {
    why = fmt::format("{} bytes after CephXAuthenticate", payload.size() - pos);
    return std::nullopt;
  }
  req.old_ticket.assign(old.begin(), old.end());
  return req;
}

Bytes server_challenge_payload(std::uint64_t challenge) {
  Bytes out;
  out.push_back(1);
  put_u64(out, challenge);
  return out;
}

std::optional<Bytes> mon_auth_done_payload(KeyRef entity_secret, const CryptoKey& session_key,
                                           std::uint32_t validity_sec, ByteView connection_secret,
                                           std::string& why) {
  Bytes ticket;  // CephXServiceTicket
  ticket.push_back(1);
  const Bytes key = session_key.encode();
  ticket.insert(ticket.end(), key.begin(), key.end());
  put_u32(ticket, validity_sec);
  put_u32(ticket, 0);
  auto sealed_ticket = seal_with_length(entity_secret, kUsageTicketSessionKey, ticket, why);
  if (!sealed_ticket) return std::nullopt;
  Bytes secret;  // std::string connection_secret
  put_u32(secret, static_cast<std::uint32_t>(connection_secret.size()));
  secret.insert(secret.end(), connection_secret.begin(), connection_secret.end());
  auto cbl = seal_with_length(session_key, kUsageAuthConnectionSecret, secret, why);
  if (!cbl) return std::nullopt;

  Bytes out;
  put_u16(out, kCephxGetAuthSessionKey);
  put_u32(out, 0);  // status
  out.push_back(1);  // service ticket reply v1
  put_u32(out, 1);
  put_u32(out, kServiceAuth);
  out.push_back(1);  // service ticket v1
  out.insert(out.end(), sealed_ticket->begin(), sealed_ticket->end());
  out.push_back(0);  // ticket_enc
  put_u32(out, 13);  // CephXTicketBlob: v1, secret_id 0, no blob
  out.push_back(1);
  put_u64(out, 0);
  put_u32(out, 0);
  put_u32(out, static_cast<std::uint32_t>(cbl->size()));
  out.insert(out.end(), cbl->begin(), cbl->end());
  put_u32(out, 0);  // no extra tickets
  return out;
}

// ---------------------------------------------------------------------------
// The accepting side: authorizers (cephx.md §8.1)

std::optional<AuthorizerRequest> decode_authorizer(ByteView payload, std::string& why) {
  std::size_t pos = 0;
  Reader r(payload, pos, why);
  r.expect_version(1, "authorizer");  // authorizer_v doubles as AUTH_MODE_AUTHORIZER
  AuthorizerRequest a;
  a.global_id = r.u64("global_id");
  a.service_id = r.u32("service_id");
  r.expect_version(1, "CephXTicketBlob");
  a.secret_id = r.u64("secret_id");
  const ByteView ticket = r.blob("ticket blob");
  const ByteView authorize = r.blob("CephXAuthorize");
  if (!r.ok()) return std::nullopt;
  if (pos != payload.size()) {
    why = fmt::format("{} bytes after the authorizer", payload.size() - pos);
    return std::nullopt;
  }
  a.ticket_ct.assign(ticket.begin(), ticket.end());
  a.authorize_ct.assign(authorize.begin(), authorize.end());
  return a;
}

std::optional<TicketInfo> open_ticket(KeyRef service_secret, ByteView ticket_ct, std::string& why) {
  auto plain = open(service_secret, kUsageTicketInfo, ticket_ct, why);
  if (!plain) {
    why = "ticket blob: " + why;
    return std::nullopt;
  }
  std::size_t pos = 0;
  Reader r(*plain, pos, why);
  r.expect_version(1, "CephXServiceTicketInfo");
  const std::uint8_t v = r.u8("AuthTicket");
  if (r.ok() && (v < 1 || v > 2)) r.fail(fmt::format("AuthTicket version {} (1 or 2 expected)", v));
  TicketInfo t;
  t.entity_type = r.u32("entity type");
  const ByteView id = r.blob("entity id");
  t.global_id = r.u64("global_id");
  if (v >= 2) r.u64("old_auid");
  t.created_sec = r.u32("created");
  t.created_nsec = r.u32("created");
  t.expires_sec = r.u32("expires");
  t.expires_nsec = r.u32("expires");
  r.expect_version(1, "AuthCapsInfo");
  t.allow_all = r.u8("allow_all") != 0;
  const ByteView caps = r.blob("caps");
  t.flags = r.u32("flags");
  if (r.ok() && !CryptoKey::decode(*plain, pos, t.session_key, why)) r.fail("session key: " + why);
  if (r.ok()) check_key("session key", t.session_key, r);
  if (!r.ok()) {
    why = "CephXServiceTicketInfo: " + why;
    return std::nullopt;
  }
  t.entity_id.assign(id.begin(), id.end());
  if (!caps.empty()) {  // an encoded std::string
    std::size_t cp = 0;
    std::string e;
    Reader cr(caps, cp, e);
    const ByteView text = cr.blob("caps");
    if (!cr.ok()) {
      why = "CephXServiceTicketInfo caps: " + e;
      return std::nullopt;
    }
    t.caps.assign(text.begin(), text.end());
  }
  return t;
}

std::optional<Bytes> mint_ticket_blob(KeyRef service_secret, std::uint64_t secret_id, const TicketInfo& info,
                                      std::string& why) {
  Bytes body;
  body.push_back(1);  // CephXServiceTicketInfo v1
  body.push_back(2);  // AuthTicket v2
  put_u32(body, info.entity_type);
  put_u32(body, static_cast<std::uint32_t>(info.entity_id.size()));
  body.insert(body.end(), info.entity_id.begin(), info.entity_id.end());
  put_u64(body, info.global_id);
  put_u64(body, 0xffffffffffffffffull);  // old_auid: CEPH_AUTH_UID_DEFAULT
  put_u32(body, info.created_sec);
  put_u32(body, info.created_nsec);
  put_u32(body, info.expires_sec);
  put_u32(body, info.expires_nsec);
  body.push_back(1);  // AuthCapsInfo v1
  body.push_back(info.allow_all ? 1 : 0);
  put_u32(body, static_cast<std::uint32_t>(info.caps.size() + 4));
  put_u32(body, static_cast<std::uint32_t>(info.caps.size()));
  body.insert(body.end(), info.caps.begin(), info.caps.end());
  put_u32(body, info.flags);
  const Bytes key = info.session_key.encode();
  body.insert(body.end(), key.begin(), key.end());
  auto ct = seal(service_secret, kUsageTicketInfo, body, why);
  if (!ct) return std::nullopt;
  Bytes out;
  out.push_back(1);  // CephXTicketBlob v1
  put_u64(out, secret_id);
  put_u32(out, static_cast<std::uint32_t>(ct->size()));
  out.insert(out.end(), ct->begin(), ct->end());
  return out;
}

std::optional<Authorize> open_authorize(KeyRef session_key, ByteView authorize_ct, std::string& why) {
  auto plain = open(session_key, kUsageAuthorize, authorize_ct, why);
  if (!plain) {
    why = "CephXAuthorize: " + why;
    return std::nullopt;
  }
  std::size_t pos = 0;
  Reader r(*plain, pos, why);
  const std::uint8_t v = r.u8("CephXAuthorize");
  Authorize a;
  a.nonce = r.u64("nonce");
  // v1 (no challenge fields) cannot answer the challenge msgr2 requires.
  if (r.ok() && v < 2) r.fail(fmt::format("CephXAuthorize version {} (2 needed for the challenge)", v));
  a.have_challenge = r.u8("have_challenge") != 0;
  a.server_challenge_plus_one = r.u64("server_challenge_plus_one");
  if (!r.ok()) {
    why = "CephXAuthorize: " + why;
    return std::nullopt;
  }
  return a;
}

std::optional<Bytes> authorizer_challenge_payload(KeyRef session_key, std::uint64_t challenge, std::string& why) {
  Bytes body;
  body.push_back(1);
  put_u64(body, challenge);
  return seal(session_key, kUsageAuthorizeChallenge, body, why);
}

std::optional<Bytes> authorize_reply_payload(KeyRef session_key, std::uint64_t nonce, ByteView connection_secret,
                                             std::string& why) {
  Bytes body;
  body.push_back(connection_secret.empty() ? 1 : 2);
  put_u64(body, nonce + 1);  // mod 2^64, as Ceph
  if (!connection_secret.empty()) {
    put_u32(body, static_cast<std::uint32_t>(connection_secret.size()));
    body.insert(body.end(), connection_secret.begin(), connection_secret.end());
  }
  return seal_with_length(session_key, kUsageAuthorizeReply, body, why);
}

// ---------------------------------------------------------------------------
// Rotating service keys (cephx.md §3.8)

Bytes rotating_key_request() {
  Bytes out;
  put_u16(out, kCephxGetRotatingKey);
  return out;
}

std::optional<RotatingSecrets> decode_rotating_key_reply(KeyRef entity_secret, ByteView result_bl,
                                                         std::string& why) {
  std::size_t pos = 0;
  Reader r(result_bl, pos, why);
  const std::uint16_t type = r.u16("request_type");
  const auto status = static_cast<std::int32_t>(r.u32("status"));
  if (!r.ok()) return std::nullopt;
  if (type != kCephxGetRotatingKey) {
    why = fmt::format("reply to request type {:#06x}, expected {:#06x}", type, kCephxGetRotatingKey);
    return std::nullopt;
  }
  if (status != 0) {
    why = fmt::format("mon answered status {}", status);
    return std::nullopt;
  }
  const ByteView ct = r.blob("RotatingSecrets");
  if (!r.ok()) return std::nullopt;
  auto plain = open(entity_secret, kUsageRotatingSecret, ct, why);
  if (!plain) {
    why = "RotatingSecrets (opened with our own key): " + why;
    return std::nullopt;
  }
  std::size_t p = 0;
  Reader sr(*plain, p, why);
  sr.expect_version(1, "RotatingSecrets");
  const std::uint32_t n = sr.u32("secret count");
  if (sr.ok() && n > 64) sr.fail(fmt::format("{} rotating secrets in one reply", n));
  RotatingSecrets out;
  for (std::uint32_t i = 0; i < n && sr.ok(); ++i) {
    RotatingSecret s;
    s.secret_id = sr.u64("secret_id");
    sr.expect_version(1, "ExpiringCryptoKey");
    std::string e;
    if (sr.ok() && !CryptoKey::decode(*plain, p, s.key, e)) sr.fail("rotating key: " + e);
    if (sr.ok()) check_key("rotating key", s.key, sr);
    s.expires_sec = sr.u32("expiration");
    s.expires_nsec = sr.u32("expiration");
    out.secrets.push_back(std::move(s));
  }
  out.max_ver = sr.u64("max_ver");
  if (!sr.ok()) return std::nullopt;
  return out;
}

std::optional<Bytes> rotating_key_reply(KeyRef entity_secret, const RotatingSecrets& s, std::string& why) {
  Bytes body;
  body.push_back(1);
  put_u32(body, static_cast<std::uint32_t>(s.secrets.size()));
  for (const RotatingSecret& k : s.secrets) {
    put_u64(body, k.secret_id);
    body.push_back(1);
    const Bytes key = k.key.encode();
    body.insert(body.end(), key.begin(), key.end());
    put_u32(body, k.expires_sec);
    put_u32(body, k.expires_nsec);
  }
  put_u64(body, s.max_ver);
  auto sealed = seal_with_length(entity_secret, kUsageRotatingSecret, body, why);
  if (!sealed) return std::nullopt;
  Bytes out;
  put_u16(out, kCephxGetRotatingKey);
  put_u32(out, 0);
  out.insert(out.end(), sealed->begin(), sealed->end());
  return out;
}

}  // namespace siphon::auth

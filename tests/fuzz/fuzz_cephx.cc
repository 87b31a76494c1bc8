// libFuzzer target: the cephx decoders a hostile monitor (or a hostile
// keyring file) reaches (msgr/auth): AUTH_REPLY_MORE's server challenge,
// AUTH_DONE's payload (tickets, connection secret, extra tickets) opened
// with the lab's client.admin key, the text keyring and base64 keys; and
// what a hostile OSD or monitor sends the authorizer and the ticket renewal:
// the service's challenge, its CephXAuthorizeReply, MAuthReply's result_bl
// (opened with the key as a session key); and what a hostile client sends a
// daemon's accepting side (the authorizer: its framing, the ticket blob and
// CephXAuthorize opened with the key) and a hostile monitor the daemon's
// CEPHX_GET_ROTATING_KEY.
// Oracles: no crash or sanitizer report; a decoded AUTH_DONE has a 16-byte
// session key; a rejection always says why.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "msgr/auth/cephx.h"
#include "msgr/auth/keyring.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

const siphon::auth::Bytes kAdmin = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                    0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace siphon::auth;
  const ByteView in(data, size);
  std::string why;
  if (auto r = decode_mon_auth_done(kAdmin, in, why)) {
    check(r->auth.session_key.secret.size() >= kAesKeySize);
  } else {
    check(!why.empty());
  }
  why.clear();
  if (!decode_server_challenge(in, why)) check(!why.empty());
  why.clear();
  if (!decode_authorizer_challenge(kAdmin, in, why)) check(!why.empty());
  why.clear();
  if (!decode_authorize_reply(kAdmin, in, 0x1234, why)) check(!why.empty());
  why.clear();
  if (auto t = decode_principal_session_key_reply(kAdmin, in, why)) {
    for (const auto& x : *t) check(x.session_key.secret.size() >= kAesKeySize);
  } else {
    check(!why.empty());
  }
  why.clear();
  if (auto a = decode_authorizer(in, why)) {
    why.clear();
    if (auto t = open_ticket(kAdmin, a->ticket_ct, why)) check(t->session_key.secret.size() >= kAesKeySize);
    else check(!why.empty());
  } else {
    check(!why.empty());
  }
  why.clear();
  if (auto t = open_ticket(kAdmin, in, why)) check(t->session_key.secret.size() >= kAesKeySize);
  else check(!why.empty());
  why.clear();
  if (!open_authorize(kAdmin, in, why)) check(!why.empty());
  why.clear();
  if (auto r = decode_rotating_key_reply(kAdmin, in, why)) {
    for (const auto& k : r->secrets) check(k.key.secret.size() >= kAesKeySize);
  } else {
    check(!why.empty());
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  why.clear();
  if (!Keyring::parse(text, "fuzz.keyring", why)) check(!why.empty());
  why.clear();
  if (!CryptoKey::from_base64(text, why)) check(!why.empty());
  return 0;
}

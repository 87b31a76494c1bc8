// libFuzzer target: the cephx decoders a hostile monitor (or a hostile
// keyring file) reaches (msgr/auth): AUTH_REPLY_MORE's server challenge,
// AUTH_DONE's payload (tickets, connection secret, extra tickets) opened
// with the lab's client.admin key, the text keyring and base64 keys; and
// what a hostile OSD or monitor sends the authorizer and the ticket renewal:
// the service's challenge, its CephXAuthorizeReply, MAuthReply's result_bl
// (opened with the key as a session key); and what a hostile client sends a
// daemon's accepting side (the authorizer: its framing, the ticket blob and
// CephXAuthorize opened with the key) and a hostile monitor the daemon's
// CEPHX_GET_ROTATING_KEY. The decoders that open something run twice:
// with the AES key and with an aes256k one (docs/security.md §5e).
// Oracles: no crash or sanitizer report; a decoded AUTH_DONE has a 16-byte
// session key (32 if aes256k); a rejection always says why.
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

// The aes256k key of the aes256k seeds in corpus/cephx (written by
// make_cephx_aes256k_seeds.cc): RFC 8009's base key.
const siphon::auth::CryptoKey kK256{
    siphon::auth::kCryptoAes256k, 1700000000, 0,
    siphon::auth::Bytes{0x6d, 0x40, 0x4d, 0x37, 0xfa, 0xf7, 0x9f, 0x9d, 0xf0, 0xd3, 0x35, 0x68, 0xd3, 0x20, 0x66, 0x98,
                        0x00, 0xeb, 0x48, 0x36, 0x47, 0x2e, 0xa8, 0xa0, 0x26, 0xd1, 0x6b, 0x71, 0x82, 0x46, 0x0c, 0x52}};

// A session or rotating key that came out of a decoder is long enough for
// its type.
bool sized(const siphon::auth::CryptoKey& k) {
  return k.secret.size() >= (k.type == siphon::auth::kCryptoAes256k ? siphon::auth::kAes256kKeySize
                                                                     : siphon::auth::kAesKeySize);
}

void keyed(const siphon::auth::KeyRef key, siphon::auth::ByteView in) {
  using namespace siphon::auth;
  std::string why;
  if (auto r = decode_mon_auth_done(key, in, why)) {
    check(sized(r->auth.session_key));
  } else {
    check(!why.empty());
  }
  why.clear();
  if (!decode_server_challenge(in, why)) check(!why.empty());
  why.clear();
  if (!decode_authorizer_challenge(key, in, why)) check(!why.empty());
  why.clear();
  if (!decode_authorize_reply(key, in, 0x1234, why)) check(!why.empty());
  why.clear();
  if (auto t = decode_principal_session_key_reply(key, in, why)) {
    for (const auto& x : *t) check(sized(x.session_key));
  } else {
    check(!why.empty());
  }
  why.clear();
  if (auto a = decode_authorizer(in, why)) {
    why.clear();
    if (auto t = open_ticket(key, a->ticket_ct, why)) check(sized(t->session_key));
    else check(!why.empty());
  } else {
    check(!why.empty());
  }
  why.clear();
  if (auto t = open_ticket(key, in, why)) check(sized(t->session_key));
  else check(!why.empty());
  why.clear();
  if (!open_authorize(key, in, why)) check(!why.empty());
  why.clear();
  if (auto r = decode_rotating_key_reply(key, in, why)) {
    for (const auto& k : r->secrets) check(sized(k.key));
  } else {
    check(!why.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace siphon::auth;
  const ByteView in(data, size);
  keyed(kAdmin, in);
  keyed(kK256, in);
  std::string why;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  why.clear();
  if (!Keyring::parse(text, "fuzz.keyring", why)) check(!why.empty());
  why.clear();
  if (!CryptoKey::from_base64(text, why)) check(!why.empty());
  return 0;
}

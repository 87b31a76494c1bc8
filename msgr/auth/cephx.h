// cephx's client side towards a monitor, as bytes in and bytes out
// (shared/reference/cephx.md §3, §5). No I/O and no clock: the session
// layer's handshake calls these with the frames' auth payloads.
//
//   C: AUTH_REQUEST       mon_request_payload(name, global_id)  (= auth none's)
//   S: AUTH_REPLY_MORE    decode_server_challenge()
//   C: AUTH_REQUEST_MORE  authenticate_payload(secret, server/client challenge, other_keys)
//   S: AUTH_DONE          decode_mon_auth_done() -> session key, AUTH ticket,
//                         connection secret, service tickets
//   both: AUTH_SIGNATURE  hmac_sha256(session key, the bytes received)
//
// Keys are KeyRefs: an AES key (bare secret bytes are one) or an aes256k
// key; every sealed structure uses its own key usage (crypto.h kUsage*),
// which only aes256k's key derivation reads (docs/security.md §5e).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "msgr/auth/aes256k.h"
#include "msgr/auth/crypto.h"

namespace siphon::auth {

inline constexpr std::uint16_t kCephxGetAuthSessionKey = 0x0100;
inline constexpr std::uint16_t kCephxGetPrincipalSessionKey = 0x0200;
inline constexpr std::uint16_t kCephxGetRotatingKey = 0x0400;

// Service ids (= entity types) for `other_keys`.
inline constexpr std::uint32_t kServiceMon = 0x01;
inline constexpr std::uint32_t kServiceMds = 0x02;
inline constexpr std::uint32_t kServiceOsd = 0x04;
inline constexpr std::uint32_t kServiceMgr = 0x10;
inline constexpr std::uint32_t kServiceAuth = 0x20;
// What a Ceph client asks for on its real mon session (cephx.md §3.3).
inline constexpr std::uint32_t kDefaultWantKeys = kServiceMon | kServiceOsd | kServiceMgr | kServiceAuth;

// The secure-mode connection secret the mon hands out (64 bytes).
inline constexpr std::size_t kConnectionSecretSize = 64;

// A ticket for one service: its session key, and the opaque CephXTicketBlob
// (u8 1 | u64 secret_id | u32 len + blob) copied verbatim for authorizers.
struct ServiceTicket {
  std::uint32_t service_id = 0;
  CryptoKey session_key;
  std::uint32_t validity_sec = 0;
  std::uint32_t validity_nsec = 0;
  std::uint64_t secret_id = 0;
  Bytes ticket_blob;  // the whole encoded CephXTicketBlob
};

// What AUTH_DONE from a mon gives the client.
struct MonAuthResult {
  ServiceTicket auth;              // service AUTH (0x20): the session key of this connection
  Bytes connection_secret;         // 64 bytes in secure mode, empty in crc mode
  std::vector<ServiceTicket> extra;  // MON/OSD/MGR/MDS tickets asked for in other_keys
};

// The proof of the entity secret: encode_encrypt(server | client challenge),
// XOR of its little-endian u64 words, u32 length prefix included (§3.3).
// With an aes256k key, the XOR of HMAC-SHA256(secret, server | client)'s
// four words instead (Ceph 19.2.6+, docs/security.md §5e).
std::optional<std::uint64_t> challenge_proof(KeyRef secret, std::uint64_t server_challenge,
                                             std::uint64_t client_challenge, std::string& why);

// AUTH_REPLY_MORE from a mon: CephXServerChallenge {u8 1, u64}.
std::optional<std::uint64_t> decode_server_challenge(ByteView payload, std::string& why);

// AUTH_REQUEST_MORE to a mon: CephXRequestHeader + CephXAuthenticate v3 with
// an empty old ticket (Siphon never reclaims a global_id: it sends 0).
std::optional<Bytes> authenticate_payload(KeyRef secret, std::uint64_t server_challenge,
                                          std::uint64_t client_challenge, std::uint32_t other_keys,
                                          std::string& why);

// Decodes AUTH_DONE's payload with the entity's secret. Fails (with a reason
// naming the step) on a status != 0, a bad envelope or a truncated payload.
std::optional<MonAuthResult> decode_mon_auth_done(KeyRef entity_secret, ByteView payload, std::string& why);

// Decodes a service ticket reply (u8 1 | u32 n | tickets); the
// CephXServiceTicket parts are opened with `key`. Used for AUTH_DONE's two
// replies and for MAuthReply.
bool decode_ticket_reply(ByteView in, std::size_t& pos, KeyRef key, std::vector<ServiceTicket>& out,
                         std::string& why);

// --- the authorizer towards OSD, MGR and MDS (cephx.md §4) ---------------------
//
//   C: AUTH_REQUEST       authorizer_payload(gid, ticket, nonce, no challenge)
//   S: AUTH_REPLY_MORE    decode_authorizer_challenge(service session key)
//   C: AUTH_REQUEST_MORE  authorizer_payload(gid, ticket, nonce, challenge)
//   S: AUTH_DONE          decode_authorize_reply() -> connection secret
//   both: AUTH_SIGNATURE  hmac_sha256(service session key, the bytes received)

// u8 1 | u64 global_id | u32 service_id | the ticket blob verbatim |
// u32 len + seal(CephXAuthorize v2 {nonce, have_challenge,
// server_challenge + 1}) under the ticket's session key.
std::optional<Bytes> authorizer_payload(std::uint64_t global_id, const ServiceTicket& ticket, std::uint64_t nonce,
                                        std::optional<std::uint64_t> server_challenge, std::string& why);
// AUTH_REPLY_MORE from a service: seal(CephXAuthorizeChallenge {u8 1,
// u64}) with no length prefix (cephx.md §4.2).
std::optional<std::uint64_t> decode_authorizer_challenge(KeyRef session_key, ByteView payload, std::string& why);
// AUTH_DONE from a service: u32 len + seal(CephXAuthorizeReply). Checks
// that it answers `nonce` (nonce + 1); returns the connection secret (empty
// for a v1 reply: crc mode).
std::optional<Bytes> decode_authorize_reply(KeyRef session_key, ByteView payload, std::uint64_t nonce,
                                            std::string& why);

// --- service ticket renewal inside a mon session (cephx.md §3.8) ----------------

// MAuth's auth_payload for CEPHX_GET_PRINCIPAL_SESSION_KEY: u16 0x0200 | the
// authorizer built from the AUTH ticket (no challenge) | CephXServiceTicket-
// Request {u8 1, u32 keys}.
std::optional<Bytes> principal_session_key_request(std::uint64_t global_id, const ServiceTicket& auth_ticket,
                                                   std::uint64_t nonce, std::uint32_t keys, std::string& why);
// MAuthReply's result_bl for it: u16 0x0200 | s32 status | a service ticket
// reply sealed with the AUTH session key. The renewed tickets, or nullopt
// with the reason (a non-zero status included).
std::optional<std::vector<ServiceTicket>> decode_principal_session_key_reply(KeyRef auth_session_key,
                                                                             ByteView result_bl, std::string& why);

// --- the accepting side: cephx's key-based exchange (cephx.md §8.4a) ----------
// A Siphon daemon without a monitor plays the monitor's part of §3 for the
// entities in its keyring: it challenges, checks the proof, and hands out a
// session key and a connection secret. It issues no service tickets: the
// AUTH ticket blob it returns is empty, and other_keys is not honoured.

// AUTH_REQUEST_MORE to a mon, decoded (CephXRequestHeader + CephXAuthenticate).
struct AuthenticateRequest {
  std::uint64_t client_challenge = 0;
  std::uint64_t key = 0;  // the proof
  std::uint64_t old_secret_id = 0;
  Bytes old_ticket;
  std::uint32_t other_keys = 0;
};
std::optional<AuthenticateRequest> decode_authenticate(ByteView payload, std::string& why);

// AUTH_REPLY_MORE's payload: CephXServerChallenge {u8 1, u64}.
Bytes server_challenge_payload(std::uint64_t challenge);

// AUTH_DONE's payload: the AUTH ticket (session key and validity, sealed
// with the entity's secret; an empty ticket blob) and the connection secret
// (sealed with the session key; empty in crc mode), no extra tickets.
std::optional<Bytes> mon_auth_done_payload(KeyRef entity_secret, const CryptoKey& session_key,
                                           std::uint32_t validity_sec, ByteView connection_secret,
                                           std::string& why);

// --- the accepting side: authorizers (cephx.md §4, §8.1) --------------------------
// A daemon in a cephx cluster validates the tickets its monitor issued to
// clients: it opens the ticket blob with its service's rotating key (or the
// long-term "<type>." key for secret_id -1), checks the authorizer's
// CephXAuthorize with the ticket's session key, challenges once and answers
// with CephXAuthorizeReply.

inline constexpr std::uint64_t kLongTermSecretId = 0xffffffffffffffffull;

// AUTH_REQUEST[_MORE] from a client presenting a ticket (§4.1), split up.
struct AuthorizerRequest {
  std::uint64_t global_id = 0;
  std::uint32_t service_id = 0;
  std::uint64_t secret_id = 0;
  Bytes ticket_ct;     // the ticket blob's enc_bl ciphertext (CephXServiceTicketInfo)
  Bytes authorize_ct;  // CephXAuthorize's ciphertext (without its u32 length)
};
std::optional<AuthorizerRequest> decode_authorizer(ByteView payload, std::string& why);

// CephXServiceTicketInfo: the AuthTicket and the ticket's session key.
struct TicketInfo {
  std::uint32_t entity_type = 0;  // of ticket.name (8 = client)
  std::string entity_id;          // "admin"
  std::uint64_t global_id = 0;
  std::uint32_t created_sec = 0, created_nsec = 0;
  std::uint32_t expires_sec = 0, expires_nsec = 0;
  bool allow_all = false;
  std::string caps;  // the cap text the mon holds for this entity and service
  std::uint32_t flags = 0;
  CryptoKey session_key;
};
// Opens enc_bl(CephXServiceTicketInfo) with the service secret.
std::optional<TicketInfo> open_ticket(KeyRef service_secret, ByteView ticket_ct, std::string& why);
// The inverse: the whole CephXTicketBlob (u8 1 | u64 secret_id | u32 len +
// enc_bl(info)), as a monitor mints it (tests, and Siphon's own peers).
std::optional<Bytes> mint_ticket_blob(KeyRef service_secret, std::uint64_t secret_id, const TicketInfo& info,
                                      std::string& why);

// CephXAuthorize v2, opened with the ticket's session key.
struct Authorize {
  std::uint64_t nonce = 0;
  bool have_challenge = false;
  std::uint64_t server_challenge_plus_one = 0;
};
std::optional<Authorize> open_authorize(KeyRef session_key, ByteView authorize_ct, std::string& why);

// AUTH_REPLY_MORE's payload: enc_bl(CephXAuthorizeChallenge {u8 1, u64}),
// no length prefix (§4.2).
std::optional<Bytes> authorizer_challenge_payload(KeyRef session_key, std::uint64_t challenge, std::string& why);
// AUTH_DONE's payload: u32 len + seal(CephXAuthorizeReply {v1: nonce + 1;
// v2 with a non-empty connection secret: nonce + 1, the secret}) (§4.4).
std::optional<Bytes> authorize_reply_payload(KeyRef session_key, std::uint64_t nonce, ByteView connection_secret,
                                             std::string& why);

// --- rotating service keys, for daemons (cephx.md §3.8, CEPHX_GET_ROTATING_KEY) --

struct RotatingSecret {
  std::uint64_t secret_id = 0;
  CryptoKey key;
  std::uint32_t expires_sec = 0, expires_nsec = 0;
};
struct RotatingSecrets {
  std::vector<RotatingSecret> secrets;  // in the mon's order (oldest first)
  std::uint64_t max_ver = 0;
};
// MAuth's auth_payload: u16 0x0400 and nothing else.
Bytes rotating_key_request();
// MAuthReply's result_bl: u16 0x0400 | s32 status | u32 len +
// seal(RotatingSecrets) under the requesting entity's own key. nullopt with
// the reason on a non-zero status, a wrong key or a truncated reply.
std::optional<RotatingSecrets> decode_rotating_key_reply(KeyRef entity_secret, ByteView result_bl,
                                                         std::string& why);
// The inverse (a monitor's side; tests).
std::optional<Bytes> rotating_key_reply(KeyRef entity_secret, const RotatingSecrets& s, std::string& why);

}  // namespace siphon::auth

// The accepting side's cephx for clients holding a ticket from the
// cluster's monitor: validating the authorizer the way a Ceph OSD does
// (shared/reference/cephx.md §4, §8.1):
//
//   <- AUTH_REQUEST(cephx, modes, 01 | global_id | service | ticket | CephXAuthorize)
//      open the ticket with our service's rotating key secret_id (the
//      long-term "<type>." key for secret_id -1), check its global_id and
//      its expiry, open CephXAuthorize with the ticket's session key
//   AUTH_REPLY_MORE(enc_bl(CephXAuthorizeChallenge{random}))
//   <- AUTH_REQUEST_MORE(the authorizer again, answering challenge + 1)
//      every check again, then the answer
//   AUTH_DONE(the ticket's global_id, mode, CephXAuthorizeReply{nonce + 1,
//             connection secret in secure mode})
//   AUTH_SIGNATURE = HMAC-SHA256(the ticket's session key, every byte received)
//
// Every failure is a refusal (AUTH_BAD_METHOD, EACCES, as Ceph answers), with
// a reason the driver logs and counts; the peer is named once its ticket is
// open. One difference from Ceph on purpose: an expired ticket is refused
// (Ceph accepts a ticket while it still holds the rotating key, §4.5).
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "msgr/auth/cephx.h"
#include "msgr/session/handshake.h"
#include "msgr/session/transcript.h"

namespace siphon::session {
namespace {

constexpr std::int32_t kEACCES = -13;

std::string utc(std::uint32_t sec) {
  const std::time_t t = sec;
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", tm);
}

}  // namespace

Step ServerHandshake::refuse_authorizer(std::string why) {
  authorizer_challenged_ = false;
  return bad_method(proto::kAuthMethodCephx, kEACCES, std::move(why));
}

Step ServerHandshake::on_authorizer(const auth::Bytes& payload, std::uint32_t con_mode, bool answer) {
  const ServerAuth& a = me_.server_auth;
  const std::string from = fmt::format("a cephx authorizer from {}", peer_socket_addr_.to_string());
  std::string why;
  auto req = auth::decode_authorizer(payload, why);
  if (!req) return refuse_authorizer(fmt::format("{}: malformed ({})", from, why));
  const std::uint32_t mine = me_.entity_type;
  if (req->service_id != mine)
    return refuse_authorizer(fmt::format("{} (global_id {}) holds a ticket for service {}, not for this {}", from,
                                         req->global_id, proto::entity_type_name(req->service_id),
                                         proto::entity_type_name(mine)));
  // The key that opens the ticket.
  auth::Bytes service_key;
  std::uint16_t service_key_type = auth::kCryptoAes;
  std::string key_name;
  if (req->secret_id == auth::kLongTermSecretId) {
    key_name = fmt::format("{}.", proto::entity_type_name(mine));
    const auto it = a.keys.find(key_name);
    if (it == a.keys.end())
      return refuse_authorizer(fmt::format("{} (global_id {}) holds a self-minted ticket (secret_id -1) but the "
                                           "keyring has no {} key",
                                           from, req->global_id, key_name));
    service_key = it->second;
    if (const auto t = a.key_types.find(key_name); t != a.key_types.end()) service_key_type = t->second;
  } else {
    if (!a.rotating)
      return refuse_authorizer(fmt::format("{} (global_id {}): this daemon has no monitor session, so no rotating "
                                           "keys to check tickets with; it authenticates from its keyring only",
                                           from, req->global_id));
    const RotatingKeys::Lookup k = a.rotating->get(req->secret_id);
    if (!k.ready)
      return refuse_authorizer(fmt::format("{} (global_id {}): no rotating keys yet (the first fetch from the "
                                           "monitor has not succeeded)",
                                           from, req->global_id));
    if (!k.key) {
      a.rotating->want_newer(req->secret_id);
      return refuse_authorizer(fmt::format("{} (global_id {}): unknown rotating secret_id {} (have {}..{}){}", from,
                                           req->global_id, req->secret_id, k.oldest, k.newest,
                                           req->secret_id > k.newest ? "; fetching the newer keys" : ""));
    }
    service_key = k.key->key.secret;
    service_key_type = k.key->key.type;
    key_name = fmt::format("{} rotating secret_id {}", proto::entity_type_name(mine), req->secret_id);
  }
  auto ticket = auth::open_ticket(auth::KeyRef(service_key_type, service_key), req->ticket_ct, why);
  if (!ticket)
    return refuse_authorizer(fmt::format("{} (global_id {}): the ticket does not open with the {} key ({}): "
                                         "forged, or from another cluster",
                                         from, req->global_id, key_name, why));
  const proto::EntityName name{ticket->entity_type, ticket->entity_id};
  const std::string who = fmt::format("{} (global_id {}) from {}", name.to_string(), ticket->global_id,
                                      peer_socket_addr_.to_string());
  if (ticket->global_id != req->global_id)
    return refuse_authorizer(fmt::format("{} presented a ticket issued to global_id {} as global_id {}", who,
                                         ticket->global_id, req->global_id));
  const proto::UTime now = stamp_now();
  if (std::make_pair(ticket->expires_sec, ticket->expires_nsec) <= std::make_pair(now.sec, now.nsec))
    return refuse_authorizer(fmt::format("the ticket of {} expired at {} ({} s ago)", who, utc(ticket->expires_sec),
                                         now.sec - ticket->expires_sec));
  auto authorize = auth::open_authorize(ticket->session_key, req->authorize_ct, why);
  if (!authorize)
    return refuse_authorizer(fmt::format("{}: the authorizer does not open with its ticket's session key ({})", who,
                                         why));
  if (!answer || !authorize->have_challenge) {
    // First round (or a client that starts over): challenge, as every
    // msgr2 service does (cephx.md §4.2).
    authorizer_challenge_ = auth::random_u64();
    auto challenge = auth::authorizer_challenge_payload(ticket->session_key, authorizer_challenge_, why);
    if (!challenge) return fail(errc::internal_error, "cephx authorizer challenge: " + why);
    method_ = proto::kAuthMethodCephx;
    pending_mode_ = con_mode;
    authorizer_challenged_ = true;
    AuthReplyMore more;
    more.auth_payload = BufferList::copy_of(challenge->data(), challenge->size());
    return send(Step{}, encode(more));
  }
  if (authorize->server_challenge_plus_one != authorizer_challenge_ + 1)
    return refuse_authorizer(fmt::format("{} answered the challenge wrongly (a replayed authorizer?)", who));
  authorizer_challenged_ = false;
  auth::Bytes secret;
  if (pending_mode_ == proto::kConModeSecure) {
    secret.resize(auth::kConnectionSecretSize);
    auth::random_bytes(secret);
  }
  auto reply = auth::authorize_reply_payload(ticket->session_key, authorize->nonce, secret, why);
  if (!reply) return fail(errc::internal_error, "cephx authorizer reply: " + why);
  method_ = proto::kAuthMethodCephx;
  session_key_ = ticket->session_key.secret;
  peer_.global_id = ticket->global_id;
  peer_.auth_method = proto::kAuthMethodCephx;
  peer_.con_mode = pending_mode_;
  peer_.auth_name = name;
  peer_.caps = ticket->caps;
  return finish_cephx(*reply, std::move(secret));
}

}  // namespace siphon::session

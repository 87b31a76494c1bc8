// The session layer's view of the msgr2 payloads: the control-frame structs,
// ceph_msg_header2 and the auth "none" payload come from msgr/proto; this
// file adds the two helpers the state machines use (encode a payload into a
// frame; decode a frame of an expected tag into a payload, with a reason on
// failure) and the address comparisons of the session rules
// (msgr2-wire.md §5, §6, §8).
#pragma once

#include <string>

#include "msgr/proto/control.h"
#include "msgr/proto/frame.h"
#include "msgr/proto/message_header.h"
#include "msgr/proto/types.h"

namespace siphon::session {

using proto::AddrType;
using proto::EntityAddr;
using proto::EntityAddrVec;
using proto::Frame;
using proto::Tag;

using Hello = proto::Hello;
using AuthRequest = proto::AuthRequest;
using AuthBadMethod = proto::AuthBadMethod;
using AuthDone = proto::AuthDone;
using AuthSignature = proto::AuthSignature;
using ClientIdent = proto::ClientIdent;
using ServerIdent = proto::ServerIdent;
using IdentMissingFeatures = proto::IdentMissingFeatures;
using SessionReconnect = proto::SessionReconnect;
using SessionReset = proto::SessionReset;
using SessionRetry = proto::SessionRetry;
using SessionRetryGlobal = proto::SessionRetryGlobal;
using ReconnectOk = proto::SessionReconnectOk;
using Wait = proto::Wait;
using Keepalive2 = proto::Keepalive2;
using Keepalive2Ack = proto::Keepalive2Ack;
using Ack = proto::Ack;
using MsgHeader2 = proto::MessageHeader2;

inline constexpr std::int32_t kEOPNOTSUPP = -95;
using proto::kConModeCrc;
using proto::kMsgConnectLossy;

template <class T>
Frame encode(const T& payload) {
  return payload.frame();
}

// Decodes `f` as a T (tag and segment layout checked); false with `why` set
// when it is malformed. Never throws.
template <class T>
bool decode(const Frame& f, T& out, std::string& why) {
  proto::Result<T> r = proto::decode_control<T>(f);
  if (!r) {
    why = r.error().message();
    return false;
  }
  out = std::move(r).value();
  return true;
}

// The wall clock as a KEEPALIVE2 stamp.
proto::UTime stamp_now() noexcept;

// Ceph's ordering for race resolution: it compares legacy_addr() of both
// sides, i.e. entity_addr_t memcmp order with the type taken as LEGACY.
int compare_for_race(const EntityAddr& a, const EntityAddr& b) noexcept;

}  // namespace siphon::session

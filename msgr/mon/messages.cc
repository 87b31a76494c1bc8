// Encodings of the mon client messages (layouts in messages.h).
#include "msgr/mon/messages.h"

#include <utility>

namespace siphon::mon {

using proto::Decoder;
using proto::Encoder;
using proto::FieldReader;
using proto::FieldRef;
using proto::FieldWriter;

namespace {

// Runs `body` over `bl` and throws MonDecodeError naming `what` if the
// decoder failed. Trailing bytes are allowed (newer senders append fields).
template <class F>
void decode_or_throw(const BufferList& bl, std::string_view what, F&& body) {
  Decoder d(bl);
  Decoder::Scope scope(d, what);
  std::forward<F>(body)(d);
  if (!d.ok()) throw MonDecodeError(d.error().message());
}

// Replaces `front` with what body(Encoder&) writes.
template <class F>
void encode_into(BufferList& front, F&& body) {
  front.clear();
  Encoder e;
  std::forward<F>(body)(e);
  e.append_to(front);
}

// A message whose front is exactly its field list (fields(io, m) below).
template <class M>
void encode_fields(M& m) {
  encode_into(m.front(), [&](Encoder& e) {
    FieldWriter w(e);
    fields(w, std::as_const(m));
  });
}
template <class M>
void decode_fields(M& m, std::string_view what) {
  decode_or_throw(m.front(), what, [&](Decoder& d) {
    FieldReader r(d);
    fields(r, m);
  });
}

}  // namespace

// The field lists (wire order; names label decode errors).

template <class Io>
void fields(Io& io, FieldRef<Io, PaxosHeader> p) {
  io.u64(p.version, "paxos version");
  io.s16(p.session_mon, "session_mon");
  io.u64(p.session_mon_tid, "session_mon_tid");
}

template <class Io>
void fields(Io& io, FieldRef<Io, MMonGetVersion> m) {
  io.u64(m.handle, "handle");
  io.string(m.what, "what");
}

template <class Io>
void fields(Io& io, FieldRef<Io, MMonCommand> m) {
  fields(io, m.paxos);
  io.value(m.fsid);
  io.value(m.cmd);
}

template <class Io>
void fields(Io& io, FieldRef<Io, MMonCommandAck> m) {
  fields(io, m.paxos);
  io.s32(m.r, "r");
  io.string(m.rs, "rs");
  io.value(m.cmd);
}

// --- MPing ---------------------------------------------------------------------

void MPing::encode_payload(std::uint64_t) {
  if (json.empty()) {
    front().clear();
    return;
  }
  encode_into(front(), [&](Encoder& e) { e.string(json); });
}

void MPing::decode_payload() {
  json.clear();
  if (front().empty()) return;
  decode_or_throw(front(), "MPing", [&](Decoder& d) { json = d.string("pong json"); });
}

// --- MMonMap -------------------------------------------------------------------

void MMonMap::encode_payload(std::uint64_t) {
  if (monmap_bl.empty()) monmap_bl = proto::encode_to_list(monmap);
  encode_into(front(), [&](Encoder& e) { e.blob(monmap_bl); });
}

void MMonMap::decode_payload() {
  decode_or_throw(front(), "MMonMap", [&](Decoder& d) { monmap_bl = d.blob("monmap"); });
  decode_or_throw(monmap_bl, "MonMap", [&](Decoder& d) { decode(d, monmap); });
}

// --- MMonSubscribe ---------------------------------------------------------------

void MMonSubscribe::encode_payload(std::uint64_t) {
  encode_into(front(), [&](Encoder& e) {
    e.u32(static_cast<std::uint32_t>(what.size()));
    for (const auto& [name, item] : what) {
      e.string(name);
      e.u64(item.start);
      e.u8(item.flags);
    }
    e.string(hostname);
  });
}

void MMonSubscribe::decode_payload() {
  what.clear();
  hostname.clear();
  if (get_version() < 2) throw MonDecodeError("MMonSubscribe: version 1 encoding is not supported");
  decode_or_throw(front(), "MMonSubscribe", [&](Decoder& d) {
    const std::uint32_t n = d.count(4 + 9, "subscription count");
    for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
      std::string name = d.string("subscription name");
      Item item;
      item.start = d.u64("start");
      item.flags = d.u8("flags");
      what.insert_or_assign(std::move(name), item);
    }
    if (get_version() >= 3) hostname = d.string("hostname");
  });
}

// --- MMonGetVersion(Reply) ---------------------------------------------------------

void MMonGetVersion::encode_payload(std::uint64_t) { encode_fields(*this); }
void MMonGetVersion::decode_payload() { decode_fields(*this, "MMonGetVersion"); }

void MMonGetVersionReply::encode_payload(std::uint64_t) {
  encode_into(front(), [&](Encoder& e) {
    e.u64(handle);
    e.u64(version);
    e.u64(oldest_version);
  });
}

void MMonGetVersionReply::decode_payload() {
  decode_or_throw(front(), "MMonGetVersionReply", [&](Decoder& d) {
    handle = d.u64("handle");
    version = d.u64("version");
    oldest_version = get_version() >= 2 ? d.u64("oldest_version") : 0;  // absent in v1
  });
}

// --- MAuth / MAuthReply ---------------------------------------------------------------

void MAuth::encode_payload(std::uint64_t) {
  encode_into(front(), [&](Encoder& e) {
    e.u64(paxos.version);
    e.u16(static_cast<std::uint16_t>(paxos.session_mon));
    e.u64(paxos.session_mon_tid);
    e.u32(protocol);
    e.blob(auth_payload);
    e.u32(monmap_epoch);
  });
}

void MAuth::decode_payload() {
  decode_or_throw(front(), "MAuth", [&](Decoder& d) {
    paxos.version = d.u64("paxos version");
    paxos.session_mon = static_cast<std::int16_t>(d.u16("session_mon"));
    paxos.session_mon_tid = d.u64("session_mon_tid");
    protocol = d.u32("protocol");
    auth_payload = d.blob("auth_payload");
    monmap_epoch = d.u32("monmap_epoch");
  });
}

void MAuthReply::encode_payload(std::uint64_t) {
  encode_into(front(), [&](Encoder& e) {
    e.u32(protocol);
    e.s32(result);
    e.u64(global_id);
    e.blob(result_bl);
    e.string(result_msg);
  });
}

void MAuthReply::decode_payload() {
  decode_or_throw(front(), "MAuthReply", [&](Decoder& d) {
    protocol = d.u32("protocol");
    result = d.s32("result");
    global_id = d.u64("global_id");
    result_bl = d.blob("result_bl");
    result_msg = d.string("result_msg");
  });
}

// --- MMonCommand(Ack) ----------------------------------------------------------------

void MMonCommand::encode_payload(std::uint64_t) { encode_fields(*this); }
void MMonCommand::decode_payload() { decode_fields(*this, "MMonCommand"); }

void MMonCommandAck::encode_payload(std::uint64_t) { encode_fields(*this); }
void MMonCommandAck::decode_payload() { decode_fields(*this, "MMonCommandAck"); }

void register_mon_messages(MessageRegistry& registry) {
  registry.add<MPing>();
  registry.add<MMonGetMap>();
  registry.add<MMonMap>();
  registry.add<MMonSubscribe>();
  registry.add<MMonGetVersion>();
  registry.add<MMonGetVersionReply>();
  registry.add<MMonCommand>();
  registry.add<MMonCommandAck>();
  registry.add<MAuthReply>();
}

}  // namespace siphon::mon

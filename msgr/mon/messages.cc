// Encodings of the mon client messages (layouts in messages.h).
#include "msgr/mon/messages.h"

#include <utility>

namespace siphon::mon {

using proto::Decoder;
using proto::Encoder;

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

void encode_paxos(Encoder& e, const PaxosHeader& p) {
  e.u64(p.version);
  e.u16(static_cast<std::uint16_t>(p.session_mon));
  e.u64(p.session_mon_tid);
}
void decode_paxos(Decoder& d, PaxosHeader& p) {
  p.version = d.u64("paxos version");
  p.session_mon = static_cast<std::int16_t>(d.u16("session_mon"));
  p.session_mon_tid = d.u64("session_mon_tid");
}

}  // namespace

// --- MPing ---------------------------------------------------------------------

void MPing::encode_payload(std::uint64_t) {
  front().clear();
  if (json.empty()) return;
  Encoder e;
  e.string(json);
  e.append_to(front());
}

void MPing::decode_payload() {
  json.clear();
  if (front().empty()) return;
  decode_or_throw(front(), "MPing", [&](Decoder& d) { json = d.string("pong json"); });
}

// --- MMonMap -------------------------------------------------------------------

void MMonMap::encode_payload(std::uint64_t) {
  if (monmap_bl.empty()) monmap_bl = proto::encode_to_list(monmap);
  front().clear();
  Encoder e;
  e.blob(monmap_bl);
  e.append_to(front());
}

void MMonMap::decode_payload() {
  decode_or_throw(front(), "MMonMap", [&](Decoder& d) { monmap_bl = d.blob("monmap"); });
  decode_or_throw(monmap_bl, "MonMap", [&](Decoder& d) { decode(d, monmap); });
}

// --- MMonSubscribe ---------------------------------------------------------------

void MMonSubscribe::encode_payload(std::uint64_t) {
  front().clear();
  Encoder e;
  e.u32(static_cast<std::uint32_t>(what.size()));
  for (const auto& [name, item] : what) {
    e.string(name);
    e.u64(item.start);
    e.u8(item.flags);
  }
  e.string(hostname);
  e.append_to(front());
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

void MMonGetVersion::encode_payload(std::uint64_t) {
  front().clear();
  Encoder e;
  e.u64(handle);
  e.string(what);
  e.append_to(front());
}

void MMonGetVersion::decode_payload() {
  decode_or_throw(front(), "MMonGetVersion", [&](Decoder& d) {
    handle = d.u64("handle");
    what = d.string("what");
  });
}

void MMonGetVersionReply::encode_payload(std::uint64_t) {
  front().clear();
  Encoder e;
  e.u64(handle);
  e.u64(version);
  e.u64(oldest_version);
  e.append_to(front());
}

void MMonGetVersionReply::decode_payload() {
  decode_or_throw(front(), "MMonGetVersionReply", [&](Decoder& d) {
    handle = d.u64("handle");
    version = d.u64("version");
    oldest_version = get_version() >= 2 ? d.u64("oldest_version") : 0;
  });
}

// --- MMonCommand(Ack) ----------------------------------------------------------------

void MMonCommand::encode_payload(std::uint64_t) {
  front().clear();
  Encoder e;
  encode_paxos(e, paxos);
  proto::encode(e, fsid);
  proto::encode(e, cmd);
  e.append_to(front());
}

void MMonCommand::decode_payload() {
  decode_or_throw(front(), "MMonCommand", [&](Decoder& d) {
    decode_paxos(d, paxos);
    proto::decode(d, fsid);
    proto::decode(d, cmd);
  });
}

void MMonCommandAck::encode_payload(std::uint64_t) {
  front().clear();
  Encoder e;
  encode_paxos(e, paxos);
  e.s32(r);
  e.string(rs);
  proto::encode(e, cmd);
  e.append_to(front());
}

void MMonCommandAck::decode_payload() {
  decode_or_throw(front(), "MMonCommandAck", [&](Decoder& d) {
    decode_paxos(d, paxos);
    r = d.s32("r");
    rs = d.string("rs");
    proto::decode(d, cmd);
  });
}

void register_mon_messages(MessageRegistry& registry) {
  registry.add<MPing>();
  registry.add<MMonGetMap>();
  registry.add<MMonMap>();
  registry.add<MMonSubscribe>();
  registry.add<MMonGetVersion>();
  registry.add<MMonGetVersionReply>();
  registry.add<MMonCommand>();
  registry.add<MMonCommandAck>();
}

}  // namespace siphon::mon

// Typed messages a monitor client exchanges with a Ceph monitor (Pacific
// 16.2.x), encoded with msgr/proto's Ceph encodings. Each class declares
// kType and its (version, compat_version) as Ceph sends them, fills front()
// / data() in encode_payload() and parses them back in decode_payload()
// (which throws MonDecodeError on malformed input: the messenger then faults
// that connection, never the process).
//
//   type  class                 v/compat  front
//   2     MPing                 1/1       empty (the mon's reply: string json)
//   4     MMonMap               1/1       blob MonMap (monmap.h)
//   5     MMonGetMap            1/1       empty
//   15    MMonSubscribe         3/1       map<string,{u64 start,u8 flags}>, string hostname
//   19    MMonGetVersion        1/1       u64 handle, string what
//   20    MMonGetVersionReply   2/2       u64 handle, u64 version, u64 oldest (v>=2)
//   50    MMonCommand           1/1       paxos header, uuid fsid, vector<string> cmd; data = input
//   51    MMonCommandAck        1/1       paxos header, s32 r, string rs, vector<string> cmd;
//                                          data = output
//
// The "paxos header" of MMonCommand(Ack) (Ceph's PaxosServiceMessage) is
// u64 version, s16 session_mon (-1), u64 session_mon_tid (0).
// register_mon_messages() adds every class to a MessageRegistry.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "msgr/api/message.h"
#include "msgr/mon/monmap.h"

namespace siphon::mon {

// Message type numbers (Ceph's CEPH_MSG_* / MSG_*).
inline constexpr std::uint16_t kMsgPing = 2;
inline constexpr std::uint16_t kMsgMonMap = 4;
inline constexpr std::uint16_t kMsgMonGetMap = 5;
inline constexpr std::uint16_t kMsgMonSubscribe = 15;
inline constexpr std::uint16_t kMsgMonSubscribeAck = 16;
inline constexpr std::uint16_t kMsgAuth = 17;
inline constexpr std::uint16_t kMsgAuthReply = 18;
inline constexpr std::uint16_t kMsgMonGetVersion = 19;
inline constexpr std::uint16_t kMsgMonGetVersionReply = 20;
inline constexpr std::uint16_t kMsgOsdMap = 41;
inline constexpr std::uint16_t kMsgMonCommand = 50;
inline constexpr std::uint16_t kMsgMonCommandAck = 51;
inline constexpr std::uint16_t kMsgConfig = 62;
inline constexpr std::uint16_t kMsgMgrMap = 0x704;

// A payload that did not decode: what and where (proto::DecodeError text).
class MonDecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Ceph's PaxosServiceMessage fields (front prefix of MMonCommand/Ack).
struct PaxosHeader {
  std::uint64_t version = 0;
  std::int16_t session_mon = -1;
  std::uint64_t session_mon_tid = 0;
  friend bool operator==(const PaxosHeader&, const PaxosHeader&) = default;
};

class MPing final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgPing;
  MPing() : Message(kType, 1, 1) {}
  // The mon's reply carries a JSON document (health + mon_status); a
  // client's ping is empty.
  std::string json;
  void encode_payload(std::uint64_t features) override;
  void decode_payload() override;
  std::string_view type_name() const noexcept override { return "ping"; }
};

class MMonGetMap final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgMonGetMap;
  MMonGetMap() : Message(kType, 1, 1) {}
  void encode_payload(std::uint64_t) override {}
  void decode_payload() override {}
  std::string_view type_name() const noexcept override { return "mon_get_map"; }
};

class MMonMap final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgMonMap;
  MMonMap() : Message(kType, 1, 1) {}
  // The encoded map as received (or to send) and its decoded form.
  BufferList monmap_bl;
  MonMap monmap;
  // Encodes `monmap` (v9) when monmap_bl is empty.
  void encode_payload(std::uint64_t features) override;
  void decode_payload() override;
  std::string_view type_name() const noexcept override { return "mon_map"; }
};

class MMonSubscribe final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgMonSubscribe;
  static constexpr std::uint8_t kOneTime = 1;  // CEPH_SUBSCRIBE_ONETIME
  struct Item {
    std::uint64_t start = 0;  // first epoch wanted (0: the current one)
    std::uint8_t flags = 0;
    friend bool operator==(const Item&, const Item&) = default;
  };
  MMonSubscribe() : Message(kType, 3, 1) {}
  std::map<std::string, Item> what;
  std::string hostname;
  void encode_payload(std::uint64_t features) override;
  void decode_payload() override;
  std::string_view type_name() const noexcept override { return "mon_subscribe"; }
};

// MAuth (cephx.md §3.8): a cephx request inside an established mon session
// (Siphon sends CEPHX_GET_PRINCIPAL_SESSION_KEY to renew service tickets).
class MAuth final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgAuth;
  MAuth() : Message(kType, 1, 1) { set_priority(127); }
  PaxosHeader paxos;
  std::uint32_t protocol = 2;  // cephx
  BufferList auth_payload;
  std::uint32_t monmap_epoch = 0;
  void encode_payload(std::uint64_t features) override;
  void decode_payload() override;
  std::string_view type_name() const noexcept override { return "auth"; }
};

// MAuthReply: the mon's answer; result_bl starts with CephXResponseHeader.
class MAuthReply final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgAuthReply;
  MAuthReply() : Message(kType, 1, 1) {}
  std::uint32_t protocol = 0;
  std::int32_t result = 0;
  std::uint64_t global_id = 0;
  BufferList result_bl;
  std::string result_msg;
  void encode_payload(std::uint64_t features) override;
  void decode_payload() override;
  std::string_view type_name() const noexcept override { return "auth_reply"; }
};

class MMonGetVersion final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgMonGetVersion;
  MMonGetVersion() : Message(kType, 1, 1) {}
  std::uint64_t handle = 0;
  std::string what;  // "osdmap", "monmap", "mdsmap", "fsmap"
  void encode_payload(std::uint64_t features) override;
  void decode_payload() override;
  std::string_view type_name() const noexcept override { return "mon_get_version"; }
};

class MMonGetVersionReply final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgMonGetVersionReply;
  MMonGetVersionReply() : Message(kType, 2, 2) {}
  std::uint64_t handle = 0;
  std::uint64_t version = 0;
  std::uint64_t oldest_version = 0;  // 0 when the sender's version is 1
  void encode_payload(std::uint64_t features) override;
  void decode_payload() override;
  std::string_view type_name() const noexcept override { return "mon_get_version_reply"; }
};

class MMonCommand final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgMonCommand;
  MMonCommand() : Message(kType, 1, 1) {}
  PaxosHeader paxos;
  proto::Uuid fsid;
  std::vector<std::string> cmd;  // JSON documents, usually one: {"prefix": ..., ...}
  // The input (Ceph's inbl) travels in data().
  void encode_payload(std::uint64_t features) override;
  void decode_payload() override;
  std::string_view type_name() const noexcept override { return "mon_command"; }
};

class MMonCommandAck final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgMonCommandAck;
  MMonCommandAck() : Message(kType, 1, 1) {}
  PaxosHeader paxos;
  std::int32_t r = 0;             // 0 or a negative errno
  std::string rs;                 // status string (the CLI prints it on stderr)
  std::vector<std::string> cmd;   // the command, echoed
  // The output (Ceph's outbl) travels in data().
  void encode_payload(std::uint64_t features) override;
  void decode_payload() override;
  std::string_view type_name() const noexcept override { return "mon_command_ack"; }
};

// Adds every message above to `registry`.
void register_mon_messages(MessageRegistry& registry);

}  // namespace siphon::mon

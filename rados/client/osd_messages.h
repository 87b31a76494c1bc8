// The OSD client messages as Pacific clients send and receive them
// (rados-client.md §3, §4.2), as plain encoders and decoders over the codec:
//
//   type  message        v/compat  front (data segment)
//   42    MOSDOp         8/3       spg, hash, epoch, flags, reqid, trace, client_inc,
//                                  mtime, oloc, oid, u16 ops, snapid, snap_seq, snaps,
//                                  retry, features  (op inputs, in op order)
//   43    MOSDOpReply    8/2       oid, pg, s64 flags, result, bad_replay_version, epoch,
//                                  u32 ops, retry, rvals, replay_version, user_version,
//                                  do_redirect, trace  (op outputs, in op order)
//   61    MOSDBackoff    1/1       spg, epoch, op, id, begin, end (hobject_t)
//
// Decoders never throw: a malformed reply is an error value naming the field,
// and the caller closes that one connection with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "msgr/base/buffer.h"
#include "msgr/proto/encoding.h"
#include "rados/osdmap/osdmap.h"

namespace siphon::rados {

inline constexpr std::uint16_t kMsgOsdOp = 42;
inline constexpr std::uint16_t kMsgOsdOpReply = 43;
inline constexpr std::uint16_t kMsgOsdBackoff = 61;
inline constexpr std::uint16_t kOsdOpVersion = 8, kOsdOpCompat = 3;
inline constexpr std::uint16_t kOsdOpPriority = 63;  // osd_client_op_priority
inline constexpr std::uint16_t kOsdOpReplyVersion = 8;
inline constexpr std::uint16_t kOsdBackoffVersion = 1;

// CEPH_OSD_OP_* (§3.4).
namespace op {
inline constexpr std::uint16_t read = 0x1201;
inline constexpr std::uint16_t stat = 0x1202;
inline constexpr std::uint16_t write = 0x2201;
inline constexpr std::uint16_t writefull = 0x2202;
inline constexpr std::uint16_t remove = 0x2205;  // CEPH_OSD_OP_DELETE
inline constexpr std::uint16_t create = 0x220d;
inline constexpr std::uint16_t setallochint = 0x2223;
inline constexpr std::uint16_t kModeWrite = 0x2000;  // the mode bit of a write op
}  // namespace op

inline constexpr std::uint32_t kOpFlagExcl = 0x1;  // CEPH_OSD_OP_FLAG_EXCL
inline constexpr std::uint32_t kOpFlagFailOk = 0x2;

// CEPH_OSD_FLAG_*.
namespace flag {
inline constexpr std::uint32_t ack = 0x1;
inline constexpr std::uint32_t ondisk = 0x4;
inline constexpr std::uint32_t retry = 0x8;
inline constexpr std::uint32_t read = 0x10;
inline constexpr std::uint32_t write = 0x20;
inline constexpr std::uint32_t known_redir = 0x400000;
}  // namespace flag

inline constexpr std::uint64_t kNoSnap = 0xfffffffffffffffeull;  // CEPH_NOSNAP (head)

// One ceph_osd_op (38 bytes on the wire) with its input or output payload.
struct OsdOp {
  std::uint16_t op = 0;
  std::uint32_t flags = 0;
  // The union's extent view (READ/WRITE/WRITEFULL/...); other views are
  // carried raw, so an echo round-trips byte for byte.
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t truncate_size = 0;
  std::uint32_t truncate_seq = 0;
  BufferList indata;   // request: appended to the data segment
  BufferList outdata;  // reply: this op's share of the data segment
  std::int32_t rval = 0;

  static OsdOp read(std::uint64_t off, std::uint64_t len);
  static OsdOp write(std::uint64_t off, BufferList data);
  static OsdOp writefull(BufferList data);
  static OsdOp stat();
  static OsdOp remove();
  static OsdOp create(bool exclusive);
  // SETALLOCHINT's union view (u64 expected_object_size, u64
  // expected_write_size, u32 flags) in the extent fields, FAILOK as rados
  // bench sends it: a store that cannot take hints does not fail the write.
  static OsdOp setallochint(std::uint64_t expected_object_size, std::uint64_t expected_write_size,
                            std::uint32_t alloc_hint_flags);
};

// CEPH_OSD_ALLOC_HINT_FLAG_*: rados bench's set (0x35).
inline constexpr std::uint32_t kAllocHintBench = 0x1 | 0x4 | 0x10 | 0x20;  // SEQUENTIAL_WRITE|SEQUENTIAL_READ|APPEND_ONLY|IMMUTABLE

// MOSDOp v8's fields. reqid, trace and client_inc are zero as librados
// sends them: the OSD names the request (client.<gid>, 0, tid).
struct OsdOpRequest {
  osdmap::PgId pgid;             // the actual PG (seed < pg_num)
  std::int8_t shard = -1;        // NO_SHARD (replicated); the primary's position (EC)
  std::uint32_t hash = 0;        // the object's raw hash
  std::uint32_t epoch = 0;       // the map the target was computed from
  std::uint32_t flags = 0;
  proto::UTime mtime;            // wall clock for writes, 0 for reads
  std::int64_t pool = -1;
  std::string key, nspace;       // object_locator_t
  std::string oid;
  std::vector<OsdOp> ops;
  std::uint64_t snapid = kNoSnap;
  std::uint64_t snap_seq = 0;
  std::int32_t retry_attempt = 0;
  std::uint64_t features = 0;
};

/// The front; the ops' input payloads go to `data` in op order.
BufferList encode_osd_op(const OsdOpRequest& r, BufferList& data);
/// The inverse (tests; a fake OSD). Splits `data` by each op's payload_len.
proto::Result<OsdOpRequest> decode_osd_op(const BufferList& front, const BufferList& data);

struct OsdOpReply {
  std::string oid;
  osdmap::PgId pgid;
  std::uint64_t flags = 0;
  std::int32_t result = 0;
  std::uint64_t bad_replay_version = 0;  // legacy; not always replay_version
  std::uint32_t bad_replay_epoch = 0;
  std::uint32_t epoch = 0;
  std::vector<OsdOp> ops;  // echoes, with rval and outdata
  std::int32_t retry_attempt = 0;
  std::uint64_t replay_version = 0;
  std::uint32_t replay_epoch = 0;
  std::uint64_t user_version = 0;
  bool redirect = false;
};

/// Decodes an MOSDOpReply v8 (compat <= 8). A redirect (cache tiering) is
/// refused: Siphon does not follow redirects. The data segment must hold
/// exactly the ops' payload_len bytes.
proto::Result<OsdOpReply> decode_osd_op_reply(const BufferList& front, const BufferList& data,
                                              std::uint16_t compat_version);
/// The inverse (tests; a fake OSD).
BufferList encode_osd_op_reply(const OsdOpReply& r, BufferList& data);

// hobject_t, the fields a backoff range needs (§4.2).
struct HObject {
  std::string key, oid, nspace;
  std::uint64_t snap = 0;
  std::uint32_t hash = 0;
  bool max = false;
  std::int64_t pool = -1;
};
/// Ceph's bitwise hobject order (cmp_bitwise): max, pool, bit-reversed
/// hash, nspace, effective key, oid, snap.
int compare_bitwise(const HObject& a, const HObject& b);

struct OsdBackoff {
  osdmap::PgId pgid;
  std::int8_t shard = -1;
  std::uint32_t epoch = 0;
  std::uint8_t op = 0;  // 1 BLOCK, 2 ACK_BLOCK, 3 UNBLOCK
  std::uint64_t id = 0;
  HObject begin, end;
};
inline constexpr std::uint8_t kBackoffBlock = 1, kBackoffAckBlock = 2, kBackoffUnblock = 3;

proto::Result<OsdBackoff> decode_osd_backoff(const BufferList& front);
BufferList encode_osd_backoff(const OsdBackoff& b);

}  // namespace siphon::rados

#include "osd_messages.h"

namespace siphon::rados {

using proto::Decoder;
using proto::Encoder;

namespace {

constexpr std::size_t kOsdOpSize = 38;  // sizeof(ceph_osd_op), packed

void encode_spg(Encoder& e, const osdmap::PgId& pg, std::int8_t shard) {
  e.versioned(1, 1, [&](Encoder& b) {
    osdmap::encode(b, pg);
    b.u8(static_cast<std::uint8_t>(shard));
  });
}

void decode_spg(Decoder& d, osdmap::PgId& pg, std::int8_t& shard) {
  d.versioned(1, "spg_t", [&](const Decoder::StructHeader&) {
    osdmap::decode(d, pg);
    shard = static_cast<std::int8_t>(d.u8("spg_t shard"));
  });
}

// ceph_osd_op: u16 op, u32 flags, the 28-byte union (extent view), u32 payload_len.
void encode_op(Encoder& e, const OsdOp& o, std::uint32_t payload_len) {
  e.u16(o.op);
  e.u32(o.flags);
  e.u64(o.offset);
  e.u64(o.length);
  e.u64(o.truncate_size);
  e.u32(o.truncate_seq);
  e.u32(payload_len);
}

std::uint32_t decode_op(Decoder& d, OsdOp& o) {
  o.op = d.u16("ceph_osd_op op");
  o.flags = d.u32("ceph_osd_op flags");
  o.offset = d.u64("ceph_osd_op extent.offset");
  o.length = d.u64("ceph_osd_op extent.length");
  o.truncate_size = d.u64("ceph_osd_op extent.truncate_size");
  o.truncate_seq = d.u32("ceph_osd_op extent.truncate_seq");
  return d.u32("ceph_osd_op payload_len");
}

// Hands each op its share of the data segment, by payload_len, in op order.
bool split_data(Decoder& d, std::vector<OsdOp>& ops, const std::vector<std::uint32_t>& lens,
                const BufferList& data, bool out) {
  std::uint64_t total = 0;
  for (const std::uint32_t l : lens) total += l;
  if (total != data.length()) {
    d.fail("the ops' payload_len do not add up to the data segment", "payload_len", total, data.length());
    return false;
  }
  std::size_t off = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    (out ? ops[i].outdata : ops[i].indata) = data.slice(off, lens[i]);
    off += lens[i];
  }
  return true;
}

void encode_hobject(Encoder& e, const HObject& h) {
  e.versioned(4, 3, [&](Encoder& b) {
    b.string(h.key);
    b.string(h.oid);
    b.u64(h.snap);
    b.u32(h.hash);
    b.boolean(h.max);
    b.string(h.nspace);
    b.s64(h.pool);
  });
}

void decode_hobject(Decoder& d, HObject& h) {
  d.versioned(4, "hobject_t", [&](const Decoder::StructHeader& sh) {
    if (sh.struct_v < 4) {
      d.fail("hobject_t before version 4 is not sent by Pacific", "hobject_t version");
      return;
    }
    h.key = d.string("hobject_t key");
    h.oid = d.string("hobject_t oid");
    h.snap = d.u64("hobject_t snap");
    h.hash = d.u32("hobject_t hash");
    h.max = d.boolean("hobject_t max");
    h.nspace = d.string("hobject_t nspace");
    h.pool = d.s64("hobject_t pool");
  });
}

}  // namespace

OsdOp OsdOp::read(std::uint64_t off, std::uint64_t len) {
  OsdOp o;
  o.op = op::read;
  o.offset = off;
  o.length = len;
  return o;
}

OsdOp OsdOp::write(std::uint64_t off, BufferList data) {
  OsdOp o;
  o.op = op::write;
  o.offset = off;
  o.length = data.length();
  o.indata = std::move(data);
  return o;
}

OsdOp OsdOp::writefull(BufferList data) {
  OsdOp o = write(0, std::move(data));
  o.op = op::writefull;
  return o;
}

OsdOp OsdOp::stat() {
  OsdOp o;
  o.op = op::stat;
  return o;
}

OsdOp OsdOp::remove() {
  OsdOp o;
  o.op = op::remove;
  return o;
}

OsdOp OsdOp::create(bool exclusive) {
  OsdOp o;
  o.op = op::create;
  o.flags = exclusive ? kOpFlagExcl : 0;
  return o;
}

OsdOp OsdOp::setallochint(std::uint64_t expected_object_size, std::uint64_t expected_write_size,
                          std::uint32_t alloc_hint_flags) {
  OsdOp o;
  o.op = op::setallochint;
  o.flags = kOpFlagFailOk;
  o.offset = expected_object_size;   // alloc_hint.expected_object_size
  o.length = expected_write_size;    // alloc_hint.expected_write_size
  o.truncate_size = alloc_hint_flags;  // alloc_hint.flags: the low 4 bytes; the rest of the union is 0
  return o;
}

BufferList encode_osd_op(const OsdOpRequest& r, BufferList& data) {
  Encoder e;
  encode_spg(e, r.pgid, r.shard);
  e.u32(r.hash);
  e.u32(r.epoch);
  e.u32(r.flags);
  e.versioned(2, 2, [](Encoder& b) {  // osd_reqid_t: empty, the OSD fills it in
    b.u8(0);
    b.s64(0);
    b.u64(0);
    b.s32(0);
  });
  e.zeros(24);  // blkin trace
  e.u32(0);     // client_inc
  e.u32(r.mtime.sec);
  e.u32(r.mtime.nsec);
  e.versioned(6, 3, [&](Encoder& b) {
    b.s64(r.pool);
    b.s32(-1);  // preferred
    b.string(r.key);
    b.string(r.nspace);
    b.s64(-1);  // hash: none (placement by name)
  });
  e.string(r.oid);
  e.u16(static_cast<std::uint16_t>(r.ops.size()));
  for (const OsdOp& o : r.ops) {
    encode_op(e, o, static_cast<std::uint32_t>(o.indata.length()));
    data.append(o.indata);
  }
  e.u64(r.snapid);
  e.u64(r.snap_seq);
  e.u32(0);  // snaps
  e.s32(r.retry_attempt);
  e.u64(r.features);
  return e.take();
}

proto::Result<OsdOpRequest> decode_osd_op(const BufferList& front, const BufferList& data) {
  Decoder d(front);
  Decoder::Scope scope(d, "MOSDOp");
  OsdOpRequest r;
  decode_spg(d, r.pgid, r.shard);
  r.hash = d.u32("hash");
  r.epoch = d.u32("osdmap_epoch");
  r.flags = d.u32("flags");
  d.versioned(2, "osd_reqid_t", [&](const Decoder::StructHeader&) { d.skip(21, "osd_reqid_t"); });
  d.skip(24 + 4, "trace, client_inc");
  r.mtime.sec = d.u32("mtime sec");
  r.mtime.nsec = d.u32("mtime nsec");
  d.versioned(6, "object_locator_t", [&](const Decoder::StructHeader&) {
    r.pool = d.s64("oloc pool");
    d.skip(4, "oloc preferred");
    r.key = d.string("oloc key");
    r.nspace = d.string("oloc nspace");
    d.skip(8, "oloc hash");
  });
  r.oid = d.string("oid");
  const std::uint16_t n = d.u16("num_ops");
  if (d.ok() && n * kOsdOpSize > d.remaining()) d.fail("more ops than bytes", "num_ops", n, d.remaining());
  std::vector<std::uint32_t> lens;
  for (std::uint16_t i = 0; d.ok() && i < n; ++i) lens.push_back(decode_op(d, r.ops.emplace_back()));
  r.snapid = d.u64("snapid");
  r.snap_seq = d.u64("snap_seq");
  const std::uint32_t snaps = d.count(8, "snaps");
  d.skip(std::size_t{snaps} * 8, "snaps");
  r.retry_attempt = d.s32("retry_attempt");
  r.features = d.u64("features");
  if (d.ok()) split_data(d, r.ops, lens, data, false);
  if (!d.ok()) return d.error();
  return r;
}

proto::Result<OsdOpReply> decode_osd_op_reply(const BufferList& front, const BufferList& data,
                                              std::uint16_t compat_version) {
  Decoder d(front);
  Decoder::Scope scope(d, "MOSDOpReply");
  OsdOpReply r;
  if (compat_version > kOsdOpReplyVersion) {
    d.fail("compat_version newer than the v8 this client reads", "compat_version", compat_version,
           kOsdOpReplyVersion);
    return d.error();
  }
  r.oid = d.string("oid");
  osdmap::decode(d, r.pgid);
  r.flags = d.u64("flags");
  r.result = d.s32("result");
  r.bad_replay_version = d.u64("bad_replay_version");
  r.bad_replay_epoch = d.u32("bad_replay_epoch");
  r.epoch = d.u32("osdmap_epoch");
  const std::uint32_t n = d.count(kOsdOpSize + 4, "num_ops");  // each op also has an rval
  std::vector<std::uint32_t> lens;
  for (std::uint32_t i = 0; d.ok() && i < n; ++i) lens.push_back(decode_op(d, r.ops.emplace_back()));
  r.retry_attempt = d.s32("retry_attempt");
  for (std::uint32_t i = 0; d.ok() && i < n; ++i) r.ops[i].rval = d.s32("rval");
  r.replay_version = d.u64("replay_version");
  r.replay_epoch = d.u32("replay_epoch");
  r.user_version = d.u64("user_version");
  r.redirect = d.boolean("do_redirect");
  if (d.ok() && r.redirect)
    d.fail("the OSD redirected the op (cache tiering); Siphon does not follow redirects", "do_redirect");
  if (d.ok() && d.remaining() >= 24) d.skip(24, "trace");
  if (d.ok()) split_data(d, r.ops, lens, data, true);
  if (!d.ok()) return d.error();
  return r;
}

BufferList encode_osd_op_reply(const OsdOpReply& r, BufferList& data) {
  Encoder e;
  e.string(r.oid);
  osdmap::encode(e, r.pgid);
  e.u64(r.flags);
  e.s32(r.result);
  e.u64(r.bad_replay_version);
  e.u32(r.bad_replay_epoch);
  e.u32(r.epoch);
  e.u32(static_cast<std::uint32_t>(r.ops.size()));
  for (const OsdOp& o : r.ops) {
    encode_op(e, o, static_cast<std::uint32_t>(o.outdata.length()));
    data.append(o.outdata);
  }
  e.s32(r.retry_attempt);
  for (const OsdOp& o : r.ops) e.s32(o.rval);
  e.u64(r.replay_version);
  e.u32(r.replay_epoch);
  e.u64(r.user_version);
  e.boolean(false);
  e.zeros(24);
  return e.take();
}

int compare_bitwise(const HObject& a, const HObject& b) {
  auto cmp = [](const auto& x, const auto& y) { return x < y ? -1 : (y < x ? 1 : 0); };
  auto reversed = [](std::uint32_t v) {
    std::uint32_t r = 0;
    for (int i = 0; i < 32; ++i, v >>= 1) r = (r << 1) | (v & 1);
    return r;
  };
  if (a.max != b.max) return a.max ? 1 : -1;
  if (int c = cmp(a.pool, b.pool)) return c;
  if (int c = cmp(reversed(a.hash), reversed(b.hash))) return c;
  if (int c = cmp(a.nspace, b.nspace)) return c;
  if (!(a.key.empty() && b.key.empty())) {
    const std::string& ka = a.key.empty() ? a.oid : a.key;
    const std::string& kb = b.key.empty() ? b.oid : b.key;
    if (int c = cmp(ka, kb)) return c;
  }
  if (int c = cmp(a.oid, b.oid)) return c;
  return cmp(a.snap, b.snap);
}

proto::Result<OsdBackoff> decode_osd_backoff(const BufferList& front) {
  Decoder d(front);
  Decoder::Scope scope(d, "MOSDBackoff");
  OsdBackoff b;
  decode_spg(d, b.pgid, b.shard);
  b.epoch = d.u32("map_epoch");
  b.op = d.u8("op");
  b.id = d.u64("id");
  decode_hobject(d, b.begin);
  decode_hobject(d, b.end);
  if (d.ok() && (b.op < kBackoffBlock || b.op > kBackoffUnblock))
    d.fail("unknown backoff op", "op", b.op, kBackoffUnblock);
  if (!d.ok()) return d.error();
  return b;
}

BufferList encode_osd_backoff(const OsdBackoff& b) {
  Encoder e;
  encode_spg(e, b.pgid, b.shard);
  e.u32(b.epoch);
  e.u8(b.op);
  e.u64(b.id);
  encode_hobject(e, b.begin);
  encode_hobject(e, b.end);
  return e.take();
}

}  // namespace siphon::rados

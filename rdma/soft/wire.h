// The soft fabric's wire format: what crosses the TCP connections between
// two soft adapters (docs/rdma-provider.md, "Wire").
//
// Every message is a 32-byte header followed by `len` payload bytes. All
// fields are little-endian (boost::endian buffers, so the structs have
// alignment 1 and no padding). One TCP connection carries the requests of one
// requester QP to one responder QP and the responses back ("data link"), or
// the CM exchange of one connection ("CM link").
#pragma once

#include <boost/endian/buffers.hpp>

#include <cstdint>
#include <type_traits>

namespace siphon::rdma::soft::wire {

using u8 = std::uint8_t;
using le16 = boost::endian::little_uint16_buf_t;
using le32 = boost::endian::little_uint32_buf_t;
using le64 = boost::endian::little_uint64_buf_t;

inline constexpr std::uint32_t kMagic = 0x53504846;  // "FHPS" on the wire: Siphon fabric
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::uint32_t kPsnMask = 0xFFFFFF;

enum class Type : u8 {
  // requester -> responder
  send = 1,          // payload: message bytes
  write = 2,         // payload: bytes for [raddr, raddr+len) under rkey
  read = 3,          // no payload; len = bytes requested
  // responder -> requester
  ack = 10,          // cumulative: every request up to psn is done
  nak = 11,          // code = NakCode; rnr_timer valid for rnr
  read_resp = 12,    // payload: the bytes read for the READ at psn
  // link control
  hello = 20,        // payload: Hello
  hello_ack = 21,    // code = kHelloSameHost: imm = pid, raddr = probe address,
                     // rkey | reserved << 32 = the probe's value
  hello_nak = 22,    // code = HelloNak
  shm_on = 23,       // requester, after a HELLO_ACK with kShmOffer: code 1 = the
                     // link's bytes move to the offered rings from the next
                     // one on, 0 = declined (the responder frees them)
  // connection manager
  cm_req = 30,       // payload: CmConnect + private data
  cm_rep = 31,       // payload: CmConnect + private data
  cm_rej = 32,       // payload: private data
  cm_rtu = 33,
  cm_dreq = 34,
  cm_drep = 35,
};

// kSameHost: on a READ, the requester can copy the response out of the
// responder's memory itself (the link's HELLO_ACK offered it and the probe
// succeeded); on a READ_RESP, the responder checked the access and the
// response carries no payload: the requester copies the `len` bytes at the
// READ's remote address with process_vm_readv (docs/rdma-provider.md,
// "Same-host copy").
// kShmOffer: on a HELLO_ACK, the responder offers same-host rings: `len` is
// the number of the memfd that holds them in its process (docs/rdma-provider.md,
// "Same-host rings").
enum Flags : u8 { kHasImm = 1u << 0, kSolicited = 1u << 1, kSameHost = 1u << 2, kShmOffer = 1u << 3 };

enum class NakCode : u8 {
  rnr = 1,             // no receive posted; retry after rnr_timer
  not_ready = 2,       // responder QP not in RTR/RTS (a dropped packet)
  remote_access = 3,   // rkey, bounds or access rights
  invalid_request = 4, // too long for the receive buffer, too many reads, ...
  remote_op = 5,       // responder-side local error (bad receive SGE)
};

enum class HelloNak : u8 { no_such_qp = 1, bad_version = 2 };
// HELLO_ACK code: the responder serves READs as same-host copies.
inline constexpr u8 kHelloSameHost = 1;

struct Header {
  u8 type;
  u8 flags;
  u8 code;
  u8 rnr_timer;
  le32 psn;
  le32 len;
  le32 imm;
  le64 raddr;
  le32 rkey;
  le32 reserved;
};
static_assert(sizeof(Header) == 32 && std::is_standard_layout_v<Header> && alignof(Header) == 1);

struct Hello {
  le32 magic;
  u8 version;
  u8 pad[3];
  le32 src_qpn;
  le32 dst_qpn;
  le64 src_guid;
};
static_assert(sizeof(Hello) == 24 && std::is_standard_layout_v<Hello>);

struct CmConnect {
  le32 magic;
  u8 version;
  u8 responder_resources;
  u8 initiator_depth;
  u8 retry_count;
  u8 rnr_retry_count;
  u8 pad[3];
  le32 qpn;
  le32 start_psn;
  u8 gid[16];
};
static_assert(sizeof(CmConnect) == 36 && std::is_standard_layout_v<CmConnect>);

// Private data sizes of the IB CM messages rdma-cm maps onto (RoCE): what a
// user may send, and what the receiver sees (zero-padded), as on hardware.
inline constexpr std::size_t kReqPrivateData = 56;   // 92 minus rdma-cm's 36-byte header
inline constexpr std::size_t kRepPrivateData = 196;
inline constexpr std::size_t kRejPrivateData = 148;

}  // namespace siphon::rdma::soft::wire

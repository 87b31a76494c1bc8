// Typed options of the transport stacks, built once by compat/ from ceph.conf
// (docs/architecture.md §8); nothing below compat/ reads configuration.
// Each field names the Ceph option it mirrors and Ceph's default. Fields
// marked "Siphon extension" have no Ceph counterpart.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "msgr/proto/frame.h"

namespace siphon::transport {

// Fault injection, Ceph's ms_inject_* debug options (all off by default).
struct InjectOptions {
  // ms_inject_socket_failures (Ceph, uint, default 0 = off): one in N socket
  // operations (each read and each write batch) fails at random; the
  // connection faults with errc::injected_fault, "injected socket failure".
  std::uint32_t socket_failures = 0;
  // ms_inject_delay_type (Ceph, str, default ""): in Ceph, the entity types
  // whose incoming messages are delayed (e.g. "osd mon"). The transport does
  // not know entity types: a non-empty value enables delays of incoming
  // MESSAGE frames on every connection of the stack (compat/ warns so).
  std::string delay_type;
  // ms_inject_delay_max (Ceph, float seconds, default 1).
  double delay_max = 1.0;
  // ms_inject_delay_probability (Ceph, float 0..1, default 0): chance that a
  // MESSAGE frame is held back for a uniform random time in [0, delay_max].
  double delay_probability = 0.0;
  // ms_inject_corruption_probability (Siphon extension, float 0..1, default
  // 0): chance, per completed socket read of msgr2 frames, that one random
  // bit of the bytes just read is flipped before the frame decoder sees them
  // (corruption below the messenger; the frame CRCs must catch it).
  double corruption_probability = 0.0;
  // ms_inject_seed (Siphon extension, default 0 = a random seed per stack):
  // the same seed gives every connection the same sequence of decisions
  // (connection k of the stack uses a stream derived from seed and k).
  std::uint64_t seed = 0;
};

// Options every stack (TCP, RDMA) understands.
struct TransportOptions {
  // ms_async_op_threads (Ceph, default 3): workers, each one thread running
  // one io_context.
  std::size_t async_op_threads = 3;
  // Decoder bounds (Siphon extensions ms_max_control_payload,
  // ms_max_segment_size, ms_max_frame_size; defaults in proto::FrameLimits).
  proto::FrameLimits frame_limits{};
  // Send-queue water marks (Siphon extensions ms_send_queue_high_water,
  // default 4 MiB, and ms_send_queue_low_water, default 1 MiB): when
  // queued_bytes() exceeds the high mark after a send(), on_writable() is
  // called once it falls to the low mark again.
  std::size_t send_queue_high_water = 4u << 20;
  std::size_t send_queue_low_water = 1u << 20;
  InjectOptions inject{};
};

// Options of the TCP stack (ms_type async+posix).
struct TcpOptions {
  TransportOptions common{};
  // ms_tcp_nodelay (Ceph, default true): TCP_NODELAY on every socket.
  bool tcp_nodelay = true;
  // ms_tcp_rcvbuf (Ceph, size, default 0 = the kernel's default): SO_RCVBUF.
  std::size_t tcp_rcvbuf = 0;
  // ms_tcp_listen_backlog (Ceph, default 512).
  int tcp_listen_backlog = 512;
  // ms_tcp_keepalive (Siphon extension, default true): SO_KEEPALIVE. Ceph's
  // posix stack does not set it.
  bool tcp_keepalive = true;
  // ms_tcp_read_chunk (Siphon extension, default 64 KiB): size of the receive
  // buffers reads go into when no larger frame is pending (Ceph's nearest is
  // ms_tcp_prefetch_max_size, default 4 KiB).
  std::size_t tcp_read_chunk = 64u << 10;
  // ms_tcp_busy_poll_us (Siphon extension, default 0 = off): after a worker
  // ran a handler it keeps polling its event loop (epoll_wait with timeout 0)
  // for this long before it sleeps, so a message arriving meanwhile costs no
  // wake-up. Spends up to one CPU per worker while traffic flows.
  std::chrono::microseconds busy_poll{0};
  // siphon_ms_tcp_zerocopy_threshold (Siphon extension, default 64 KiB, 0 =
  // off): a write batch that carries a frame with a segment of at least this
  // many bytes is sent with MSG_ZEROCOPY (SO_ZEROCOPY is set on every socket
  // while this is non-zero). The batch's buffers are held until the kernel's
  // completion notification covers every sendmsg() of the batch. A
  // connection stops using it once the kernel reports that it copied anyway
  // (loopback, devices without scatter-gather): docs/transport.md §3,
  // "Zero-copy sends". Default 64 KiB: the kernel document puts the break-even
  // around 10 KB; at 64 KiB a send pins 16+ pages per notification, and the
  // 4 KiB-message workloads never qualify.
  std::size_t zerocopy_threshold = 64u << 10;
  // siphon_ms_tcp_zerocopy_check_copies (Siphon extension, dev, default
  // true): false keeps zero-copy on even when the kernel reports copies (to
  // measure what it costs on loopback).
  bool zerocopy_check_copies = true;
  // siphon_ms_tcp_rcvlowat (Siphon extension, default 64 KiB, 0 = off): while
  // a frame with more than this many bytes still to arrive is pending, the
  // socket's SO_RCVLOWAT is raised to what the frame still needs, so the
  // worker is woken once when (nearly) all of it is queued instead of once per
  // few dozen KiB the kernel moves. Never above the bytes the pending frame
  // still needs (so nothing waits for bytes the peer has no reason to send),
  // set back to 1 for smaller frames; the kernel caps it at half of
  // tcp_rmem's maximum and wakes the reader early under memory pressure.
  std::size_t rcvlowat = 64u << 10;
  // ms_bind_port_min / ms_bind_port_max (Ceph, default 6800 / 7568; Pacific
  // used 7300 as the maximum): listen() on port 0 takes the first free port
  // of this range.
  std::uint16_t bind_port_min = 6800;
  std::uint16_t bind_port_max = 7568;
  // ms_bind_retry_count (Ceph, default 3 on Linux) and ms_bind_retry_delay
  // (Ceph, default 5 s): when no port could be bound, listen() waits and
  // tries again this many times.
  int bind_retry_count = 3;
  std::chrono::milliseconds bind_retry_delay{5000};
  // ms_bind_ipv4 / ms_bind_ipv6 (Ceph, default true / false): the family
  // listen() uses for an unspecified address (IPv6 when ms_bind_ipv6 is set
  // and ms_bind_ipv4 is not, or both are and bind_prefer_ipv4 is not).
  // Explicit addresses are bound as given.
  bool bind_ipv4 = true;
  bool bind_ipv6 = false;
  // ms_bind_prefer_ipv4 (Ceph, default false): with bind_ipv4 and bind_ipv6
  // both set, the family an unspecified address binds (IPv6 unless this is
  // set). Ceph binds both and lists the preferred one first.
  bool bind_prefer_ipv4 = false;
  // ms_bind_before_connect (Ceph, default false): bind each outgoing socket
  // to the IP (port 0) of the stack's first listener of the peer's family
  // that is not a wildcard; not bound when there is none (Ceph: when the
  // messenger's address is blank).
  bool bind_before_connect = false;
  // ms_max_accept_failures (Ceph, default 4): consecutive accept() failures a
  // listener tolerates (an aborted connection is not one). One more closes
  // that listener with an error naming the cause; connections already
  // accepted go on. Ceph aborts the daemon instead. Failures are retried
  // after 100 ms.
  int max_accept_failures = 4;
};

}  // namespace siphon::transport

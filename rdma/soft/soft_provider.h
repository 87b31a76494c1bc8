// The software RC fabric: a user-space RC HCA behind rdma/provider.h
// (docs/rdma-provider.md, docs/architecture.md §4).
//
// Each provider instance is one "host adapter": devices soft0..N-1, one
// engine thread (epoll) that plays the HCA, and a wire made of ordinary TCP
// connections, so two providers -- in one process, two processes or two
// network namespaces -- talk RC to each other over the same code path.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "rdma/provider.h"

namespace siphon::rdma::soft {

// A fault fires with `probability` (0..1) or once in `one_in` draws (0 = off;
// both may be set, either fires). Draws come from a PRNG seeded by
// FaultPlan::seed and the QP's creation order, so a run is repeatable as far
// as thread interleavings allow.
struct FaultRate {
  double probability = 0.0;
  std::uint32_t one_in = 0;
  bool enabled() const noexcept { return probability > 0.0 || one_in != 0; }
};

struct FaultPlan {
  std::uint64_t seed = 1;
  FaultRate fail_post;         // post_send/post_recv fails with errc::injected_fault
  FaultRate error_completion;  // a send WR completes with `completion_error`; QP -> ERR
  WcStatus completion_error = WcStatus::general_error;
  FaultRate qp_to_err;         // the QP moves to ERR when it transmits a WR
  FaultRate link_drop;         // the data link is closed before a WR (RC retry recovers)
  FaultRate delay;             // transmission pauses for delay_us before a WR
  std::uint32_t delay_us = 1000;
  // One random bit flipped in a chunk of payload just placed in the
  // receiver's registered memory (SEND into a receive buffer, RDMA READ
  // response into the requester's buffer, RDMA WRITE into the target MR):
  // memory or DMA corruption that the link's own checks cannot see. Drawn
  // per chunk the fabric copies (a message arrives in one or more chunks).
  FaultRate corrupt_data;
  // An armed CQ's notification is lost: the CQ disarms for a completion
  // but no event reaches its channel, as when a device or driver drops a
  // completion event. Drawn per notification due.
  FaultRate lost_cq_event;
  // Every notification of an armed CQ is written this long after its
  // completion became visible (0: at once), as a device whose event trails
  // its completion; the fabric's engine waits meanwhile. Not lost: late.
  std::chrono::milliseconds late_cq_event{0};
};

struct SoftOptions {
  unsigned device_count = 1;
  // Device attributes (what query returns and what is enforced).
  std::uint32_t max_qp = 16384;
  std::uint32_t max_qp_wr = 16384;
  std::uint32_t max_sge = 32;
  std::uint32_t max_inline_data = 512;
  std::uint32_t max_cq = 16384;
  std::uint32_t max_cqe = 1u << 20;
  std::uint32_t max_mr = 1u << 20;
  std::uint32_t max_pd = 1u << 16;
  // Type-2 memory windows (DeviceAttr::mw_type2). False models a device
  // without them: alloc_mw fails with not_supported. Windows and MRs share
  // the max_mr key table.
  bool memory_windows = true;
  std::uint32_t max_srq = 4096;
  std::uint32_t max_srq_wr = 16384;
  std::uint32_t max_qp_rd_atom = 16;
  std::uint64_t max_msg_size = 1ull << 30;
  Mtu max_mtu = Mtu::mtu4096;
  Mtu active_mtu = Mtu::mtu4096;
  // Engine.
  std::uint32_t link_buffer_bytes = 64 * 1024;  // per direction per link
  std::uint32_t engine_spin_us = 0;  // busy-poll this long before sleeping in epoll
  // Driven engine: the threads that poll a CQ and attached themselves
  // (CompletionQueue::attach_progress: the RDMA workers) run the engine's
  // work on their own threads, and the engine thread only stands in while no
  // thread is attached. The default: it is what the RDMA stack's workers
  // are written for (they poll and drive, docs/rdma-transport.md §1).
  // False runs every link on the engine thread (the threaded engine: CQ
  // events and the CQ-event fault injectors need it). SIPHON_SOFT_ENGINE=
  // driven or =thread in the environment overrides. docs/rdma-provider.md,
  // "The driven engine".
  bool driven_engine = true;
  std::uint32_t cm_timeout_ms = 5000;  // CM connect/REP wait before UNREACHABLE
  // Same-host copy: when both ends of a link are processes of this host
  // that may read each other's memory (process_vm_readv: same uid and
  // ptrace allowed), an RDMA READ's response is copied straight out of the
  // responder's registered memory instead of streamed over the TCP link.
  // False (or SIPHON_SOFT_LINK=tcp in the environment) keeps every byte on
  // the TCP link. docs/rdma-provider.md, "Same-host copy".
  bool same_host_copy = true;
  // Same-host rings: a data link whose two ends pass the same-host probe
  // moves its bytes from the TCP socket to a pair of shared-memory rings
  // (a memfd the responder makes and the requester fetches with
  // pidfd_getfd), waking the peer engine through an eventfd only when it
  // sleeps. The TCP socket stays open to notice the peer's death. Needs
  // same_host_copy; SIPHON_SOFT_LINK=tcp or =copy in the environment turns
  // it off; SIPHON_SOFT_LINK=rings turns it on. docs/rdma-provider.md, "Same-host rings".
  bool same_host_rings = true;
  std::uint32_t same_host_ring_bytes = 256 * 1024;  // per direction per link
  FaultPlan faults;
};

// Counters of one provider (all devices). Faults injected, and what the
// fabric did about the wire.
struct SoftCounters {
  std::uint64_t failed_posts = 0;
  std::uint64_t error_completions = 0;
  std::uint64_t qp_errors_injected = 0;
  std::uint64_t link_drops = 0;
  std::uint64_t delays = 0;
  std::uint64_t corruptions = 0;  // bits flipped by corrupt_data
  std::uint64_t rnr_naks_sent = 0;
  std::uint64_t retransmits = 0;
  std::uint64_t retry_timeouts = 0;
  std::uint64_t cq_overruns = 0;
  std::uint64_t cq_events_lost = 0;  // notifications dropped by lost_cq_event
  std::uint64_t cq_events_late = 0;  // notifications written late_cq_event after their completion
  std::uint64_t messages_sent = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t links_opened = 0;
  std::uint64_t same_host_reads = 0;    // READ responses copied with process_vm_readv
  std::uint64_t same_host_refused = 0;  // links whose probe the kernel refused (EPERM)
  std::uint64_t device_removals = 0;    // devices taken away by set_device_removed
  std::uint64_t shm_links = 0;          // data links moved to same-host rings (counted by the requester)
  std::uint64_t shm_wakeups = 0;        // eventfd writes that woke a ring's peer engine
  // Driven engine: rounds run by attached threads (the RDMA workers), by
  // the engine thread standing in while none is attached, and by the engine
  // thread as a backstop for a domain left readable and unpolled for 10 ms
  // while they are attached (a worker busy in its own code:
  // docs/rdma-provider.md, "The driven engine").
  std::uint64_t driven_rounds = 0;
  std::uint64_t standin_rounds = 0;
  std::uint64_t backstop_rounds = 0;
  // Objects alive now (all devices): what a leak check compares, and what
  // proves a user released a removed device (all 0 once it has).
  std::uint64_t mrs_live = 0;
  std::uint64_t qps_live = 0;
  std::uint64_t contexts_live = 0;  // open Device handles (a CmId's device() included)
  std::uint64_t pds_live = 0;
  std::uint64_t cqs_live = 0;
  std::uint64_t srqs_live = 0;
  std::uint64_t mws_live = 0;
  std::uint64_t cm_ids_live = 0;  // CmIds, those of undelivered CONNECT_REQUESTs included
};

// The path of one live QP, as the fabric uses it: what CmId::set_qos and
// modify() put there (tests read it back).
struct SoftQpPath {
  std::uint32_t qp_num = 0;
  std::uint8_t traffic_class = 0;
  std::uint8_t service_level = 0;
  std::uint8_t ack_timeout = 0;
};

// Creates a soft provider. Throws SetupError if `options` are invalid.
std::unique_ptr<Provider> make_provider(const SoftOptions& options = {});

// The counters of a provider made by make_provider (nullopt for others).
std::optional<SoftCounters> counters(const Provider& provider);

// The paths of every live QP of a provider made by make_provider (empty for
// others).
std::vector<SoftQpPath> qp_paths(const Provider& provider);

// Pulls the cable of a provider made by make_provider (true) or plugs it
// back in (false): while down every link of the provider is closed and no
// link opens, so established QPs run out of RC retries (RETRY_EXC_ERR) and
// their CM reports the disconnection, connects fail as unreachable, and
// peers connecting to it are reset. QPs made before the cut stay in ERR;
// new ones work once the link is up. False for other providers.
bool set_link_down(Provider& provider, bool down);
// The same for every soft provider alive in this process (siphon-bench
// --soft-link-down); returns how many it changed.
std::size_t set_link_down_all(bool down);

// Takes device `name` (e.g. "soft0") of a provider made by make_provider
// away, as `rdma link delete` does to a kernel device, or (removed = false)
// gives it back. While removed:
//  - list_devices() does not list it; open_device(name) fails with
//    errc::device_not_found;
//  - every live CmId bound to, resolved on, listening on or connected
//    through it gets exactly one CmEventType::device_removal event on its
//    channel (never after the id is destroyed) and nothing after it; its
//    listener and CM connection close (a peer elsewhere sees DISCONNECTED
//    or a failed connect) and every call on it but its destruction fails
//    with errc::device_not_found. The soft fabric serves every address
//    from device 0, so every CmId of the provider is on soft0: removing
//    soft0 tells every bound or resolved id, removing another device none;
//  - every QP of the device moves to ERR (its outstanding WRs complete as
//    flushed on their CQs, as after modify(ERR)), its data links close and
//    modify() fails with errc::device_not_found (but for ERR);
//  - new objects on handles of the device (alloc_pd, create_cq, reg_mr,
//    create_qp, create_srq, alloc_mw) fail with errc::device_not_found, and
//    so do query_port and query_gids; binding or resolving a new CmId fails
//    with errc::device_not_found (synchronously, no ADDR_ERROR event).
// Existing handles may still be used to poll, and destroyed: that is how a
// user releases the device (the *_live counters go to 0). The removal
// takes effect at once, as with a driver that can disassociate its users
// (rxe cannot: there `rdma link delete` waits until everything is released).
// Given back: listed and usable again, for fresh opens only (objects made
// before stay dead). True when the provider has a device `name` (whether or
// not its state changed); false for other providers or an unknown name.
bool set_device_removed(Provider& provider, std::string_view name, bool removed);
// The same for every soft provider alive in this process; returns how many
// have a device `name` (each is now in the state asked for).
std::size_t set_device_removed_all(std::string_view name, bool removed);

}  // namespace siphon::rdma::soft

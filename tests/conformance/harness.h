// The provider conformance suite's harness: provider selection, helpers over
// rdma/provider.h, and two-sided scenarios whose sides run in two threads,
// two processes or two network namespaces (docs/rdma-provider.md,
// "Conformance suite").
//
// Selection (flags or environment):
//   --provider=soft|verbs   SIPHON_PROVIDER   (default soft)
//   --device=NAME           SIPHON_DEVICE     (default: the first device)
//   --local-addr=IP         SIPHON_LOCAL_ADDR (default: 127.0.0.1 if the
//                           device has that GID, else its first IPv4 GID)
//   --peer=thread|shared|process|netns        where side B runs
//   --peer-addr=IP          B's address (process/netns; default local-addr)
//   --peer-netns=NAME       B's namespace (netns)
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "rdma/provider.h"

namespace siphon::rdma::conformance {

using namespace std::chrono_literals;

struct Config {
  std::string provider = "soft";
  std::string device;
  std::string local_addr;
  std::string peer = "thread";
  std::string peer_addr;
  std::string peer_netns;
  std::string self_exe;
  // Peer-process mode.
  std::string peer_role;
  int oob_fd = -1;
};
Config& config();
// Parses and removes the harness flags from argv; returns false on a bad flag.
bool parse_flags(int& argc, char** argv);

// Makes the configured provider; nullptr (with `why`) when it cannot exist in
// this build or has no device -- tests then GTEST_SKIP with `why`.
std::unique_ptr<Provider> make_provider(std::string& why);

// Everything one side needs: provider, device, PD, its address and GID.
struct Side {
  std::unique_ptr<Provider> provider;  // may be shared (see `shared_provider`)
  Provider* prov = nullptr;
  std::unique_ptr<Device> device;
  std::unique_ptr<ProtectionDomain> pd;
  NetAddress addr;
  Gid gid{};
  std::uint8_t gid_index = 0;
  class Oob* oob = nullptr;
  bool is_a = true;
  std::string skip_reason;
};
// Opens the device and a PD; on failure sets skip_reason or fails the test.
bool open_side(Side& s, Provider* shared, const std::string& addr);

// Out-of-band channel between the two sides (a socketpair in every mode).
class Oob {
 public:
  explicit Oob(int fd) : fd_(fd) {}
  ~Oob();
  Oob(const Oob&) = delete;
  Oob& operator=(const Oob&) = delete;
  bool send_bytes(const void* p, std::size_t n);
  bool recv_bytes(std::vector<std::uint8_t>& out, std::chrono::milliseconds timeout = 60s);
  template <typename T>
  bool send(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    return send_bytes(&v, sizeof v);
  }
  template <typename T>
  bool recv(T& v, std::chrono::milliseconds timeout = 60s) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<std::uint8_t> b;
    if (!recv_bytes(b, timeout) || b.size() != sizeof v) return false;
    std::memcpy(&v, b.data(), sizeof v);
    return true;
  }
  // Both sides reach this point (fails after the timeout).
  bool sync(std::chrono::milliseconds timeout = 60s);
  void close();

 private:
  int fd_;
};

// ---- two-sided scenarios
using RoleFn = void (*)(Side&);
bool register_scenario(const char* name, RoleFn a, RoleFn b);
void run_two_sided(const char* name);
int run_peer_role();  // in the peer process

#define SIPHON_TWO_SIDED(Suite, Name)                                                  \
  struct Suite##_##Name {                                                              \
    static void a(::siphon::rdma::conformance::Side&);                                 \
    static void b(::siphon::rdma::conformance::Side&);                                 \
  };                                                                                   \
  [[maybe_unused]] static const bool Suite##_##Name##_registered =                     \
      ::siphon::rdma::conformance::register_scenario(#Suite "." #Name, &Suite##_##Name::a, \
                                                      &Suite##_##Name::b);             \
  TEST(Suite, Name) { ::siphon::rdma::conformance::run_two_sided(#Suite "." #Name); }

// ---- helpers over the seam

// A registered buffer.
struct Buffer {
  std::vector<std::uint8_t> bytes;
  std::unique_ptr<MemoryRegion> mr;
  std::uint64_t addr(std::size_t off = 0) const {
    return reinterpret_cast<std::uint64_t>(bytes.data()) + off;
  }
  Sge sge(std::size_t off, std::uint32_t len) const { return {addr(off), len, mr->lkey()}; }
};
Buffer make_buffer(ProtectionDomain& pd, std::size_t len, std::uint32_t access);

// Send and receive queues of `wr` work requests of up to `sge` SGEs each.
QpCaps make_caps(std::uint32_t wr, std::uint32_t sge, std::uint32_t inline_data = 0);
// A signaled work request over `n` SGEs: a SEND unless `op` says otherwise
// (the caller sets remote_addr/rkey/imm_data where `op` needs them).
SendWr signaled(std::uint64_t wr_id, const Sge* sg, std::uint32_t n = 1, Opcode op = Opcode::send);

struct Rc {
  std::unique_ptr<CompletionQueue> scq, rcq;
  std::unique_ptr<QueuePair> qp;
};
Rc make_rc(Side& s, const QpCaps& caps, SharedReceiveQueue* srq = nullptr, std::uint32_t cqe = 1024);

// What the other side needs to connect a QP out of band.
struct Endpoint {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  Gid gid{};
};
Endpoint endpoint_of(const Side& s, const QueuePair& qp, std::uint32_t psn);

struct QpParams {
  std::uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead;
  std::uint8_t min_rnr_timer = 12;
  std::uint8_t timeout = 14;
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 7;
  std::uint8_t rd_atomic = 1;
};
// RESET -> INIT -> RTR -> RTS against `remote`.
std::error_code bring_up(const Side& s, QueuePair& qp, const Endpoint& self, const Endpoint& remote,
                         const QpParams& p = {});

// Polls until `n` completions arrived or the deadline passed.
std::vector<Wc> poll_n(CompletionQueue& cq, std::size_t n, std::chrono::milliseconds timeout = 20s);
// Waits for the next CM event (asserting it arrives in time).
bool wait_event(EventChannel& ch, CmEvent& out, std::chrono::milliseconds timeout = 20s);
bool fd_readable(int fd, std::chrono::milliseconds timeout);

Gid gid_of(const NetAddress& a);
std::string describe(const Wc& wc);

// The state a QP reaches once an error completion has been reported. The
// spec moves the QP to ERR when the error is generated, but rxe does that
// from a kernel work item on the responder side, so ibv_query_qp can still
// say RTS for a moment after the CQE is visible (seen in CI). Polls the
// state until it is `want` or `timeout` passes; returns the last state read.
QpState settled_state(const QueuePair& qp, QpState want, std::chrono::milliseconds timeout = 2s);

}  // namespace siphon::rdma::conformance

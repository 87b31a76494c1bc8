// Internals of the soft fabric shared by its translation units: the engine
// (the "HCA": one thread, epoll, timers), the MR table, CQ and receive rings,
// the QP core and the TCP links. Not a public header.
//
// Ownership and threads:
//  - Fabric (one per provider) owns the Engine and the DeviceCores; every
//    public handle keeps the Fabric alive through a shared_ptr.
//  - Cores (CqCore, SrqCore, QpCore, CmCore) are shared_ptr-owned by their
//    handles and by the cores that use them (a QP keeps its CQs alive), so
//    handles may be destroyed in any order without dangling pointers.
//  - The engine thread owns all protocol state. User threads touch only the
//    lock-free rings (post, poll), atomics (QP state, CQ arm) and the MR
//    table (under its mutex); everything else goes through Engine::call().
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "msgr/base/address.h"
#include "rdma/provider.h"
#include "rdma/soft/soft_provider.h"
#include "rdma/soft/wire.h"

namespace siphon::rdma::soft::detail {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

// ------------------------------------------------------------- counters

struct Counters {
  std::atomic<std::uint64_t> failed_posts{0}, error_completions{0}, qp_errors_injected{0},
      link_drops{0}, delays{0}, corruptions{0}, rnr_naks_sent{0}, retransmits{0}, retry_timeouts{0},
      cq_overruns{0}, messages_sent{0}, bytes_sent{0}, links_opened{0}, same_host_reads{0},
      same_host_refused{0}, cq_events_lost{0}, cq_events_late{0}, shm_links{0}, shm_wakeups{0},
      driven_rounds{0}, standin_rounds{0}, backstop_rounds{0};
  std::atomic<std::uint64_t> device_removals{0};
  std::atomic<std::uint64_t> mrs_live{0}, qps_live{0}, contexts_live{0}, pds_live{0}, cqs_live{0},
      srqs_live{0}, mws_live{0}, cm_ids_live{0};  // gauges
  static void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
    c.fetch_add(n, std::memory_order_relaxed);
  }
  SoftCounters snapshot() const noexcept;
};

// Deterministic fault draws (splitmix64).
class Rng {
 public:
  explicit Rng(std::uint64_t seed = 1) noexcept : s_(seed) {}
  std::uint64_t next() noexcept {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  bool fire(const FaultRate& r) noexcept {
    if (!r.enabled()) return false;
    const std::uint64_t x = next();
    if (r.one_in != 0 && x % r.one_in == 0) return true;
    return r.probability > 0.0 &&
           static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0) < r.probability;
  }

 private:
  std::uint64_t s_;
};

// ------------------------------------------------------------- engine

class Engine;

// Something registered with epoll. Deleted only through Engine::retire(),
// after the current batch of events, so a handler freed while handling one
// event is never touched by the next.
class Handler {
 public:
  virtual ~Handler() = default;
  virtual void on_io(std::uint32_t events) = 0;
  // Its second fd, added with Engine::add_wake_fd(), is readable.
  virtual void on_wake() {}
  bool retired = false;
};

// Something with a deadline. Engine::schedule() may be called again before
// the deadline; on_timer() is called at or after the earliest scheduled time
// and the client checks its own deadlines (lazy timers).
class TimerClient {
 public:
  virtual ~TimerClient() = default;
  virtual void on_timer(TimePoint now) = 0;
  std::uint64_t timer_id = 0;
};

class QpCore;
class Link;
class CqCore;

class Engine {
 public:
  Engine(const SoftOptions& options, Counters& counters);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs `fn` on the engine thread and waits (inline when already there).
  void call(const std::function<void()>& fn);
  // The thread that runs the engine's work now: the engine thread, or in
  // driven mode whichever thread holds the drive lock.
  bool on_engine_thread() const noexcept {
    return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  // Doorbell from a user thread: the QP has new work (lock-free).
  void ring(QpCore* qp) noexcept;

  // ---- driven mode (SoftOptions::driven_engine; CompletionQueue's
  // attach_progress/progress/progress_fd)
  bool driven() const noexcept { return options_.driven_engine; }
  void attach(bool on, void (*kick)(void*), void* arg, const CqCore* cq) noexcept;
  // One round of the engine's work if this thread can take the drive lock;
  // else the holder runs one more for it. True: work is left.
  bool drive(bool io, bool before_sleep) noexcept;
  int progress_fd() const noexcept { return epfd_; }
  // The CQ the calling thread attached with (its own completions need no
  // channel event: it polls after driving).
  static const CqCore* attached_cq() noexcept;
  // A CQ's progress domain (driven mode): an epoll fd of its own holding
  // the fds of the links whose QPs complete on that CQ (Link::home_ep), so
  // a peer's bytes wake only the worker that polls that CQ. While its CQ is
  // attached the domain holds the engine's epoll fd (timers, listeners, CM
  // links, orphaned domains: every attached thread sees those); while it is
  // not, the engine's epoll fd holds the domain, so whoever drives without
  // it (another worker, the engine thread) serves its links. A new domain
  // starts orphaned. -1 with errno when epoll_create1 fails.
  int open_domain() noexcept;

  // ---- engine thread only
  // The epoll fds of add_fd/add_wake_fd/del_fd/move_fd: -1 is the engine's own.
  std::error_code add_fd(int fd, Handler* h, std::uint32_t events, int ep = -1) noexcept;
  // An eventfd whose writes call h->on_wake() (edge-triggered: each write is
  // an event, the counter is never read).
  std::error_code add_wake_fd(int fd, Handler* h, int ep = -1) noexcept;
  void del_fd(int fd, int ep = -1) noexcept;
  // Re-registers fd (added with add_fd(..., events) or, with wake, with
  // add_wake_fd) from epoll fd `from` to `to`; a readiness pending there is
  // reported again by the new registration.
  std::error_code move_fd(int fd, Handler* h, std::uint32_t events, bool wake, int from, int to) noexcept;

  // Same-host links with bytes read since the engine last slept: polled at
  // every iteration, armed (and dropped) before it sleeps.
  void shm_hot(Link* link);
  void shm_forget(Link* link);
  void retire(std::unique_ptr<Handler> h);
  void add_timer_client(TimerClient* c);
  void remove_timer_client(TimerClient* c);
  void schedule(TimerClient* c, TimePoint when);
  void want_tx(Link* link);
  void drain_doorbells();
  TimePoint now() const noexcept { return now_; }
  const SoftOptions& options() const noexcept { return options_; }
  Counters& counters() noexcept { return counters_; }
  // The adapter's cable pulled (soft::set_link_down): every link is closed
  // with ENETDOWN, and while down no link opens (connects fail, accepted
  // sockets are reset), so RC retries run out and CM connects are
  // unreachable, as with a dead port. Set on the engine thread; read anywhere.
  bool link_down() const noexcept { return link_down_.load(std::memory_order_acquire); }
  void set_link_down(bool down);

 private:
  void run();
  void run_driven();  // the engine thread in driven mode: stands in while no thread is attached
  bool iterate(bool io, bool arm);  // drive lock held
  void dispatch(const struct epoll_event* events, int n);
  // Takes the events of an epoll fd (the engine's, a domain, or one nested
  // in the one polled), dispatching them, with the doorbells after each batch.
  void poll_epoll(int ep);
  void want_domain(int ep) noexcept;  // the lock holder's next round polls this domain too
  void set_domain_attached(int domain, bool attached) noexcept;  // drive lock held
  void rearm_timerfd() noexcept;
  void lock_drive() noexcept;
  bool try_lock_drive(bool wait) noexcept;  // wait: spin briefly for a holder
  void unlock_drive() noexcept;
  void run_commands();
  void run_timers();
  void flush_tx();
  void poll_shm();
  bool arm_shm();  // true: a ring has bytes, do not sleep
  // The engine thread while threads are attached: a round over the domains
  // left readable and unpolled for kBackstop (run_driven()).
  void backstop();

  const SoftOptions& options_;
  Counters& counters_;
  int epfd_ = -1;
  int wakefd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};

  std::atomic<bool> link_down_{false};
  std::thread thread_;
  std::atomic<std::thread::id> owner_{};
  TimePoint now_{};

  // Driven mode.
  std::atomic<bool> driving_{false};  // the drive lock
  std::atomic<int> lock_waiters_{0};  // threads asleep on it (try_lock_drive(true))
  std::atomic<int> drivers_{0};       // attached threads
  std::atomic<bool> redo_{false};     // a thread that found the lock taken wants another round
  std::atomic<bool> redo_arm_{false};  // ... and it is going to sleep
  std::atomic<bool> cmds_waiting_{false};
  int timerfd_ = -1;
  TimePoint timer_armed_ = TimePoint::max();
  int nest_depth_ = 0;  // poll_epoll() recursion (engine epoll fd <-> domains)
  std::mutex domains_mu_;
  std::vector<int> domains_want_;  // want_domain(), taken by the next round
  std::atomic<bool> domains_wanted_{false};
  // Drive lock held: the domains of attached CQs, when a round last polled
  // each, and since when the backstop has seen it readable (the backstop
  // polls those readable and left alone for kBackstop: `stale`).
  struct AttachedDomain {
    int fd;
    TimePoint polled;
    TimePoint ready_since{};
    bool stale = false;
  };
  std::vector<AttachedDomain> attached_domains_;
  void polled_domain(int ep) noexcept;
  std::mutex park_mu_;
  std::condition_variable park_cv_;

  std::mutex cmd_mu_;
  std::deque<std::function<void()>> cmds_;

  std::atomic<QpCore*> doorbells_{nullptr};  // Treiber stack of rung QPs

  struct TimerEntry {
    TimePoint when;
    std::uint64_t id;
    bool operator>(const TimerEntry& o) const noexcept { return when > o.when; }
  };
  std::vector<TimerEntry> timer_heap_;
  std::unordered_map<std::uint64_t, TimerClient*> timer_clients_;
  std::uint64_t next_timer_id_ = 1;

  std::vector<Link*> tx_pending_;
  std::vector<Link*> shm_hot_;
  std::vector<std::unique_ptr<Handler>> retired_;
  std::unordered_set<Handler*> handlers_;  // registered and not yet retired
};

// ------------------------------------------------------------- memory

// An MR, or a type-2 memory window (`mw`): a window has no lkey; while
// `bound` it grants `access` on [addr, addr + len) of the MR `parent` to
// requests arriving on QP `qpn` only.
struct MrEntry {
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  std::uint32_t access = 0;
  std::uint32_t pd = 0;
  std::uint32_t key = 0;
  bool live = false;
  bool mw = false;
  bool bound = false;
  std::uint32_t qpn = 0;
  std::uint32_t parent = 0;
};

// A local access (an SGE): windows never qualify.
constexpr std::uint32_t kLocalAccess = 0;

// lkey == rkey == ((slot + 1) << 8) | generation. MRs and memory windows
// share the key space; a window keeps its slot (rkey >> 8) for life and a
// bind gives it a new low byte. The engine holds `mu` while it reads or
// writes registered memory, so once deregistration (or a window's
// invalidation) returns the memory is never touched again through that key.
class MrTable {
 public:
  explicit MrTable(std::uint32_t limit) : limit_(limit) {}
  std::uint32_t add(std::uint64_t addr, std::uint64_t len, std::uint32_t access, std::uint32_t pd,
                    std::error_code& ec);
  std::uint32_t add_mw(std::uint32_t pd, std::error_code& ec);  // an unbound window
  void remove(std::uint32_t key) noexcept;
  void remove_mw(std::uint32_t index) noexcept;  // index = rkey >> 8
  // Engine, a bind_mw WR of QP `qpn` (PD `pd`): false when the bind is not
  // allowed (window unknown, bound, other PD, key of another window, MR not
  // live / other PD / without kMwBind, range outside the MR, rights).
  // `cur_key` is the window's rkey when the WR was posted (as rxe checks):
  // a bind for a window freed and reallocated since fails.
  bool bind_mw(std::uint32_t cur_key, std::uint32_t new_key, std::uint32_t pd, std::uint32_t qpn,
               std::uint32_t mr_key, std::uint64_t addr, std::uint64_t len,
               std::uint32_t access) noexcept;
  // Engine, a local_inv WR: false unless `key` is a bound window of `pd`.
  bool invalidate(std::uint32_t key, std::uint32_t pd) noexcept;
  // `mu` held. The entry when `key` is live, in `pd`, grants `need` and
  // covers [addr, addr + len); nullptr otherwise. `qpn` is the QP a remote
  // request arrived on (kLocalAccess for an SGE): a window's key is valid
  // only while bound, on the QP it is bound to, and while its MR lives.
  const MrEntry* check(std::uint32_t key, std::uint32_t pd, std::uint32_t need, std::uint64_t addr,
                       std::uint64_t len, std::uint32_t qpn = kLocalAccess) const noexcept;

  std::mutex mu;

 private:
  // `mu` held: a slot for a new entry and its key (slot + 1, then the
  // generation); 0 and resource_exhausted when the table is full.
  std::uint32_t claim_locked(std::uint32_t& slot, std::error_code& ec);

  std::uint32_t limit_;
  std::vector<MrEntry> slots_;
  std::vector<std::uint32_t> free_;
  std::uint8_t gen_ = 0;
};

// ------------------------------------------------------------- CQ

// Single producer (the engine), single consumer (the polling thread).
class CqCore {
 public:
  CqCore(std::uint32_t capacity, Counters& counters, const FaultPlan& faults, std::error_code& ec);
  ~CqCore();
  // Engine. False when the CQ is full (overrun: the completion is lost).
  bool push(const Wc& wc, bool solicited) noexcept;
  std::size_t poll(std::span<Wc> out) noexcept;
  void arm(bool solicited_only) noexcept;
  std::size_t consume_events() noexcept;
  int fd() const noexcept { return efd_; }
  std::uint32_t capacity() const noexcept { return cap_; }
  // Driven mode: the CQ's progress domain (Engine::open_domain), -1 without.
  int domain_fd() const noexcept { return domain_; }
  void set_domain(int ep) noexcept { domain_ = ep; }

 private:
  void notify() noexcept;
  int domain_ = -1;
  Counters& counters_;
  FaultRate lost_event_;  // FaultPlan::lost_cq_event
  std::chrono::milliseconds late_event_{0};  // FaultPlan::late_cq_event
  Rng lost_rng_;          // its draws (the engine, the only producer)
  std::uint32_t cap_ = 0;
  std::uint32_t mask_ = 0;
  std::unique_ptr<Wc[]> ring_;
  int efd_ = -1;
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  alignas(64) std::atomic<int> armed_{0};  // 0 no, 1 any, 2 solicited/error only
};

// ------------------------------------------------------------- receive rings

// A receive WR taken off a ring by the engine (its SGEs copied out).
struct RecvWork {
  bool valid = false;
  std::uint64_t wr_id = 0;
  std::uint32_t num_sge = 0;
  std::vector<Sge> sges;  // sized once to the ring's max_sge
};

// Single producer (the posting thread), single consumer (the engine). Used for
// a QP's receive queue and for an SRQ.
class RecvRing {
 public:
  RecvRing(std::uint32_t capacity, std::uint32_t max_sge);
  // Posts WRs in order; errors: queue_full, invalid_argument (SGEs).
  std::error_code post(std::span<const RecvWr> wrs, std::size_t* bad, Rng* faults,
                       const FaultRate* fail, Counters* counters) noexcept;
  bool pop(RecvWork& out) noexcept;  // engine
  bool empty() const noexcept {
    return cons_.load(std::memory_order_relaxed) == prod_.load(std::memory_order_acquire);
  }
  void clear() noexcept;  // engine, QP in RESET
  std::uint32_t capacity() const noexcept { return cap_; }
  std::uint32_t max_sge() const noexcept { return max_sge_; }

 private:
  struct Slot {
    std::uint64_t wr_id;
    std::uint32_t num_sge;
  };
  std::uint32_t cap_;
  std::uint32_t max_sge_;
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<Sge[]> sges_;
  alignas(64) std::atomic<std::uint64_t> prod_{0};
  alignas(64) std::atomic<std::uint64_t> cons_{0};
};

struct SrqCore {
  SrqCore(std::uint32_t cap, std::uint32_t max_sge, std::uint32_t pd_id) : ring(cap, max_sge), pd(pd_id) {}
  RecvRing ring;
  std::uint32_t pd;
  Rng rng;
};

// ------------------------------------------------------------- devices

struct Fabric;
struct QpnBlock;
class CmCore;

struct DeviceCore {
  DeviceCore(Fabric& fabric, unsigned index, const SoftOptions& o);
  Fabric& fabric;
  unsigned index;
  DeviceAttr attr;
  MrTable mrs;
  std::atomic<std::uint32_t> next_pd{1};
  std::atomic<std::uint32_t> qp_count{0};
  std::atomic<std::uint32_t> cq_count{0};
  std::atomic<std::uint32_t> qp_serial{0};  // seeds per-QP fault PRNGs
  // soft::set_device_removed: while `removed` the device is not listed, not
  // opened and nothing is made on it. `generation` counts removals: every
  // handle remembers the generation it was made in and is dead once it
  // changes, so objects made before a removal stay dead after the device is
  // given back. Both change on the engine thread only; a removal stores
  // `removed` before it bumps `generation`, and an open loads them in the
  // other order, so an open racing a removal either fails or gets a handle
  // that is already dead.
  std::atomic<bool> removed{false};
  std::atomic<std::uint32_t> generation{0};
  bool alive(std::uint32_t gen) const noexcept {
    return !removed.load() && generation.load() == gen;
  }
  // Engine thread only.
  std::vector<std::unique_ptr<QpnBlock>> blocks;
  QpCore* find_qp(std::uint32_t qpn) const noexcept;
};

// The GID table of the host, as an rxe port would list it (RoCE v2 only).
std::vector<GidEntry> host_gids();
bool gid_to_address(const Gid& gid, std::uint16_t port, std::uint32_t scope, NetAddress& out);
Gid address_to_gid(const NetAddress& a);

struct Fabric {
  explicit Fabric(const SoftOptions& o);
  ~Fabric();
  SoftOptions options;
  Counters counters;
  std::vector<std::unique_ptr<DeviceCore>> devices;
  std::atomic<bool> refusal_logged{false};  // the same-host copy refusal is logged once
  // Every CM id core not yet destroyed (engine thread only): what a device
  // removal tells.
  std::unordered_set<CmCore*> cm_cores;
  std::unique_ptr<Engine> engine;  // last member built, first destroyed
};

// ------------------------------------------------------------- links

// A byte ring for one direction of a link. Private to the engine for a TCP
// link (the fill side produces, write_out() consumes); on a same-host link
// attach() moves it onto a ring shared with the peer process, whose engine
// is then the other side (single producer, single consumer; the indices are
// monotonic and published with release stores).
class ByteRing {
 public:
  explicit ByteRing(std::size_t cap)
      : own_(new std::uint8_t[cap]), buf_(own_.get()), cap_(cap), head_(&own_head_), tail_(&own_tail_) {}
  void attach(std::uint8_t* buf, std::size_t cap, std::atomic<std::uint64_t>* head,
              std::atomic<std::uint64_t>* tail) noexcept {
    own_.reset();
    buf_ = buf;
    cap_ = cap;
    head_ = head;
    tail_ = tail;
  }
  // A shared ring's indices come from the peer: more than `capacity()`
  // bytes means they were damaged (the reader refuses to read it).
  std::size_t size() const noexcept {
    return static_cast<std::size_t>(tail_->load(std::memory_order_acquire) -
                                    head_->load(std::memory_order_acquire));
  }
  std::size_t space() const noexcept { return size() >= cap_ ? 0 : cap_ - size(); }
  void put(const void* p, std::size_t n) noexcept;
  // Reserves up to n contiguous bytes for writing in place; commit() after.
  std::span<std::uint8_t> reserve(std::size_t n) noexcept;
  void commit(std::size_t n) noexcept {
    tail_->store(tail_->load(std::memory_order_relaxed) + n, std::memory_order_release);
  }
  std::uint64_t tail() const noexcept { return tail_->load(std::memory_order_relaxed); }
  // Readable bytes as up to two spans (none when the indices are damaged).
  std::size_t peek(std::span<const std::uint8_t> out[2]) const noexcept;
  void consume(std::size_t n) noexcept {
    head_->store(head_->load(std::memory_order_relaxed) + n, std::memory_order_release);
  }
  std::size_t capacity() const noexcept { return cap_; }

 private:
  std::unique_ptr<std::uint8_t[]> own_;
  std::uint8_t* buf_;
  std::size_t cap_;
  std::atomic<std::uint64_t> own_head_{0}, own_tail_{0};
  std::atomic<std::uint64_t>* head_;
  std::atomic<std::uint64_t>* tail_;
};

// Same-host rings (docs/rdma-provider.md, "Same-host rings"): the layout of
// the memfd a responder offers in its HELLO_ACK. dir[0] carries requests
// (requester to responder), dir[1] responses. The responder's eventfds,
// fetched by the requester with pidfd_getfd, wake each side's engine.
struct ShmDir {
  alignas(64) std::atomic<std::uint64_t> tail{0};  // producer
  alignas(64) std::atomic<std::uint64_t> head{0};  // consumer
  // Dekker pairs: the consumer sets reader_armed before it sleeps and then
  // looks at tail; the producer publishes tail, then clears an armed flag
  // and wakes it. The same between a full ring's producer (writer_waiting)
  // and the consumer's head.
  alignas(64) std::atomic<std::uint32_t> reader_armed{0};
  std::atomic<std::uint32_t> writer_waiting{0};
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free &&
              std::atomic<std::uint32_t>::is_always_lock_free);

struct ShmLayout {
  static constexpr std::uint64_t kMagic = 0x5348534950484F4Eull;  // "NOHPISHS"
  std::uint64_t magic;
  std::uint64_t nonce;     // the responder's same-host probe value
  std::uint32_t cap;       // bytes of each direction's data
  std::int32_t efd_requester;  // in the responder's process: the requester's engine listens
  std::int32_t efd_responder;  //   the responder's engine listens
  ShmDir dir[2];
};
inline constexpr std::size_t kShmDataOffset = 4096;
static_assert(sizeof(ShmLayout) <= kShmDataOffset);

// One link's share of a same-host ring pair, in either process.
struct ShmLink {
  ShmLink() = default;
  ShmLink(const ShmLink&) = delete;
  ShmLink& operator=(const ShmLink&) = delete;
  ~ShmLink();
  void* base = nullptr;
  std::size_t size = 0;
  int memfd = -1;     // the responder's, until the requester answered
  int my_efd = -1;    // this engine listens on it
  int peer_efd = -1;  // wakes the peer's engine
  ShmLayout* layout = nullptr;
  ShmDir* tx = nullptr;
  ShmDir* rx = nullptr;
  std::uint8_t* tx_data = nullptr;
  std::uint8_t* rx_data = nullptr;
};

// Where the payload of the message being received goes.
struct RxSink {
  enum class Kind : std::uint8_t { discard, scatter, mr } kind = Kind::discard;
  const Sge* sges = nullptr;   // scatter
  std::uint32_t num_sge = 0;
  std::uint32_t pd = 0;
  std::uint64_t addr = 0;      // mr: target address, key in `key`
  std::uint32_t key = 0;
  std::uint32_t need = 0;      // mr: access the target must grant
  std::uint32_t qpn = 0;       // mr: the responder QP (memory windows)
  std::uint64_t remote = 0;    // scatter of a READ response: the READ's remote address
  bool failed = false;         // a protection fault while placing
};

// Where the payload of the message being sent comes from.
struct TxSource {
  enum class Kind : std::uint8_t { none, gather, inline_data, mr } kind = Kind::none;
  const Sge* sges = nullptr;
  std::uint32_t num_sge = 0;
  const std::uint8_t* data = nullptr;  // inline
  std::uint32_t pd = 0;
  std::uint64_t addr = 0;               // mr
  std::uint32_t key = 0;
  std::uint32_t qpn = 0;                // mr: the responder QP (memory windows)
  bool failed = false;
};

// One TCP connection. Kinds:
//  requester  opened by a QP to the responder's QPN block; carries its
//             requests out and the responses back;
//  responder  accepted on a QPN block; attached to a QP by the HELLO;
//  cm         a CM exchange (active or passive side).
//
//   connecting --connected--> open --EOF/error/close()--> closed (retired)
class Link final : public Handler {
 public:
  enum class Kind : std::uint8_t { requester, responder, cm };
  enum class State : std::uint8_t { connecting, open, closed };

  Link(Engine& engine, DeviceCore* dev, Kind kind, int fd, bool connecting, std::size_t bufsize);
  ~Link() override;
  std::error_code register_fd() noexcept;
  void on_io(std::uint32_t events) override;
  void on_wake() override;  // same-host rings: bytes to read or room to write
  // Same-host rings: reads what the peer wrote (engine poll), and arms the
  // reader (false: bytes arrived meanwhile).
  void drain_ring() noexcept;
  bool arm_ring() noexcept;
  bool shm_hot = false;  // in Engine::shm_hot_

  // Queues a whole message (header + small payload) if it fits and nothing
  // is being streamed.
  bool put(const wire::Header& h, const void* payload = nullptr, std::size_t len = 0) noexcept;
  // Starts streaming a message whose payload comes from `src` (the caller
  // checked tx_space() >= sizeof(Header) and !tx_busy()).
  void start(const wire::Header& h, const TxSource& src) noexcept;
  bool tx_busy() const noexcept { return tx_left_ != 0; }
  bool shm_active() const noexcept { return shm_on_; }
  std::size_t tx_space() const noexcept { return tx_.space(); }
  bool pump() noexcept;       // copies more of the streamed payload; true when done
  void flush() noexcept;      // fills from the owner and writes to the socket
  void flush_now() noexcept;  // writes what is queued, no fill
  // Closes the socket; with `notify` the owner hears of it (on_link_lost...).
  // The link is deleted after the current engine iteration.
  void close(bool notify) noexcept;

  Engine& engine;
  DeviceCore* dev;
  Kind kind;
  State state;
  int fd;
  int error = 0;               // errno of the failure that closed it (0 = EOF)
  QpCore* qp = nullptr;
  CmCore* cm = nullptr;
  std::uint32_t peer_qpn = 0;  // responder: from the HELLO
  // Requester: the responder's process, once its HELLO_ACK offered the
  // same-host copy and the probe read its value back (link.cc).
  bool same_host = false;
  int peer_pid = 0;
  bool tx_queued = false;      // in Engine::tx_pending_
  bool want_write = false;     // blocked until EPOLLOUT
  TxSource tx_src;
  // The epoll fd its fds are registered in: its QP's CQ's progress domain
  // (driven mode), or -1 for the engine's own. Set before register_fd(), or
  // later with set_home().
  int home_ep = -1;
  void set_home(int ep) noexcept;

 private:
  // Reads until the socket is drained. `events` are epoll's: without a
  // hang-up or error among them, a short read proves the socket empty (it
  // is edge-triggered, so later bytes raise a new event) and saves the
  // read() that would only return EAGAIN.
  void on_readable(std::uint32_t events);
  // Parses n bytes of the stream (all of them unless the link closes).
  void feed(const std::uint8_t* p, std::size_t n, bool ring);
  bool begin_message();
  void deliver(const std::uint8_t* p, std::size_t n) noexcept;
  void maybe_corrupt(std::uint64_t at, std::size_t n) noexcept;  // FaultPlan::corrupt_data
  void message_done() noexcept;
  void on_hello();
  void on_hello_ack();
  void probe_same_host(std::uint64_t want);  // sets same_host, peer_pid
  bool pull_read_response() noexcept;  // false: the copy failed, the link is closed
  bool write_out() noexcept;
  void protocol_error(const char* what);
  // Same-host rings.
  void offer_shm(wire::Header& reply) noexcept;  // responder, HELLO
  bool attach_shm(int pid, int memfd, std::uint64_t nonce) noexcept;  // requester, HELLO_ACK
  void on_shm_on();                              // responder, SHM_ON
  void switch_to_shm() noexcept;
  void flush_shm() noexcept;
  void wake_peer_reader() noexcept;
  void wake_peer_if(std::atomic<std::uint32_t>& flag) noexcept;

  ByteRing tx_;
  std::uint32_t tx_left_ = 0;  // payload bytes of the streamed message not yet copied
  std::uint32_t tx_done_ = 0;
  std::unique_ptr<std::uint8_t[]> rx_;  // socket reads; freed once on the same-host rings
  std::size_t rx_cap_;
  bool in_msg_ = false;        // the message being received
  wire::Header hdr_{};
  std::size_t hdr_have_ = 0;   // bytes of hdr_ received
  std::uint32_t rx_left_ = 0;
  std::uint32_t rx_done_ = 0;
  RxSink sink_;
  std::vector<std::uint8_t> small_;  // control payloads (HELLO, CM) gathered here
  std::vector<iovec> iov_;           // same-host copies: the local SGEs
  Rng corrupt_rng_;                  // corrupt_data draws (engine thread)
  std::unique_ptr<ShmLink> shm_;     // offered (responder) or attached
  ByteRing rx_ring_{0};              // same-host: the peer's bytes
  bool shm_on_ = false;              // bytes go through shm_, not the socket
  bool shm_efd_registered_ = false;  // shm_->my_efd is in home_ep
  std::uint64_t tx_signalled_ = 0;   // tx_.tail() when the peer was last told
};

// A listening socket; accepted sockets go to `on_accept`.
class Listener final : public Handler {
 public:
  Listener(Engine& engine, int fd, std::function<void(int)> on_accept);
  ~Listener() override;
  void on_io(std::uint32_t events) override;
  void close();  // unregisters and retires (deletes) the listener
  Engine& engine;
  int fd;

 private:
  std::function<void(int)> on_accept_;
};

// 256 QP numbers behind one listening port: qpn = port << 8 | slot, so a
// requester finds the responder's adapter from (GID, QPN) alone, as RoCE does.
struct QpnBlock {
  std::uint16_t port = 0;
  Listener* listener = nullptr;
  QpCore* qps[256] = {};
  std::uint32_t used = 0;
};
QpnBlock* open_qpn_block(DeviceCore& dev, std::error_code& ec);

int connect_nb(const NetAddress& to, std::error_code& ec) noexcept;
int listen_on(const NetAddress& at, int backlog, std::error_code& ec) noexcept;
NetAddress sock_name(int fd, bool peer) noexcept;

// ------------------------------------------------------------- QP

struct SendSlot {
  std::uint64_t wr_id;
  std::uint64_t raddr;
  std::uint32_t rkey;
  std::uint32_t imm;
  std::uint32_t flags;
  std::uint32_t num_sge;
  std::uint32_t length;
  Opcode op;
  // bind_mw: the MR's key, the window's range and rights (raddr = address,
  // rkey = the window's new rkey); local_inv: rkey = the key to invalidate.
  std::uint32_t mr_key;
  std::uint32_t mw_key;  // bind_mw: the window's rkey when the bind was posted
  std::uint32_t mw_access;
  std::uint64_t mw_len;
  bool local_done;     // engine: the bind / invalidate was executed (not redone on resend)
  bool too_long;       // over max_msg_size: completes with local_length_error
  bool read_done;      // engine: the READ response arrived
  bool fault_checked;  // engine: fault draws made for this WR
};

// IB encodings.
std::chrono::nanoseconds rnr_timer_duration(std::uint8_t code) noexcept;
std::chrono::nanoseconds ack_timeout_duration(std::uint8_t code) noexcept;  // 0 = infinite
bool modify_allowed(QpState cur, QpState next, std::uint32_t mask) noexcept;

class QpCore final : public TimerClient {
 public:
  QpCore(DeviceCore& dev, std::uint32_t pd, const QpInit& init, std::shared_ptr<CqCore> scq,
         std::shared_ptr<CqCore> rcq, std::shared_ptr<SrqCore> srq, std::uint64_t seed);
  ~QpCore() override;

  // ---- user thread (data path)
  std::error_code post_send(std::span<const SendWr> wrs, std::size_t* bad) noexcept;
  std::error_code post_recv(std::span<const RecvWr> wrs, std::size_t* bad) noexcept;
  QpState state() const noexcept { return state_.load(std::memory_order_acquire); }

  // ---- engine thread
  std::error_code modify(const QpAttr& attr, std::uint32_t mask);
  void register_qpn(std::error_code& ec);  // on creation
  void destroy();                          // unregisters, closes links
  void on_doorbell();
  void on_timer(TimePoint now) override;
  void to_error();     // enter_error() and flush everything outstanding
  void enter_error();  // state ERR, requester link closed; no completions yet
  // The device was taken away (soft::set_device_removed): to_error(), the
  // responder link closed, and modify() refuses anything but ERR from now on.
  void remove_device();
  // requester side
  void fill_requests(Link& link);
  void on_response(Link& link, const wire::Header& h);  // ACK / NAK
  RxSink read_resp_sink(const wire::Header& h);
  void on_read_resp_done(const wire::Header& h, bool failed);
  void on_link_lost(Link& link);
  void on_hello_ack();
  // responder side
  void attach_responder(Link& link);
  void detach_responder(Link& link);
  RxSink on_request(Link& link, const wire::Header& h);  // where the payload goes
  void on_request_done(Link& link, const wire::Header& h, bool failed);
  void fill_responses(Link& link);

  DeviceCore& dev;
  const std::uint32_t pd;
  std::uint32_t qpn = 0;
  QpCaps caps;
  bool sq_sig_all;
  std::shared_ptr<CqCore> scq, rcq;
  std::shared_ptr<SrqCore> srq;
  std::atomic<QpCore*> next_doorbell{nullptr};
  std::atomic<bool> doorbell_pending{false};
  // The modify()-able attributes, engine-owned. Its `state` is unused (the
  // QP's state is state_) and so is pkey_index (one partition).
  QpAttr attr;
  // The source GID attr.av.sgid_index named when the path was set (the
  // host's GID table is read then; an interface change later does not
  // rewrite what the QP connected with). Engine-owned, for query_path().
  Gid sgid{};
  bool destroyed = false;
  bool device_gone = false;  // remove_device() ran

 private:
  void set_state(QpState s) noexcept { state_.store(s, std::memory_order_release); }
  void reset_all();
  void complete_send(std::uint64_t idx, WcStatus st);
  void retire_acked();
  void flush_send_queue();
  void flush_recvs();
  void check_overrun();
  void ensure_link();
  void open_link();
  void fail_oldest(WcStatus st);
  void rewind_to(std::uint64_t idx);
  std::uint64_t psn_to_index(std::uint32_t psn, bool* ok) const noexcept;
  std::uint32_t index_psn(std::uint64_t idx) const noexcept {
    return (attr.sq_psn + static_cast<std::uint32_t>(idx - sq_base_)) & wire::kPsnMask;
  }
  std::chrono::nanoseconds retry_period() const noexcept;
  void arm_retry_timer();
  void wake_at(TimePoint when);
  void progress() noexcept;
  bool claim_recv(RecvWork& w);
  void recv_complete(RecvWork& w, WcStatus st, WcOpcode op, std::uint32_t len, bool imm,
                     std::uint32_t imm_data, bool solicited);
  bool queue_read(const wire::Header& h);
  void queue_ack(std::uint32_t psn);
  void queue_nak(std::uint32_t psn, wire::NakCode code);
  void responder_fatal(std::uint32_t psn, wire::NakCode code, WcStatus claimed_status);
  void kick_responder();
  void send_owed_responses();

  std::atomic<QpState> state_{QpState::reset};
  Rng post_rng_;    // user thread: fail_post draws
  Rng engine_rng_;  // engine: the other faults

  // Send queue: slots [sq_free_, sq_prod_) belong to the engine; the user
  // thread reuses a slot once sq_free_ has passed it.
  std::uint32_t sq_cap_;
  std::unique_ptr<SendSlot[]> sq_;
  std::unique_ptr<Sge[]> sq_sges_;
  std::unique_ptr<std::uint8_t[]> sq_inline_;
  alignas(64) std::atomic<std::uint64_t> sq_prod_{0};
  alignas(64) std::atomic<std::uint64_t> sq_free_{0};
  // Requester state (engine).
  std::uint64_t sq_seen_ = 0;   // WRs known to the engine
  std::uint64_t done_ = 0;      // WRs before this are complete
  std::uint64_t tx_next_ = 0;   // next WR to serialise
  std::uint64_t acked_ = 0;     // non-READ WRs before this are acknowledged
  std::uint64_t sq_base_ = 0;   // the index that carries attr.sq_psn
  std::uint64_t pending_err_idx_ = ~0ull;  // a WR failed locally; reported in order
  WcStatus pending_err_ = WcStatus::success;
  std::uint64_t read_idx_ = ~0ull;         // the READ whose response is arriving
  std::uint32_t reads_out_ = 0;
  std::uint8_t retry_left_ = 7;
  std::uint8_t rnr_left_ = 7;
  TimePoint retry_deadline_{};  // ACK timeout (TimePoint{} = off)
  TimePoint hold_until_{};      // RNR wait, NAK backoff or injected delay
  TimePoint wakeup_{};          // the earliest timer entry queued for us
  bool rewind_pending_ = false;
  std::uint64_t rewind_idx_ = 0;
  Link* req_link_ = nullptr;
  bool link_ready_ = false;
  bool reconnect_wait_ = false;
  bool cq_overrun_ = false;

  // Responder state (engine).
  std::unique_ptr<RecvRing> rq_;
  RecvWork claimed_;  // the receive a SEND (or WRITE with imm) is placed into
  RecvWork scratch_recv_;
  Link* resp_link_ = nullptr;
  std::uint32_t expected_psn_ = 0;
  bool resp_fatal_ = false;
  enum class Cur : std::uint8_t { process, drop, duplicate, not_ready, rnr, too_long, access };
  Cur cur_ = Cur::process;  // verdict on the request being received
  struct Resp {
    wire::Type type;
    wire::NakCode code;
    std::uint32_t psn;
    std::uint64_t addr;
    std::uint32_t key;
    std::uint32_t len;
    bool same_host;  // read_resp: the requester copies the bytes itself
  };
  std::vector<Resp> resp_q_;  // ring, sized at creation; responses in PSN order
  std::size_t resp_head_ = 0;
  std::size_t resp_count_ = 0;
  std::uint32_t resp_reads_ = 0;
};

// ------------------------------------------------------------- CM

class CmChannelCore;

// The connection-manager state of one id, engine-owned (state diagram in
// cm.cc). The public id (CmIdImpl) owns it; events point at the public id.
class CmCore final : public TimerClient {
 public:
  enum class St : std::uint8_t {
    idle, bound, listening, addr_resolved, route_resolved, req_sent, req_wait, req_received,
    rep_sent, established, disconnecting, disconnected, rejected, failed,
    removed,  // its device was taken away: DEVICE_REMOVAL sent, nothing after
  };
  CmCore(std::shared_ptr<Fabric> fabric, std::shared_ptr<CmChannelCore> channel);
  ~CmCore() override;
  void on_timer(TimePoint now) override;
  void on_link_message(Link& link, const wire::Header& h, std::span<const std::uint8_t> payload);
  void on_link_lost(Link& link);
  void on_link_connected(Link& link);
  void on_accept(int fd);  // listening
  void destroy();          // engine thread
  // Engine thread: its device was taken away. One DEVICE_REMOVAL event, then
  // its link, listener and pending connections are closed and it stays in
  // St::removed (every call on the id but its destruction fails).
  void remove_device();

  std::shared_ptr<Fabric> fabric;
  std::shared_ptr<CmChannelCore> channel;
  CmId* handle = nullptr;  // the public id (nullptr once destroyed)
  St st = St::idle;
  NetAddress local, peer;
  DeviceCore* dev = nullptr;
  std::uint32_t dev_gen = 0;  // dev->generation when it was bound or resolved
  std::shared_ptr<QpCore> qp;
  ConnParam my_param;
  CmQos qos;  // set_qos: applied to the QP's path when it is connected
  wire::CmConnect peer_conn{};
  std::uint32_t start_psn = 0;
  Link* link = nullptr;
  Listener* listener = nullptr;
  std::vector<std::shared_ptr<CmCore>> pending;  // listening: accepted, REQ not yet in
  CmCore* parent = nullptr;                      // req_wait: the listening core
  TimePoint deadline{};

  void emit(CmEventType type, std::error_code status = {},
            std::span<const std::uint8_t> private_data = {}, std::size_t pad_to = 0);
  void on_req(const wire::Header& h, std::span<const std::uint8_t> payload);
  void on_rep(std::span<const std::uint8_t> payload);
  void drop_link();
  wire::CmConnect my_conn() const;
};

}  // namespace siphon::rdma::soft::detail

// The soft fabric's engine thread (the "HCA"): epoll over the links and
// listeners, lazy timers, commands from user threads, QP doorbells.
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <future>
#include <thread>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/soft/core.h"

namespace siphon::rdma::soft::detail {

SoftCounters Counters::snapshot() const noexcept {
  auto g = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  SoftCounters s;
  s.failed_posts = g(failed_posts);
  s.error_completions = g(error_completions);
  s.qp_errors_injected = g(qp_errors_injected);
  s.link_drops = g(link_drops);
  s.delays = g(delays);
  s.corruptions = g(corruptions);
  s.rnr_naks_sent = g(rnr_naks_sent);
  s.retransmits = g(retransmits);
  s.retry_timeouts = g(retry_timeouts);
  s.cq_overruns = g(cq_overruns);
  s.cq_events_lost = g(cq_events_lost);
  s.cq_events_late = g(cq_events_late);
  s.messages_sent = g(messages_sent);
  s.bytes_sent = g(bytes_sent);
  s.links_opened = g(links_opened);
  s.same_host_reads = g(same_host_reads);
  s.same_host_refused = g(same_host_refused);
  s.device_removals = g(device_removals);
  s.shm_links = g(shm_links);
  s.shm_wakeups = g(shm_wakeups);
  s.driven_rounds = g(driven_rounds);
  s.standin_rounds = g(standin_rounds);
  s.backstop_rounds = g(backstop_rounds);
  s.mrs_live = g(mrs_live);
  s.qps_live = g(qps_live);
  s.contexts_live = g(contexts_live);
  s.pds_live = g(pds_live);
  s.cqs_live = g(cqs_live);
  s.srqs_live = g(srqs_live);
  s.mws_live = g(mws_live);
  s.cm_ids_live = g(cm_ids_live);
  return s;
}

// ------------------------------------------------------------- Engine

namespace {
// The timerfd's epoll tag (handlers are pointers, at least 4-aligned).
constexpr std::uint64_t kTimerTag = 2;
// An epoll fd held in another (driven mode's progress domains): fd << 8 | tag.
// No handler pointer (8-aligned, | 1 for on_wake) has these low bits.
constexpr std::uint64_t kNestedTag = 6;
constexpr std::uint64_t nested_tag(int ep) noexcept {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(ep)) << 8) | kNestedTag;
}
// Driven mode: the engine and CQ this thread attached with, and its kick.
thread_local Engine* t_engine = nullptr;
thread_local void (*t_kick)(void*) = nullptr;
thread_local void* t_kick_arg = nullptr;
thread_local const CqCore* t_cq = nullptr;
thread_local bool t_standin = false;  // the engine thread in driven mode
thread_local bool t_backstop = false;  // ... running a backstop round (Engine::backstop)
// Driven mode with threads attached: how often the engine thread looks, and
// how long a domain may stay readable and unpolled before it serves it
// (Engine::backstop).
constexpr std::chrono::milliseconds kBackstop{10};
}  // namespace

Engine::Engine(const SoftOptions& options, Counters& counters)
    : options_(options), counters_(counters) {
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wakefd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epfd_ < 0 || wakefd_ < 0) {
    const int err = errno;
    if (epfd_ >= 0) ::close(epfd_);
    if (wakefd_ >= 0) ::close(wakefd_);
    throw SetupError(from_errno(err), "soft RDMA fabric: cannot create epoll/eventfd",
                     "raise the open-file limit (ulimit -n)");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake fd
  ::epoll_ctl(epfd_, EPOLL_CTL_ADD, wakefd_, &ev);
  if (options_.driven_engine) {
    // Timers wake whoever waits on the epoll fd: the attached threads.
    timerfd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timerfd_ < 0) {
      const int err = errno;
      ::close(wakefd_);
      ::close(epfd_);
      throw SetupError(from_errno(err), "soft RDMA fabric: cannot create the driven engine's timerfd",
                       "raise the open-file limit (ulimit -n)");
    }
    epoll_event tev{};
    tev.events = EPOLLIN;
    tev.data.u64 = kTimerTag;
    ::epoll_ctl(epfd_, EPOLL_CTL_ADD, timerfd_, &tev);
  }
  timer_heap_.reserve(1024);
  tx_pending_.reserve(256);
  now_ = Clock::now();
  std::promise<void> started;
  auto fut = started.get_future();
  thread_ = std::thread([this, &started] {
    ::pthread_setname_np(::pthread_self(), "soft-engine");  // the fabric's "HCA", in top and perf
    if (!options_.driven_engine) owner_.store(std::this_thread::get_id());  // for good
    started.set_value();
    if (options_.driven_engine)
      run_driven();
    else
      run();
  });
  fut.wait();
}

Engine::~Engine() {
  stop_.store(true);
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wakefd_, &one, sizeof one);
  {
    std::lock_guard lk(park_mu_);
    park_cv_.notify_all();
  }
  if (thread_.joinable()) {
    if (on_engine_thread())
      thread_.detach();  // cannot happen by construction; never join ourselves
    else
      thread_.join();
  }
  ::close(wakefd_);
  if (timerfd_ >= 0) ::close(timerfd_);
  ::close(epfd_);
}

void Engine::call(const std::function<void()>& fn) {
  if (on_engine_thread() || stop_.load()) {
    fn();
    return;
  }
  if (options_.driven_engine && drivers_.load(std::memory_order_seq_cst) > 0) {
    // Attached threads drive: run it here under the drive lock, then push
    // what it queued (and arm the rings: this thread will not poll them).
    lock_drive();
    now_ = Clock::now();
    fn();
    iterate(true, true);
    unlock_drive();
    if (redo_.load(std::memory_order_seq_cst) || doorbells_.load(std::memory_order_seq_cst) != nullptr)
      drive(true, true);
    // An attached caller's own CQ raised no event for what fn completed on
    // it (CqCore::push leaves that to the attached thread's next poll), and
    // a command (a QP to ERR, its receives flushed) comes from outside the
    // poll loop: ask for that poll, or the completions wait for the rescue.
    if (t_engine == this && t_kick != nullptr) t_kick(t_kick_arg);
    return;
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  {
    std::lock_guard lk(cmd_mu_);
    cmds_.emplace_back([&] {
      fn();
      std::lock_guard l2(mu);
      done = true;
      cv.notify_one();
    });
    cmds_waiting_.store(true, std::memory_order_seq_cst);
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wakefd_, &one, sizeof one);
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return done; });
}

void Engine::ring(QpCore* qp) noexcept {
  if (qp->doorbell_pending.exchange(true, std::memory_order_acq_rel)) return;
  QpCore* head = doorbells_.load(std::memory_order_relaxed);
  do {
    qp->next_doorbell.store(head, std::memory_order_relaxed);
  } while (!doorbells_.compare_exchange_weak(head, qp, std::memory_order_seq_cst,
                                             std::memory_order_relaxed));
  if (options_.driven_engine) {
    if (t_engine == this) {  // an attached thread: it drives soon
      t_kick(t_kick_arg);
      return;
    }
    if (drivers_.load(std::memory_order_seq_cst) > 0) {
      // A driver holding the lock sees the doorbell when it lets go (drive());
      // otherwise wake the attached threads through the epoll fd.
      if (!driving_.load(std::memory_order_seq_cst)) {
        const std::uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(wakefd_, &one, sizeof one);
      }
      return;
    }
  }
  if (sleeping_.load(std::memory_order_seq_cst)) {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wakefd_, &one, sizeof one);
  }
}

// ------------------------------------------------------------- driven mode
//
// The engine's work (doorbells, links, timers, commands) runs on whichever
// thread holds the drive lock: an attached thread (an RDMA worker) when it
// polls its CQ, when the epoll fd it waits on becomes readable, and before it
// sleeps; or the engine thread, which stands in only while no thread is
// attached. A thread that finds the lock taken leaves its round to the holder
// (redo_), which looks again after it lets go: with every flag seq_cst, either
// the holder sees the request or the requester sees the lock free.

void Engine::lock_drive() noexcept {
  for (unsigned spins = 0; driving_.exchange(true, std::memory_order_seq_cst); ++spins)
    if (spins > 64) std::this_thread::yield();
  owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
}

void Engine::unlock_drive() noexcept {
  owner_.store(std::thread::id{}, std::memory_order_relaxed);
  driving_.store(false, std::memory_order_seq_cst);
  if (lock_waiters_.load(std::memory_order_seq_cst) != 0) driving_.notify_one();
}

const CqCore* Engine::attached_cq() noexcept { return t_cq; }

void Engine::attach(bool on, void (*kick)(void*), void* arg, const CqCore* cq) noexcept {
  if (!options_.driven_engine) return;
  if (on) {
    if (t_engine == this) return;
    if (cq != nullptr && cq->domain_fd() >= 0) {
      lock_drive();
      set_domain_attached(cq->domain_fd(), true);
      unlock_drive();
    }
    t_engine = this;
    t_kick = kick;
    t_kick_arg = arg;
    t_cq = cq;
    drivers_.fetch_add(1, std::memory_order_seq_cst);
    return;
  }
  if (t_engine != this) return;
  if (t_cq != nullptr && t_cq->domain_fd() >= 0) {
    // Its links' events go back to whoever polls the engine's epoll fd.
    lock_drive();
    set_domain_attached(t_cq->domain_fd(), false);
    unlock_drive();
  }
  t_engine = nullptr;
  t_kick = nullptr;
  t_kick_arg = nullptr;
  t_cq = nullptr;
  // Before it leaves, the thread arms what it polled (the engine thread or
  // another driver is woken by the rings from now on).
  drive(true, true);
  if (drivers_.fetch_sub(1, std::memory_order_seq_cst) == 1) {
    std::lock_guard lk(park_mu_);
    park_cv_.notify_all();
  }
}

bool Engine::try_lock_drive(bool wait) noexcept {
  if (!driving_.exchange(true, std::memory_order_seq_cst)) return true;
  if (!wait || on_engine_thread()) return false;  // never wait for ourselves
  // A thread woken by its domain waits for the lock rather than leave its
  // events to the holder: left to the holder, its domain stays readable and
  // wakes it again and again, and on a busy machine that loop takes the CPU
  // from the very holder it waits for. A short spin (rounds are short), then
  // it sleeps until the holder lets go (unlock_drive wakes it).
  for (int i = 0; i < 100; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (!driving_.load(std::memory_order_relaxed) && !driving_.exchange(true, std::memory_order_seq_cst)) return true;
  }
  lock_waiters_.fetch_add(1, std::memory_order_seq_cst);
  while (driving_.exchange(true, std::memory_order_seq_cst)) driving_.wait(true, std::memory_order_seq_cst);
  lock_waiters_.fetch_sub(1, std::memory_order_seq_cst);
  return true;
}

bool Engine::drive(bool io, bool before_sleep) noexcept {
  bool more = false;
  const bool own_domain = t_engine == this && t_cq != nullptr && t_cq->domain_fd() >= 0;
  for (int round = 0; round < 8; ++round) {
    if (!try_lock_drive(io && own_domain && round == 0)) {
      if (before_sleep) redo_arm_.store(true, std::memory_order_seq_cst);
      // Our domain's events (the edge that woke us) are the holder's to take:
      // it polls only its own domain otherwise.
      if (io && own_domain) want_domain(t_cq->domain_fd());
      redo_.store(true, std::memory_order_seq_cst);
      if (driving_.load(std::memory_order_seq_cst)) return more;  // the holder runs it
      continue;  // let go meanwhile: take it ourselves
    }
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    Counters::bump(t_backstop ? counters_.backstop_rounds
                   : t_standin ? counters_.standin_rounds
                               : counters_.driven_rounds);
    const bool arm = before_sleep || redo_arm_.exchange(false, std::memory_order_seq_cst);
    more = iterate(io, arm);
    unlock_drive();
    // Another thread asked for a round while we held the lock: it may have
    // been woken by the epoll fd (an edge it consumed), so the round polls it.
    if (!redo_.exchange(false, std::memory_order_seq_cst) &&
        doorbells_.load(std::memory_order_seq_cst) == nullptr)
      return more;
    io = true;
  }
  return true;
}

bool Engine::iterate(bool io, bool arm) {
  now_ = Clock::now();
  flush_tx();
  if (cmds_waiting_.load(std::memory_order_seq_cst)) run_commands();
  drain_doorbells();
  run_timers();
  poll_shm();
  if (io) {
    // An attached thread polls its CQ's domain (which holds the engine's
    // epoll fd); anyone else the engine's (which holds the orphaned domains).
    const int ep = t_engine == this && t_cq != nullptr && t_cq->domain_fd() >= 0 ? t_cq->domain_fd() : epfd_;
    poll_epoll(ep);
    polled_domain(ep);
    // The domains of threads that found the lock taken (drive()).
    if (domains_wanted_.load(std::memory_order_seq_cst)) {
      std::vector<int> eps;
      {
        std::lock_guard lk(domains_mu_);
        eps.swap(domains_want_);
        domains_wanted_.store(false, std::memory_order_seq_cst);
      }
      for (const int d : eps)
        if (d != ep) {
          poll_epoll(d);
          polled_domain(d);
        }
    }
    // A backstop round serves the domains left readable and unpolled.
    if (t_backstop)
      for (AttachedDomain& d : attached_domains_)
        if (d.stale) {
          d.stale = false;
          poll_epoll(d.fd);
          d.polled = now_;
        }
  }
  flush_tx();
  for (auto& h : retired_) h.reset();
  retired_.clear();
  bool more = doorbells_.load(std::memory_order_seq_cst) != nullptr || !tx_pending_.empty();
  if (arm) more = arm_shm() || more;
  rearm_timerfd();
  return more;
}

void Engine::rearm_timerfd() noexcept {
  if (timerfd_ < 0 || timer_heap_.empty()) return;
  const TimePoint front = timer_heap_.front().when;
  if (front >= timer_armed_ && timer_armed_ > now_) return;  // an earlier (or this) deadline is set
  timer_armed_ = front;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(front.time_since_epoch()).count();
  itimerspec its{};
  its.it_value.tv_sec = ns / 1000000000;
  its.it_value.tv_nsec = ns % 1000000000;
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;  // 0 disarms
  ::timerfd_settime(timerfd_, TFD_TIMER_ABSTIME, &its, nullptr);
}

void Engine::run_driven() {
  t_standin = true;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (drivers_.load(std::memory_order_seq_cst) > 0) {
      // Attached threads wait on their domains and drive: stay out of their
      // way, but look every kBackstop whether any of them still does.
      {
        std::unique_lock lk(park_mu_);
        park_cv_.wait_for(lk, kBackstop, [this] {
          return stop_.load() || drivers_.load(std::memory_order_seq_cst) == 0;
        });
      }
      if (!stop_.load() && drivers_.load(std::memory_order_seq_cst) > 0) backstop();
      continue;
    }
    if (drive(true, true)) continue;
    sleeping_.store(true, std::memory_order_seq_cst);
    // stop_ again: the destructor's wake-up may have been read by the drive above.
    if (doorbells_.load(std::memory_order_seq_cst) != nullptr || cmds_waiting_.load(std::memory_order_seq_cst) ||
        drivers_.load(std::memory_order_seq_cst) > 0 || stop_.load(std::memory_order_seq_cst)) {
      sleeping_.store(false, std::memory_order_seq_cst);
      continue;
    }
    pollfd p{epfd_, POLLIN, 0};
    ::poll(&p, 1, -1);  // timers are in the epoll set (timerfd)
    sleeping_.store(false, std::memory_order_seq_cst);
  }
  lock_drive();
  run_commands();
  for (auto& h : retired_) h.reset();
  retired_.clear();
  for (Handler* h : handlers_) delete h;
  handlers_.clear();
  unlock_drive();
}

// The backstop. An attached thread takes its domain's events only when it
// is woken for them or goes to sleep; a worker busy in its own code (a long
// handler, a sanitizer build generating test data) takes none, and other
// threads' rounds poll their own domains. The links of its QPs then go
// unserved, and their peers, getting no ACK, fault with retry_exceeded after
// the retry window (8 x 67 ms by default): seen under ASan, where one test's
// worker built frames for 0.6 s. An adapter answers regardless of its
// host's threads, so the engine thread does too: every kBackstop it takes
// the drive lock if it is free, and runs one round over the domains that
// have stayed readable for kBackstop with no round polling them.
// Completions it pushes onto an armed CQ raise its event (CqCore::push: not
// the attached thread), so a sleeping worker still wakes for them; a busy
// one polls them when it returns. The cost while threads are attached: one timed wake-up of the
// engine thread per kBackstop, and a poll() of each domain.
void Engine::backstop() {
  if (!try_lock_drive(false)) return;  // a thread drives right now
  owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  t_backstop = true;
  const TimePoint now = Clock::now();
  // A domain is stale when it has been readable since an earlier look, at
  // least kBackstop ago, with no round polling it in between. (A domain
  // idle or served by its worker is left alone: a busy worker's rings are
  // read by any round, and a readable domain is the worker's to take.)
  bool stale = false;
  for (AttachedDomain& d : attached_domains_) {
    pollfd p{d.fd, POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) {
      d.ready_since = TimePoint{};
      continue;
    }
    if (d.ready_since == TimePoint{} || d.polled >= d.ready_since) {
      d.ready_since = now;  // first seen readable (or polled since): look again later
      continue;
    }
    if (now - d.ready_since >= kBackstop) stale = d.stale = true;
  }
  if (stale) {
    Counters::bump(counters_.backstop_rounds);
    iterate(true, true);
  }
  unlock_drive();
  // A thread that found the lock taken meanwhile left its round to us.
  if (redo_.exchange(false, std::memory_order_seq_cst) || doorbells_.load(std::memory_order_seq_cst) != nullptr)
    drive(true, true);
  t_backstop = false;
}

void Engine::polled_domain(int ep) noexcept {
  for (AttachedDomain& d : attached_domains_)
    if (d.fd == ep) {
      d.polled = now_;
      return;
    }
}

namespace {
epoll_event handler_event(Handler* h, std::uint32_t events, bool wake) noexcept {
  epoll_event ev{};
  if (wake) {
    ev.events = EPOLLIN | EPOLLET;
    // Handlers are at least 2-aligned: the low bit tells on_wake from on_io.
    ev.data.u64 = reinterpret_cast<std::uintptr_t>(h) | 1u;
  } else {
    ev.events = events;
    ev.data.ptr = h;
  }
  return ev;
}
}  // namespace

std::error_code Engine::add_fd(int fd, Handler* h, std::uint32_t events, int ep) noexcept {
  epoll_event ev = handler_event(h, events, false);
  if (::epoll_ctl(ep < 0 ? epfd_ : ep, EPOLL_CTL_ADD, fd, &ev) != 0) return from_errno(errno);
  handlers_.insert(h);
  return {};
}

std::error_code Engine::add_wake_fd(int fd, Handler* h, int ep) noexcept {
  epoll_event ev = handler_event(h, 0, true);
  if (::epoll_ctl(ep < 0 ? epfd_ : ep, EPOLL_CTL_ADD, fd, &ev) != 0) return from_errno(errno);
  handlers_.insert(h);
  return {};
}

std::error_code Engine::move_fd(int fd, Handler* h, std::uint32_t events, bool wake, int from, int to) noexcept {
  if (from < 0) from = epfd_;
  if (to < 0) to = epfd_;
  if (from == to) return {};
  ::epoll_ctl(from, EPOLL_CTL_DEL, fd, nullptr);
  epoll_event ev = handler_event(h, events, wake);
  // ADD reports a readiness the fd already has, so no edge is lost between.
  if (::epoll_ctl(to, EPOLL_CTL_ADD, fd, &ev) != 0) return from_errno(errno);
  return {};
}

int Engine::open_domain() noexcept {
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return -1;
  // Orphaned until its CQ is attached: the engine's epoll fd holds it
  // (level-triggered: reported until poll_epoll() takes its events).
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = nested_tag(ep);
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, ep, &ev) != 0) {
    const int err = errno;
    ::close(ep);
    errno = err;
    return -1;
  }
  return ep;
}

void Engine::set_domain_attached(int domain, bool attached) noexcept {
  // epoll refuses a loop (ELOOP): take one nesting out before the other.
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (attached)
    attached_domains_.push_back({domain, now_});
  else
    std::erase_if(attached_domains_, [domain](const AttachedDomain& d) { return d.fd == domain; });
  if (attached) {
    ::epoll_ctl(epfd_, EPOLL_CTL_DEL, domain, nullptr);
    ev.data.u64 = nested_tag(epfd_);
    if (::epoll_ctl(domain, EPOLL_CTL_ADD, epfd_, &ev) != 0)
      SIPHON_LOG(rdma, 0, "soft: cannot nest the engine's epoll fd in a progress domain: errno {}", errno);
  } else {
    ::epoll_ctl(domain, EPOLL_CTL_DEL, epfd_, nullptr);
    ev.data.u64 = nested_tag(domain);
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, domain, &ev) != 0)
      SIPHON_LOG(rdma, 0, "soft: cannot nest a progress domain in the engine's epoll fd: errno {}", errno);
  }
}

void Engine::want_domain(int ep) noexcept {
  std::lock_guard lk(domains_mu_);
  if (std::find(domains_want_.begin(), domains_want_.end(), ep) == domains_want_.end()) domains_want_.push_back(ep);
  domains_wanted_.store(true, std::memory_order_seq_cst);
}

void Engine::poll_epoll(int ep) {
  // A domain's round: its own fd (depth 1), the engine's nested in it (2),
  // an orphaned domain nested in that (3); never deeper.
  if (nest_depth_ >= 3) return;
  ++nest_depth_;
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  const timespec zero{};
  for (int k = 0; k < 16; ++k) {
    const int n = ::epoll_pwait2(ep, events, kMaxEvents, &zero, nullptr);
    if (n <= 0) break;
    now_ = Clock::now();
    dispatch(events, n);
    drain_doorbells();
    if (n < kMaxEvents) break;
  }
  --nest_depth_;
}

void Engine::shm_hot(Link* link) {
  if (link->shm_hot) return;
  link->shm_hot = true;
  shm_hot_.push_back(link);
}

void Engine::shm_forget(Link* link) {
  if (!link->shm_hot) return;
  link->shm_hot = false;
  shm_hot_.erase(std::find(shm_hot_.begin(), shm_hot_.end(), link));
}

void Engine::poll_shm() {
  // drain_ring() may close a link (shm_forget edits the vector): by index.
  for (std::size_t i = 0; i < shm_hot_.size(); ++i) shm_hot_[i]->drain_ring();
}

bool Engine::arm_shm() {
  bool work = false;
  std::size_t keep = 0;
  for (Link* l : shm_hot_) {
    if (!l->arm_ring()) {
      work = true;
      shm_hot_[keep++] = l;  // bytes arrived: polled at the next iteration
    } else {
      l->shm_hot = false;  // armed: its eventfd brings it back
    }
  }
  shm_hot_.resize(keep);
  return work;
}

void Engine::del_fd(int fd, int ep) noexcept { ::epoll_ctl(ep < 0 ? epfd_ : ep, EPOLL_CTL_DEL, fd, nullptr); }

void Engine::set_link_down(bool down) {
  link_down_.store(down, std::memory_order_release);
  if (!down) return;
  // Closing a link calls its QP or CM back, which may close others (retired,
  // so still valid here) but opens none while the link is down.
  std::vector<Link*> open;
  for (Handler* h : handlers_)
    if (auto* l = dynamic_cast<Link*>(h); l != nullptr && l->state != Link::State::closed) open.push_back(l);
  for (Link* l : open) {
    if (l->state == Link::State::closed) continue;
    l->error = ENETDOWN;
    l->close(true);
  }
}

void Engine::retire(std::unique_ptr<Handler> h) {
  h->retired = true;
  handlers_.erase(h.get());
  retired_.push_back(std::move(h));
}

void Engine::add_timer_client(TimerClient* c) {
  c->timer_id = next_timer_id_++;
  timer_clients_.emplace(c->timer_id, c);
}

void Engine::remove_timer_client(TimerClient* c) {
  timer_clients_.erase(c->timer_id);
  c->timer_id = 0;
}

void Engine::schedule(TimerClient* c, TimePoint when) {
  if (c->timer_id == 0) return;
  timer_heap_.push_back({when, c->timer_id});
  std::push_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>{});
}

void Engine::want_tx(Link* link) {
  if (link->tx_queued || link->state == Link::State::closed) return;
  link->tx_queued = true;
  tx_pending_.push_back(link);
}

void Engine::drain_doorbells() {
  QpCore* qp = doorbells_.exchange(nullptr, std::memory_order_seq_cst);
  // The stack is LIFO; order between QPs does not matter.
  while (qp != nullptr) {
    QpCore* next = qp->next_doorbell.load(std::memory_order_relaxed);
    qp->doorbell_pending.store(false, std::memory_order_seq_cst);
    qp->on_doorbell();
    qp = next;
  }
}

void Engine::run_commands() {
  std::deque<std::function<void()>> cmds;
  {
    std::lock_guard lk(cmd_mu_);
    cmds.swap(cmds_);
    cmds_waiting_.store(false, std::memory_order_relaxed);
  }
  for (auto& c : cmds) c();
}

void Engine::run_timers() {
  while (!timer_heap_.empty() && timer_heap_.front().when <= now_) {
    std::pop_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>{});
    const auto id = timer_heap_.back().id;
    timer_heap_.pop_back();
    auto it = timer_clients_.find(id);
    if (it != timer_clients_.end()) it->second->on_timer(now_);
  }
}

void Engine::flush_tx() {
  // Links may be added while flushing (a response generated by a fill).
  for (std::size_t i = 0; i < tx_pending_.size(); ++i) {
    Link* l = tx_pending_[i];
    l->tx_queued = false;
    if (l->state == Link::State::open) l->flush();
  }
  tx_pending_.clear();
}

void Engine::run() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  TimePoint spin_until{};
  while (!stop_.load(std::memory_order_relaxed)) {
    now_ = Clock::now();
    // The responses that the last events queued go out before a command
    // runs: a user thread that saw a completion (and then destroys its QP,
    // say) must not keep the ACK of the request that completion came from
    // from the requester, as an adapter sends the ACK before the CQE.
    flush_tx();
    run_commands();
    drain_doorbells();
    run_timers();
    poll_shm();
    flush_tx();
    for (auto& h : retired_) h.reset();
    retired_.clear();

    // How long may we sleep?
    long timeout_ns = -1;
    if (!timer_heap_.empty()) {
      const auto d = timer_heap_.front().when - Clock::now();
      timeout_ns = std::max<long>(0, static_cast<long>(
                                         std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()));
    }
    const bool spinning = options_.engine_spin_us != 0 && Clock::now() < spin_until;
    if (spinning) timeout_ns = 0;
    if (timeout_ns != 0) {
      sleeping_.store(true, std::memory_order_seq_cst);
      bool work = doorbells_.load(std::memory_order_seq_cst) != nullptr;
      if (!work) {
        std::lock_guard lk(cmd_mu_);
        work = !cmds_.empty();
      }
      if (!work) work = arm_shm();
      if (work) timeout_ns = 0;
    }
    timespec ts{};
    timespec* tsp = nullptr;
    if (timeout_ns >= 0) {
      ts.tv_sec = timeout_ns / 1000000000;
      ts.tv_nsec = timeout_ns % 1000000000;
      tsp = &ts;
    }
    const int n = ::epoll_pwait2(epfd_, events, kMaxEvents, tsp, nullptr);
    sleeping_.store(false, std::memory_order_seq_cst);
    now_ = Clock::now();
    if (n < 0) {
      if (errno != EINTR) SIPHON_LOG(rdma, 0, "soft: epoll_pwait2 failed: errno {}", errno);
      continue;
    }
    if (n > 0 && options_.engine_spin_us != 0)
      spin_until = now_ + std::chrono::microseconds(options_.engine_spin_us);
    dispatch(events, n);
  }
  // Shutdown: run what is queued so no caller waits forever, then free every
  // link and listener still registered.
  run_commands();
  for (auto& h : retired_) h.reset();
  retired_.clear();
  for (Handler* h : handlers_) delete h;
  handlers_.clear();
}

void Engine::dispatch(const epoll_event* events, int n) {
  for (int i = 0; i < n; ++i) {
    const std::uint64_t raw = events[i].data.u64;
    if (raw == kTimerTag) {
      std::uint64_t v;
      [[maybe_unused]] auto r = ::read(timerfd_, &v, sizeof v);
      timer_armed_ = TimePoint::max();
      run_timers();
      continue;
    }
    if ((raw & 0xFF) == kNestedTag) {
      poll_epoll(static_cast<int>(raw >> 8));
      continue;
    }
    auto* h = reinterpret_cast<Handler*>(static_cast<std::uintptr_t>(raw & ~std::uint64_t{1}));
    if (h == nullptr) {
      std::uint64_t v;
      [[maybe_unused]] auto r = ::read(wakefd_, &v, sizeof v);
      continue;
    }
    if (h->retired) continue;
    if ((raw & 1) != 0)
      h->on_wake();
    else
      h->on_io(events[i].events);
  }
}

// ------------------------------------------------------------- MrTable

std::uint32_t MrTable::claim_locked(std::uint32_t& slot, std::error_code& ec) {
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    if (slots_.size() >= limit_ || slots_.size() >= (1u << 23)) {
      ec = errc::resource_exhausted;
      return 0;
    }
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  ++gen_;
  ec.clear();
  return ((slot + 1) << 8) | gen_;
}

std::uint32_t MrTable::add(std::uint64_t addr, std::uint64_t len, std::uint32_t access,
                           std::uint32_t pd, std::error_code& ec) {
  std::lock_guard lk(mu);
  std::uint32_t slot = 0;
  const std::uint32_t key = claim_locked(slot, ec);
  if (key == 0) return 0;
  slots_[slot] = MrEntry{addr, len, access, pd, key, true};
  return key;
}

void MrTable::remove(std::uint32_t key) noexcept {
  std::lock_guard lk(mu);
  const std::uint32_t slot = (key >> 8) - 1;
  if (slot >= slots_.size() || slots_[slot].key != key || !slots_[slot].live) return;
  slots_[slot].live = false;
  free_.push_back(slot);
}

std::uint32_t MrTable::add_mw(std::uint32_t pd, std::error_code& ec) {
  std::lock_guard lk(mu);
  std::uint32_t slot = 0;
  const std::uint32_t key = claim_locked(slot, ec);
  if (key == 0) return 0;
  slots_[slot] = MrEntry{};
  slots_[slot].pd = pd;
  slots_[slot].key = key;
  slots_[slot].live = true;
  slots_[slot].mw = true;
  return key;
}

void MrTable::remove_mw(std::uint32_t index) noexcept {
  std::lock_guard lk(mu);
  const std::uint32_t slot = index - 1;
  if (index == 0 || slot >= slots_.size() || !slots_[slot].live || !slots_[slot].mw) return;
  slots_[slot] = MrEntry{};
  free_.push_back(slot);
}

bool MrTable::bind_mw(std::uint32_t cur_key, std::uint32_t new_key, std::uint32_t pd, std::uint32_t qpn,
                      std::uint32_t mr_key, std::uint64_t addr, std::uint64_t len,
                      std::uint32_t access) noexcept {
  std::lock_guard lk(mu);
  const std::uint32_t slot = (new_key >> 8) - 1;
  if ((new_key >> 8) == 0 || slot >= slots_.size()) return false;
  MrEntry& w = slots_[slot];
  if (!w.live || !w.mw || w.bound || w.pd != pd || w.key != cur_key) return false;
  if ((access & ~std::uint32_t{kRemoteRead | kRemoteWrite}) != 0) return false;
  const MrEntry* mr = check(mr_key, pd, kMwBind, addr, len);
  if (mr == nullptr || mr->mw) return false;
  if ((access & kRemoteWrite) != 0 && (mr->access & kLocalWrite) == 0) return false;
  w.bound = true;
  w.key = new_key;
  w.addr = addr;
  w.len = len;
  w.access = access;
  w.qpn = qpn;
  w.parent = mr_key;
  return true;
}

bool MrTable::invalidate(std::uint32_t key, std::uint32_t pd) noexcept {
  std::lock_guard lk(mu);
  const std::uint32_t slot = (key >> 8) - 1;
  if ((key >> 8) == 0 || slot >= slots_.size()) return false;
  MrEntry& w = slots_[slot];
  if (!w.live || !w.mw || !w.bound || w.key != key || w.pd != pd) return false;
  w.bound = false;
  w.access = 0;
  w.qpn = 0;
  return true;
}

const MrEntry* MrTable::check(std::uint32_t key, std::uint32_t pd, std::uint32_t need,
                              std::uint64_t addr, std::uint64_t len,
                              std::uint32_t qpn) const noexcept {
  const std::uint32_t slot = (key >> 8) - 1;
  if ((key >> 8) == 0 || slot >= slots_.size()) return nullptr;
  const MrEntry& e = slots_[slot];
  if (!e.live || e.key != key || e.pd != pd || (e.access & need) != need) return nullptr;
  if (e.mw) {
    // A type-2 window: remote requests on the QP it is bound to, and only
    // while its MR is still registered.
    if (!e.bound || qpn == kLocalAccess || e.qpn != qpn) return nullptr;
    const std::uint32_t ps = (e.parent >> 8) - 1;
    if (ps >= slots_.size() || !slots_[ps].live || slots_[ps].key != e.parent) return nullptr;
  }
  if (addr < e.addr || len > e.len || addr - e.addr > e.len - len) return nullptr;
  return &e;
}

// ------------------------------------------------------------- CqCore

CqCore::CqCore(std::uint32_t capacity, Counters& counters, const FaultPlan& faults, std::error_code& ec)
    : counters_(counters),
      lost_event_(faults.lost_cq_event),
      late_event_(faults.late_cq_event),
      lost_rng_(faults.seed ^ 0xC0FFEE5EEDull) {
  cap_ = 1;
  while (cap_ < capacity) cap_ <<= 1;
  mask_ = cap_ - 1;
  ring_.reset(new (std::nothrow) Wc[cap_]);
  if (!ring_) {
    ec = errc::out_of_memory;
    return;
  }
  efd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd_ < 0) ec = from_errno(errno);
}

CqCore::~CqCore() {
  if (efd_ >= 0) ::close(efd_);
  if (domain_ >= 0) ::close(domain_);  // leaves the engine's epoll fd with its last descriptor
}

bool CqCore::push(const Wc& wc, bool solicited) noexcept {
  const auto t = tail_.load(std::memory_order_relaxed);
  if (t - head_.load(std::memory_order_acquire) >= cap_) {
    Counters::bump(counters_.cq_overruns);
    return false;
  }
  ring_[t & mask_] = wc;
  tail_.store(t + 1, std::memory_order_seq_cst);
  const int a = armed_.load(std::memory_order_seq_cst);
  if (a == 1 || (a == 2 && (solicited || wc.status != WcStatus::success))) {
    if (t_cq == this) {  // driven: the attached thread polls after it drives
      armed_.store(0, std::memory_order_seq_cst);
      return true;
    }
    if (armed_.exchange(0, std::memory_order_seq_cst) != 0) {
      if (lost_rng_.fire(lost_event_)) {
        Counters::bump(counters_.cq_events_lost);  // disarmed, no event
      } else {
        if (late_event_.count() > 0) {  // the completion is visible, its event not yet
          Counters::bump(counters_.cq_events_late);
          std::this_thread::sleep_for(late_event_);
        }
        notify();
      }
    }
  }
  return true;
}

void CqCore::notify() noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(efd_, &one, sizeof one);
}

std::size_t CqCore::poll(std::span<Wc> out) noexcept {
  const auto h = head_.load(std::memory_order_relaxed);
  const auto t = tail_.load(std::memory_order_acquire);
  const std::size_t n = std::min<std::uint64_t>(t - h, out.size());
  for (std::size_t i = 0; i < n; ++i) out[i] = ring_[(h + i) & mask_];
  if (n != 0) head_.store(h + n, std::memory_order_release);
  return n;
}

void CqCore::arm(bool solicited_only) noexcept {
  armed_.store(solicited_only ? 2 : 1, std::memory_order_seq_cst);
  // Pairs with push(): either the engine sees the arm, or the poll that
  // follows this arm sees the completion.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

std::size_t CqCore::consume_events() noexcept {
  std::uint64_t v = 0;
  if (::read(efd_, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return 0;
  return static_cast<std::size_t>(v);
}

// ------------------------------------------------------------- RecvRing

RecvRing::RecvRing(std::uint32_t capacity, std::uint32_t max_sge)
    : cap_(capacity), max_sge_(max_sge), slots_(new Slot[std::max(capacity, 1u)]),
      sges_(new Sge[static_cast<std::size_t>(std::max(capacity, 1u)) * std::max(max_sge, 1u)]) {}

std::error_code RecvRing::post(std::span<const RecvWr> wrs, std::size_t* bad, Rng* faults,
                               const FaultRate* fail, Counters* counters) noexcept {
  auto p = prod_.load(std::memory_order_relaxed);
  const auto c = cons_.load(std::memory_order_acquire);
  std::size_t i = 0;
  std::error_code ec;
  for (; i < wrs.size(); ++i) {
    const RecvWr& wr = wrs[i];
    if (wr.num_sge > max_sge_ || (wr.num_sge != 0 && wr.sg_list == nullptr)) {
      ec = errc::invalid_argument;
      break;
    }
    if (p - c >= cap_) {
      ec = errc::queue_full;
      break;
    }
    if (faults != nullptr && faults->fire(*fail)) {
      Counters::bump(counters->failed_posts);
      ec = errc::injected_fault;
      break;
    }
    Slot& s = slots_[p % cap_];
    s.wr_id = wr.wr_id;
    s.num_sge = wr.num_sge;
    Sge* dst = &sges_[(p % cap_) * static_cast<std::size_t>(max_sge_)];
    for (std::uint32_t k = 0; k < wr.num_sge; ++k) dst[k] = wr.sg_list[k];
    ++p;
  }
  prod_.store(p, std::memory_order_seq_cst);
  if (ec && bad != nullptr) *bad = i;
  return ec;
}

bool RecvRing::pop(RecvWork& out) noexcept {
  const auto c = cons_.load(std::memory_order_relaxed);
  if (c == prod_.load(std::memory_order_acquire)) return false;
  const Slot& s = slots_[c % cap_];
  out.valid = true;
  out.wr_id = s.wr_id;
  out.num_sge = s.num_sge;
  const Sge* src = &sges_[(c % cap_) * static_cast<std::size_t>(max_sge_)];
  for (std::uint32_t k = 0; k < s.num_sge; ++k) out.sges[k] = src[k];
  cons_.store(c + 1, std::memory_order_release);
  return true;
}

void RecvRing::clear() noexcept {
  cons_.store(prod_.load(std::memory_order_acquire), std::memory_order_release);
}

// ------------------------------------------------------------- ByteRing

void ByteRing::put(const void* p, std::size_t n) noexcept {
  const auto* src = static_cast<const std::uint8_t*>(p);
  while (n != 0) {
    auto dst = reserve(n);
    std::memcpy(dst.data(), src, dst.size());
    commit(dst.size());
    src += dst.size();
    n -= dst.size();
  }
}

std::span<std::uint8_t> ByteRing::reserve(std::size_t n) noexcept {
  const std::size_t off = static_cast<std::size_t>(tail_->load(std::memory_order_relaxed) % cap_);
  const std::size_t contiguous = std::min(cap_ - off, space());
  return {buf_ + off, std::min(n, contiguous)};
}

std::size_t ByteRing::peek(std::span<const std::uint8_t> out[2]) const noexcept {
  const std::size_t sz = size();
  if (sz == 0 || sz > cap_) return 0;
  const std::size_t off = static_cast<std::size_t>(head_->load(std::memory_order_relaxed) % cap_);
  const std::size_t first = std::min(sz, cap_ - off);
  out[0] = {buf_ + off, first};
  if (first == sz) return 1;
  out[1] = {buf_, sz - first};
  return 2;
}

ShmLink::~ShmLink() {
  if (base != nullptr) ::munmap(base, size);
  for (int fd : {memfd, my_efd, peer_efd})
    if (fd >= 0) ::close(fd);
}

}  // namespace siphon::rdma::soft::detail

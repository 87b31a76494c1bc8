// TCP links of the soft fabric: non-blocking sockets, framing, payload
// streaming into and out of registered memory, and the QPN-block listeners.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/soft/core.h"

namespace siphon::rdma::soft::detail {

namespace {

constexpr std::uint32_t kLinkEvents = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
constexpr std::size_t kMaxControlPayload = 4096;

std::uint32_t payload_len(const wire::Header& h) noexcept {
  const auto t = static_cast<wire::Type>(h.type);
  switch (t) {
    case wire::Type::read_resp:
      return (h.flags & wire::kSameHost) != 0 ? 0 : h.len.value();
    case wire::Type::send:
    case wire::Type::write:
    case wire::Type::hello:
    case wire::Type::cm_req:
    case wire::Type::cm_rep:
    case wire::Type::cm_rej:
      return h.len.value();
    default:
      return 0;
  }
}

bool is_control(wire::Type t) noexcept {
  return t == wire::Type::hello || t == wire::Type::cm_req || t == wire::Type::cm_rep ||
         t == wire::Type::cm_rej;
}

// What a responder's HELLO_ACK points a requester at to prove that the two
// are processes of one host that may read each other's memory: the requester
// reads it with process_vm_readv and compares. Random per process, so a
// process of another host (or pid namespace) that happens to have the pid
// does not pass.
const std::uint64_t* same_host_probe() noexcept {
  static const std::uint64_t value = [] {
    std::uint64_t v = 0;
    if (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v) || v == 0)
      v = static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
          (static_cast<std::uint64_t>(::getpid()) << 32) ^ 0x5348484Full;
    return v;
  }();
  return &value;
}

void tune_socket(int fd) noexcept {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

int connect_nb(const NetAddress& to, std::error_code& ec) noexcept {
  const int fd = ::socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ec = from_errno(errno);
    return -1;
  }
  tune_socket(fd);
  if (::connect(fd, to.sockaddr_ptr(), to.sockaddr_len()) != 0 && errno != EINPROGRESS) {
    ec = from_errno(errno);
    ::close(fd);
    return -1;
  }
  ec.clear();
  return fd;
}

int listen_on(const NetAddress& at, int backlog, std::error_code& ec) noexcept {
  const int fd = ::socket(at.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ec = from_errno(errno);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (at.is_ipv6()) {
    const int zero = 0;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  }
  if (::bind(fd, at.sockaddr_ptr(), at.sockaddr_len()) != 0 || ::listen(fd, backlog) != 0) {
    ec = from_errno(errno);
    ::close(fd);
    return -1;
  }
  ec.clear();
  return fd;
}

NetAddress sock_name(int fd, bool peer) noexcept {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  const int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                     : ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (r != 0) return {};
  return NetAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}

// ------------------------------------------------------------- Listener

Listener::Listener(Engine& e, int f, std::function<void(int)> on_accept)
    : engine(e), fd(f), on_accept_(std::move(on_accept)) {}

Listener::~Listener() {
  if (fd >= 0) ::close(fd);
}

void Listener::on_io(std::uint32_t) {
  for (int i = 0; i < 64; ++i) {
    const int c = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) return;  // EAGAIN, or a transient error: try at the next event
    if (engine.link_down()) {
      // The cable is out: the peer's connect ends in a reset, not in a link.
      const linger reset{1, 0};
      ::setsockopt(c, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
      ::close(c);
      continue;
    }
    tune_socket(c);
    on_accept_(c);
  }
}

void Listener::close() {
  if (fd < 0) return;
  engine.del_fd(fd);
  ::close(fd);
  fd = -1;
  engine.retire(std::unique_ptr<Handler>(this));
}

QpCore* DeviceCore::find_qp(std::uint32_t qpn) const noexcept {
  const std::uint16_t port = static_cast<std::uint16_t>(qpn >> 8);
  for (const auto& b : blocks)
    if (b->port == port) return b->qps[qpn & 0xFF];
  return nullptr;
}

// ------------------------------------------------------------- Link

Link::Link(Engine& e, DeviceCore* d, Kind k, int f, bool connecting, std::size_t bufsize)
    : engine(e), dev(d), kind(k), state(connecting ? State::connecting : State::open), fd(f),
      tx_(bufsize), rx_(new std::uint8_t[bufsize]), rx_cap_(bufsize) {
  small_.reserve(256);
  // Each link draws its corruption from its own stream: (seed, link number).
  const std::uint64_t serial = engine.counters().links_opened.fetch_add(1, std::memory_order_relaxed);
  corrupt_rng_ = Rng(engine.options().faults.seed ^ 0x436F727275707400ull ^ (serial * 0xD1B54A32D192ED03ull));
}

Link::~Link() {
  if (fd >= 0) ::close(fd);
}

std::error_code Link::register_fd() noexcept { return engine.add_fd(fd, this, kLinkEvents, home_ep); }

void Link::set_home(int ep) noexcept {
  if (ep == home_ep) return;
  if (state != State::closed) {
    if (fd >= 0) engine.move_fd(fd, this, kLinkEvents, false, home_ep, ep);
    if (shm_efd_registered_) engine.move_fd(shm_->my_efd, this, 0, true, home_ep, ep);
  }
  home_ep = ep;
}

void Link::on_io(std::uint32_t events) {
  if (state == State::connecting) {
    if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & EPOLLERR) != 0) {
      error = err != 0 ? err : ECONNREFUSED;
      close(true);
      return;
    }
    state = State::open;
    if (kind == Kind::cm && cm != nullptr) cm->on_link_connected(*this);
    if (state != State::open) return;
    engine.want_tx(this);
  }
  if ((events & EPOLLOUT) != 0 && want_write) {
    want_write = false;
    engine.want_tx(this);
  }
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) on_readable(events);
}

void Link::on_readable(std::uint32_t events) {
  const bool hangup = (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
  while (state == State::open) {
    // A same-host link's socket carries nothing after SHM_ON but its EOF.
    std::uint8_t scratch[64];
    std::uint8_t* buf = shm_on_ ? scratch : rx_.get();
    const std::size_t room = shm_on_ ? sizeof scratch : rx_cap_;
    const ssize_t n = ::read(fd, buf, room);
    if (n > 0) {
      feed(buf, static_cast<std::size_t>(n), false);
      // The switch to the rings happened inside that parse of rx_: its
      // buffer is free now, and the socket never needs it again.
      if (shm_on_ && rx_ != nullptr) rx_.reset();
      if (static_cast<std::size_t>(n) < room && !hangup) return;  // drained (see core.h)
      continue;
    }
    if (n == 0) {
      // What the peer wrote to the rings before it closed is read first, as
      // a socket would deliver it before its EOF.
      drain_ring();
      if (state != State::open) return;
      error = 0;
      close(true);
      return;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    if (errno == EINTR) continue;
    error = errno;
    close(true);
    return;
  }
}

void Link::protocol_error(const char* what) {
  SIPHON_LOG(rdma, 1, "soft: link protocol error ({}), closing (link kind {}, last header type {})", what,
             static_cast<int>(kind), static_cast<int>(hdr_.type));
  error = EPROTO;
  close(true);
}

void Link::feed(const std::uint8_t* p, std::size_t n, bool ring) {
  std::size_t pos = 0;
  while (state == State::open) {
    if (!in_msg_) {
      if (pos == n) return;
      if (shm_on_ && !ring) {
        protocol_error("bytes on the socket of a same-host link");
        return;
      }
      // A header may arrive in pieces (a ring wraps under it).
      const std::size_t take = std::min(sizeof hdr_ - hdr_have_, n - pos);
      std::memcpy(reinterpret_cast<std::uint8_t*>(&hdr_) + hdr_have_, p + pos, take);
      hdr_have_ += take;
      pos += take;
      if (hdr_have_ < sizeof hdr_) return;
      hdr_have_ = 0;
      if (!begin_message()) return;
    }
    if (rx_left_ != 0) {
      if (pos == n) return;
      const std::size_t take = std::min<std::size_t>(rx_left_, n - pos);
      deliver(p + pos, take);
      pos += take;
      rx_left_ -= static_cast<std::uint32_t>(take);
      rx_done_ += static_cast<std::uint32_t>(take);
      if (rx_left_ != 0) return;
    }
    in_msg_ = false;
    message_done();
  }
}

bool Link::begin_message() {
  const auto t = static_cast<wire::Type>(hdr_.type);
  in_msg_ = true;
  rx_left_ = payload_len(hdr_);
  rx_done_ = 0;
  sink_ = RxSink{};
  small_.clear();
  bool ok = false;
  switch (kind) {
    case Kind::requester:
      ok = t == wire::Type::ack || t == wire::Type::nak || t == wire::Type::read_resp ||
           t == wire::Type::hello_ack || t == wire::Type::hello_nak;
      // A same-host response only where this side offered to copy.
      if (ok && t == wire::Type::read_resp && (hdr_.flags & wire::kSameHost) != 0 && !same_host)
        ok = false;
      if (ok && t == wire::Type::read_resp && qp != nullptr) sink_ = qp->read_resp_sink(hdr_);
      break;
    case Kind::responder:
      if (qp == nullptr) {
        ok = t == wire::Type::hello;
      } else if (t == wire::Type::shm_on) {
        ok = shm_ != nullptr && !shm_on_;
      } else {
        ok = t == wire::Type::send || t == wire::Type::write || t == wire::Type::read;
        if (ok) sink_ = qp->on_request(*this, hdr_);
      }
      break;
    case Kind::cm:
      ok = t >= wire::Type::cm_req && t <= wire::Type::cm_drep;
      break;
  }
  if (!ok || (is_control(t) && rx_left_ > kMaxControlPayload)) {
    protocol_error("unexpected message");
    return false;
  }
  if (state != State::open) return false;
  return true;
}

void Link::deliver(const std::uint8_t* p, std::size_t n) noexcept {
  if (is_control(static_cast<wire::Type>(hdr_.type))) {
    small_.insert(small_.end(), p, p + n);
    return;
  }
  if (sink_.failed || n == 0) return;
  // A QP that entered ERR mid-message has flushed the receive (or READ) this
  // payload was going to: its buffers are the application's again.
  if (qp != nullptr && qp->state() == QpState::err) sink_.kind = RxSink::Kind::discard;
  switch (sink_.kind) {
    case RxSink::Kind::discard:
      return;
    case RxSink::Kind::mr: {
      std::lock_guard lk(dev->mrs.mu);
      const std::uint64_t at = sink_.addr + rx_done_;
      if (dev->mrs.check(sink_.key, sink_.pd, sink_.need, at, n, sink_.qpn) == nullptr) {
        sink_.failed = true;
        return;
      }
      std::memcpy(reinterpret_cast<void*>(at), p, n);
      maybe_corrupt(at, n);
      return;
    }
    case RxSink::Kind::scatter: {
      std::lock_guard lk(dev->mrs.mu);
      std::uint64_t skip = rx_done_;
      for (std::uint32_t i = 0; i < sink_.num_sge && n != 0; ++i) {
        const Sge& s = sink_.sges[i];
        if (skip >= s.length) {
          skip -= s.length;
          continue;
        }
        const std::size_t take = std::min<std::uint64_t>(n, s.length - skip);
        const std::uint64_t at = s.addr + skip;
        if (dev->mrs.check(s.lkey, sink_.pd, kLocalWrite, at, take) == nullptr) {
          sink_.failed = true;
          return;
        }
        std::memcpy(reinterpret_cast<void*>(at), p, take);
        maybe_corrupt(at, take);
        p += take;
        n -= take;
        skip = 0;
      }
      if (n != 0) sink_.failed = true;  // longer than the SGEs (checked earlier)
      return;
    }
  }
}

// Memory or DMA corruption below the link's checks: one bit of the `n` bytes
// just placed at `at` (registered memory the caller checked) is flipped.
void Link::maybe_corrupt(std::uint64_t at, std::size_t n) noexcept {
  const FaultRate& r = engine.options().faults.corrupt_data;
  if (n == 0 || !r.enabled() || !corrupt_rng_.fire(r)) return;
  const std::uint64_t bit = corrupt_rng_.next() % (static_cast<std::uint64_t>(n) * 8);
  auto* byte = reinterpret_cast<std::uint8_t*>(at + bit / 8);
  *byte = static_cast<std::uint8_t>(*byte ^ (1u << (bit % 8)));
  Counters::bump(engine.counters().corruptions);
}

void Link::message_done() noexcept {
  const auto t = static_cast<wire::Type>(hdr_.type);
  switch (t) {
    case wire::Type::ack:
    case wire::Type::nak:
      if (qp != nullptr) qp->on_response(*this, hdr_);
      return;
    case wire::Type::read_resp:
      if (qp == nullptr) return;
      if ((hdr_.flags & wire::kSameHost) != 0 && !pull_read_response()) return;
      qp->on_read_resp_done(hdr_, sink_.failed);
      return;
    case wire::Type::hello_ack:
      on_hello_ack();
      if (qp != nullptr) qp->on_hello_ack();
      return;
    case wire::Type::hello_nak:
      error = ECONNREFUSED;
      close(true);
      return;
    case wire::Type::send:
    case wire::Type::write:
    case wire::Type::read:
      if (qp != nullptr) qp->on_request_done(*this, hdr_, sink_.failed);
      return;
    case wire::Type::hello:
      on_hello();
      return;
    case wire::Type::shm_on:
      on_shm_on();
      return;
    default:
      if (cm != nullptr) cm->on_link_message(*this, hdr_, small_);
      return;
  }
}

void Link::on_hello() {
  wire::Hello h{};
  wire::Header reply{};
  if (small_.size() < sizeof h) {
    protocol_error("short HELLO");
    return;
  }
  std::memcpy(&h, small_.data(), sizeof h);
  QpCore* target = nullptr;
  if (h.magic.value() != wire::kMagic || h.version != wire::kVersion) {
    reply.type = static_cast<wire::u8>(wire::Type::hello_nak);
    reply.code = static_cast<wire::u8>(wire::HelloNak::bad_version);
  } else {
    target = dev->find_qp(h.dst_qpn.value());
    reply.type = static_cast<wire::u8>(target != nullptr ? wire::Type::hello_ack
                                                         : wire::Type::hello_nak);
    reply.code = static_cast<wire::u8>(wire::HelloNak::no_such_qp);
  }
  if (target == nullptr) {
    put(reply);
    flush_now();
    close(false);
    return;
  }
  peer_qpn = h.src_qpn.value();
  target->attach_responder(*this);
  if (engine.options().same_host_copy) {
    const std::uint64_t* probe = same_host_probe();
    reply.code = wire::kHelloSameHost;
    reply.imm = static_cast<std::uint32_t>(::getpid());
    reply.raddr = reinterpret_cast<std::uint64_t>(probe);
    reply.rkey = static_cast<std::uint32_t>(*probe);
    reply.reserved = static_cast<std::uint32_t>(*probe >> 32);
    offer_shm(reply);
  }
  put(reply);
}

// Requester: the responder offered to let us copy READ responses out of its
// memory. Taken only when its probe reads back from here: the pid is one of
// this host's (and pid namespace's) and the kernel lets us read it. Anything
// else keeps the READs on the TCP link; a refusal (EPERM: another uid, or
// Yama's ptrace_scope) is logged once per fabric, since it is a setting the
// user can change.
void Link::on_hello_ack() {
  const bool offered = (hdr_.flags & wire::kShmOffer) != 0;
  const std::uint64_t nonce =
      hdr_.rkey.value() | (static_cast<std::uint64_t>(hdr_.reserved.value()) << 32);
  probe_same_host(nonce);
  if (!offered) return;
  // The responder made rings for this link: take them, or say no so that it
  // frees them. The answer is the last byte on the socket either way.
  const bool take = same_host && engine.options().same_host_rings &&
                    attach_shm(peer_pid, static_cast<int>(hdr_.len.value()), nonce);
  wire::Header h{};
  h.type = static_cast<wire::u8>(wire::Type::shm_on);
  h.code = take ? 1 : 0;
  put(h);
  flush_now();
  if (!take || state != State::open) return;
  if (tx_.size() != 0) {  // the socket did not take 32 bytes at once: cannot switch cleanly
    error = EPROTO;
    close(true);
    return;
  }
  switch_to_shm();
}

void Link::probe_same_host(std::uint64_t want) {
  if (hdr_.code != wire::kHelloSameHost || !engine.options().same_host_copy) return;
  const int pid = static_cast<int>(hdr_.imm.value());
  std::uint64_t got = 0;
  iovec local{&got, sizeof got};
  iovec remote{reinterpret_cast<void*>(hdr_.raddr.value()), sizeof got};
  const ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(sizeof got) && got == want) {
    same_host = true;
    peer_pid = pid;
    return;
  }
  const int err = n < 0 ? errno : 0;
  if (err == EPERM) {
    Counters::bump(engine.counters().same_host_refused);
    if (!dev->fabric.refusal_logged.exchange(true))
      SIPHON_LOG(rdma, 0,
                 "soft: same-host copy from pid {} refused by the kernel (EPERM), RDMA READs use "
                 "the TCP link: run both processes as one user with kernel.yama.ptrace_scope = 0 "
                 "(or CAP_SYS_PTRACE), or set SIPHON_SOFT_LINK=tcp to choose the TCP link",
                 pid);
    return;
  }
  SIPHON_TRACE(rdma, "soft: peer pid {} is not a same-host process ({}), READs use the TCP link",
               pid, err != 0 ? std::strerror(err) : "probe mismatch");
}

// ------------------------------------------------------------- same-host rings
//
// A data link between two processes of one host moves its bytes off the TCP
// socket onto two shared-memory rings (docs/rdma-provider.md, "Same-host
// rings"). The protocol above is unchanged: the same headers and payloads,
// in the same order, are produced by fill/pump and parsed by feed(); only
// the bytes' path changes, from two copies and two syscalls per message
// (sendmsg, read) to one copy in and one out, and an eventfd write only
// when the peer's engine has armed the ring before sleeping.
//
//   responder                              requester
//   HELLO        <-----------------------  (socket)
//   memfd + 2 eventfds, HELLO_ACK          probe; pidfd_getfd the memfd and
//   (kShmOffer, len = memfd) ------------> the eventfds named in it
//                <-----------------------  SHM_ON (1 = take, 0 = decline)
//   rings from here on                     rings from here on
//
// The socket stays open: its EOF or error is the peer's death, and closing
// it is how this side tells the peer the link is gone.

void Link::offer_shm(wire::Header& reply) noexcept {
  if (!engine.options().same_host_rings || kind != Kind::responder || shm_ != nullptr) return;
  auto s = std::make_unique<ShmLink>();
  const std::size_t cap = engine.options().same_host_ring_bytes;
  s->size = kShmDataOffset + 2 * cap;
  s->memfd = ::memfd_create("siphon-soft-link", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (s->memfd < 0 || ::ftruncate(s->memfd, static_cast<off_t>(s->size)) != 0 ||
      ::fcntl(s->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    SIPHON_TRACE(rdma, "soft: no same-host rings for this link (memfd: {})", std::strerror(errno));
    return;
  }
  void* base = ::mmap(nullptr, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd, 0);
  if (base == MAP_FAILED) {
    SIPHON_TRACE(rdma, "soft: no same-host rings for this link (mmap: {})", std::strerror(errno));
    return;
  }
  s->base = base;
  s->my_efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  s->peer_efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->my_efd < 0 || s->peer_efd < 0) return;
  auto* layout = new (base) ShmLayout{};
  layout->magic = ShmLayout::kMagic;
  layout->nonce = *same_host_probe();
  layout->cap = static_cast<std::uint32_t>(cap);
  layout->efd_requester = s->peer_efd;
  layout->efd_responder = s->my_efd;
  auto* data = static_cast<std::uint8_t*>(base) + kShmDataOffset;
  s->layout = layout;
  s->tx = &layout->dir[1];
  s->rx = &layout->dir[0];
  s->tx_data = data + cap;
  s->rx_data = data;
  reply.flags = static_cast<wire::u8>(reply.flags | wire::kShmOffer);
  reply.len = static_cast<std::uint32_t>(s->memfd);
  shm_ = std::move(s);
}

// Requester: fetches the offered memfd and eventfds from the responder's
// process (pidfd_getfd needs the same ptrace permission the probe proved)
// and checks what they hold before trusting it: sealed against shrinking
// (no SIGBUS under us), the size its capacity implies, the probe's nonce.
bool Link::attach_shm(int pid, int memfd, std::uint64_t nonce) noexcept {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    SIPHON_TRACE(rdma, "soft: pidfd_open({}): {}, no same-host rings", pid, std::strerror(errno));
    return false;
  }
  auto getfd = [pidfd](int n) {
    return n < 0 ? -1 : static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, n, 0));
  };
  auto s = std::make_unique<ShmLink>();
  const char* why = nullptr;
  s->memfd = getfd(memfd);
  struct stat st {};
  std::uint32_t cap = 0;
  if (s->memfd < 0) {
    why = "pidfd_getfd of its memfd";
  } else if (::fstat(s->memfd, &st) != 0 || st.st_size < static_cast<off_t>(kShmDataOffset) ||
             st.st_size > (off_t{1} << 32)) {
    why = "the memfd's size";
  } else if (const int seals = ::fcntl(s->memfd, F_GET_SEALS);
             seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    why = "the memfd is not sealed";
  } else {
    s->size = static_cast<std::size_t>(st.st_size);
    void* base = ::mmap(nullptr, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd, 0);
    if (base == MAP_FAILED) {
      why = "mmap";
    } else {
      s->base = base;
      auto* layout = static_cast<ShmLayout*>(base);
      cap = layout->cap;
      if (layout->magic != ShmLayout::kMagic || layout->nonce != nonce || cap < 4096 ||
          kShmDataOffset + 2 * std::size_t{cap} != s->size) {
        why = "the memfd's layout";
      } else {
        s->my_efd = getfd(layout->efd_requester);
        s->peer_efd = getfd(layout->efd_responder);
        if (s->my_efd < 0 || s->peer_efd < 0) why = "pidfd_getfd of its eventfds";
      }
    }
  }
  const int err = errno;
  ::close(pidfd);
  if (why != nullptr) {
    SIPHON_TRACE(rdma, "soft: no same-host rings with pid {} ({}: {})", pid, why, std::strerror(err));
    return false;
  }
  ::close(s->memfd);
  s->memfd = -1;
  auto* layout = static_cast<ShmLayout*>(s->base);
  auto* data = static_cast<std::uint8_t*>(s->base) + kShmDataOffset;
  s->layout = layout;
  s->tx = &layout->dir[0];
  s->rx = &layout->dir[1];
  s->tx_data = data;
  s->rx_data = data + cap;
  if (engine.add_wake_fd(s->my_efd, this, home_ep)) return false;
  shm_efd_registered_ = true;
  shm_ = std::move(s);
  return true;
}

// Responder: the requester's answer to the offer.
void Link::on_shm_on() {
  engine.want_tx(this);  // the responses held since the offer
  if (hdr_.code != 1) {
    shm_.reset();  // declined: the rings and the eventfds go
    return;
  }
  if (tx_.size() != 0 || engine.add_wake_fd(shm_->my_efd, this, home_ep)) {
    protocol_error("cannot move to the same-host rings");
    return;
  }
  shm_efd_registered_ = true;
  ::close(shm_->memfd);
  shm_->memfd = -1;
  switch_to_shm();  // requests already in the ring are read at the next poll
}

void Link::switch_to_shm() noexcept {
  const std::size_t cap = (shm_->size - kShmDataOffset) / 2;
  tx_.attach(shm_->tx_data, cap, &shm_->tx->head, &shm_->tx->tail);
  rx_ring_.attach(shm_->rx_data, cap, &shm_->rx->head, &shm_->rx->tail);
  tx_signalled_ = tx_.tail();
  shm_on_ = true;
  if (kind == Kind::requester) Counters::bump(engine.counters().shm_links);  // once per link
  engine.shm_hot(this);  // polled, then armed before the engine sleeps
}

void Link::on_wake() {
  // The peer either wrote while this side was armed or made room in a ring
  // this side waits on; the eventfd's counter is never read (edge-triggered).
  drain_ring();
  if (state == State::open && want_write) {
    want_write = false;
    engine.want_tx(this);
  }
}

void Link::drain_ring() noexcept {
  if (!shm_on_) return;
  engine.shm_hot(this);
  std::size_t budget = 2 * rx_ring_.capacity();  // then let the other links run
  while (state == State::open) {
    if (rx_ring_.size() > rx_ring_.capacity()) {
      protocol_error("damaged same-host ring indices");
      return;
    }
    std::span<const std::uint8_t> parts[2];
    const std::size_t np = rx_ring_.peek(parts);
    if (np == 0) return;
    std::size_t total = 0;
    for (std::size_t i = 0; i < np && state == State::open; ++i) {
      feed(parts[i].data(), parts[i].size(), true);
      total += parts[i].size();
    }
    if (state != State::open) return;
    rx_ring_.consume(total);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    auto& waiting = shm_->rx->writer_waiting;
    wake_peer_if(waiting);
    if (total >= budget) return;
    budget -= total;
  }
}

bool Link::arm_ring() noexcept {
  if (!shm_on_ || state != State::open) return true;
  shm_->rx->reader_armed.store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return rx_ring_.size() == 0;
}

// Clears `flag` if the peer set it and writes the peer's eventfd.
void Link::wake_peer_if(std::atomic<std::uint32_t>& flag) noexcept {
  if (flag.load(std::memory_order_relaxed) == 0 || flag.exchange(0) == 0) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(shm_->peer_efd, &one, sizeof one);
  Counters::bump(engine.counters().shm_wakeups);
}

void Link::wake_peer_reader() noexcept {
  const std::uint64_t t = tx_.tail();
  if (t == tx_signalled_) return;
  tx_signalled_ = t;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  auto& armed = shm_->tx->reader_armed;
  wake_peer_if(armed);
}

void Link::flush_shm() noexcept {
  for (int round = 0; round < 64 && state == State::open; ++round) {
    if (tx_left_ != 0) pump();
    if (tx_left_ == 0 && qp != nullptr) {
      if (kind == Kind::requester)
        qp->fill_requests(*this);
      else if (kind == Kind::responder)
        qp->fill_responses(*this);
    }
    if (state != State::open) return;
    wake_peer_reader();
    // Every fill needs a header's room: with that much left it stopped for
    // want of work, not of room.
    const std::size_t need = tx_left_ != 0 ? 1 : sizeof(wire::Header);
    if (tx_left_ == 0 && tx_.space() >= need) return;
    shm_->tx->writer_waiting.store(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (tx_.space() >= need) continue;  // the reader made room meanwhile
    want_write = true;                  // its next consume wakes us
    return;
  }
  engine.want_tx(this);
}

// Requester, a same-host READ_RESP: the responder checked the rkey, bounds
// and rights of [remote, remote + len) when it executed the READ; the bytes
// are copied from its memory into the WR's SGEs (checked here, as deliver()
// checks them) in one process_vm_readv. The completion follows, so it comes
// after the data is placed. A failed copy (the peer died: ESRCH; its memory
// is gone: EFAULT) closes the link like a lost connection: the READ is sent
// again and the responder's checks decide (a deregistered MR is then a
// remote access error), or the retries run out.
bool Link::pull_read_response() noexcept {
  const std::uint32_t len = hdr_.len.value();
  if (sink_.kind != RxSink::Kind::scatter || len == 0) return true;  // stale, or the QP is in ERR
  ssize_t n = 0;
  int err = 0;
  {
    std::lock_guard lk(dev->mrs.mu);
    if (qp == nullptr || qp->state() == QpState::err) return true;
    iov_.clear();
    std::uint64_t left = len;
    for (std::uint32_t i = 0; i < sink_.num_sge && left != 0; ++i) {
      const Sge& s = sink_.sges[i];
      const std::uint64_t take = std::min<std::uint64_t>(left, s.length);
      if (take == 0) continue;
      if (dev->mrs.check(s.lkey, sink_.pd, kLocalWrite, s.addr, take) == nullptr) {
        sink_.failed = true;
        return true;
      }
      iov_.push_back(iovec{reinterpret_cast<void*>(s.addr), static_cast<std::size_t>(take)});
      left -= take;
    }
    if (left != 0) {
      sink_.failed = true;  // longer than the SGEs (checked at post)
      return true;
    }
    iovec remote{reinterpret_cast<void*>(sink_.remote), len};
    n = ::process_vm_readv(peer_pid, iov_.data(), iov_.size(), &remote, 1, 0);
    if (n == static_cast<ssize_t>(len)) {
      for (const iovec& v : iov_) maybe_corrupt(reinterpret_cast<std::uint64_t>(v.iov_base), v.iov_len);
      Counters::bump(engine.counters().same_host_reads);
      return true;
    }
    err = n < 0 ? errno : EFAULT;
  }
  SIPHON_LOG(rdma, 1, "soft: same-host READ of {} bytes from pid {} failed ({}), closing the link",
             len, peer_pid, std::strerror(err));
  error = err;
  close(true);
  return false;
}

bool Link::put(const wire::Header& h, const void* payload, std::size_t len) noexcept {
  if (state == State::closed || tx_left_ != 0 || tx_.space() < sizeof h + len) return false;
  tx_.put(&h, sizeof h);
  if (len != 0) tx_.put(payload, len);
  engine.want_tx(this);
  return true;
}

void Link::start(const wire::Header& h, const TxSource& src) noexcept {
  tx_.put(&h, sizeof h);
  tx_src = src;
  tx_left_ = payload_len(h);
  tx_done_ = 0;
  pump();
  engine.want_tx(this);
}

bool Link::pump() noexcept {
  while (tx_left_ != 0 && tx_.space() != 0) {
    auto dst = tx_.reserve(tx_left_);
    std::size_t n = dst.size();
    std::uint8_t* out = dst.data();
    switch (tx_src.kind) {
      case TxSource::Kind::none:
        std::memset(out, 0, n);
        break;
      case TxSource::Kind::inline_data:
        std::memcpy(out, tx_src.data + tx_done_, n);
        break;
      case TxSource::Kind::mr: {
        std::lock_guard lk(dev->mrs.mu);
        const std::uint64_t at = tx_src.addr + tx_done_;
        if (!tx_src.failed && dev->mrs.check(tx_src.key, tx_src.pd, kRemoteRead, at, n, tx_src.qpn) != nullptr) {
          std::memcpy(out, reinterpret_cast<const void*>(at), n);
        } else {
          tx_src.failed = true;  // deregistered under a READ: the rest reads as zeros
          std::memset(out, 0, n);
        }
        break;
      }
      case TxSource::Kind::gather: {
        std::lock_guard lk(dev->mrs.mu);
        std::uint64_t skip = tx_done_;
        std::size_t left = n;
        std::uint8_t* o = out;
        for (std::uint32_t i = 0; i < tx_src.num_sge && left != 0; ++i) {
          const Sge& s = tx_src.sges[i];
          if (skip >= s.length) {
            skip -= s.length;
            continue;
          }
          const std::size_t take = std::min<std::uint64_t>(left, s.length - skip);
          const std::uint64_t at = s.addr + skip;
          if (!tx_src.failed && dev->mrs.check(s.lkey, tx_src.pd, 0, at, take) != nullptr)
            std::memcpy(o, reinterpret_cast<const void*>(at), take);
          else {
            tx_src.failed = true;
            std::memset(o, 0, take);
          }
          o += take;
          left -= take;
          skip = 0;
        }
        if (left != 0) std::memset(o, 0, left);
        break;
      }
    }
    tx_.commit(n);
    tx_left_ -= static_cast<std::uint32_t>(n);
    tx_done_ += static_cast<std::uint32_t>(n);
  }
  return tx_left_ == 0;
}

bool Link::write_out() noexcept {
  if (shm_on_) {
    wake_peer_reader();
    return true;
  }
  while (tx_.size() != 0) {
    std::span<const std::uint8_t> parts[2];
    const std::size_t np = tx_.peek(parts);
    iovec iov[2];
    for (std::size_t i = 0; i < np; ++i) {
      iov[i].iov_base = const_cast<std::uint8_t*>(parts[i].data());
      iov[i].iov_len = parts[i].size();
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = np;
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      tx_.consume(static_cast<std::size_t>(n));
      Counters::bump(engine.counters().bytes_sent, static_cast<std::uint64_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      want_write = true;
      return true;
    }
    error = n < 0 ? errno : EPIPE;
    close(true);
    return false;
  }
  return true;
}

void Link::flush_now() noexcept {
  if (state == State::open) write_out();
}

void Link::flush() noexcept {
  if (shm_on_) {
    flush_shm();
    return;
  }
  for (int round = 0; round < 64 && state == State::open; ++round) {
    if (tx_left_ != 0) pump();
    // A responder that offered rings holds its responses until the answer:
    // the requester, once it switches, reads nothing more from the socket.
    if (tx_left_ == 0 && qp != nullptr && shm_ == nullptr) {
      if (kind == Kind::requester)
        qp->fill_requests(*this);
      else if (kind == Kind::responder)
        qp->fill_responses(*this);
    }
    if (state != State::open || tx_.size() == 0) return;
    if (!write_out() || want_write) return;
  }
  engine.want_tx(this);  // more to do: continue in the next loop iteration
}

void Link::close(bool notify) noexcept {
  if (state == State::closed) return;
  state = State::closed;
  if (fd >= 0) {
    engine.del_fd(fd, home_ep);
    ::close(fd);
    fd = -1;
  }
  if (shm_ != nullptr) {
    // The rings stay mapped until the link is deleted (the peer learns of
    // the close from the socket); this side stops listening now.
    if (shm_efd_registered_) engine.del_fd(shm_->my_efd, home_ep);
    shm_efd_registered_ = false;
    engine.shm_forget(this);
  }
  if (notify) {
    switch (kind) {
      case Kind::requester:
        if (qp != nullptr) qp->on_link_lost(*this);
        break;
      case Kind::responder:
        if (qp != nullptr) qp->detach_responder(*this);
        break;
      case Kind::cm:
        if (cm != nullptr) cm->on_link_lost(*this);
        break;
    }
  }
  qp = nullptr;
  cm = nullptr;
  engine.retire(std::unique_ptr<Handler>(this));
}

// ------------------------------------------------------------- QPN blocks

QpnBlock* open_qpn_block(DeviceCore& dev, std::error_code& ec) {
  Engine& engine = *dev.fabric.engine;
  int fd = listen_on(*NetAddress::parse("[::]:0"), 1024, ec);
  if (fd < 0) fd = listen_on(*NetAddress::parse("0.0.0.0:0"), 1024, ec);
  if (fd < 0) return nullptr;
  const NetAddress at = sock_name(fd, false);
  auto block = std::make_unique<QpnBlock>();
  block->port = at.port();
  DeviceCore* d = &dev;
  auto* listener = new Listener(engine, fd, [d, &engine](int c) {
    auto* link = new Link(engine, d, Link::Kind::responder, c, false,
                          engine.options().link_buffer_bytes);
    if (link->register_fd()) {
      link->close(false);
    }
  });
  block->listener = listener;
  if ((ec = engine.add_fd(fd, listener, EPOLLIN))) {
    delete listener;
    return nullptr;
  }
  dev.blocks.push_back(std::move(block));
  return dev.blocks.back().get();
}

}  // namespace siphon::rdma::soft::detail

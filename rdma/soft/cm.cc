// The soft fabric's connection manager, shaped like librdmacm: an event
// channel with a real fd, ids that bind/listen/resolve/connect/accept/reject/
// disconnect. The IB CM exchange (REQ, REP/REJ, RTU, DREQ/DREP) runs over a
// TCP connection to the listener's address; QP data then flows over the
// QPs' own data links, as on hardware where the CM uses QP1.
//
// CmCore state machine (engine thread):
//
//  idle --bind--> bound --listen--> listening --accept(2)--> [passive core: req_wait]
//    |              |
//    +--resolve_addr+--> addr_resolved --resolve_route--> route_resolved
//                                                           |
//                    connect: TCP connect + REQ             v
//                 +----------------------------------- req_sent
//                 | REP: QP -> RTR -> RTS, RTU sent        |  REJ / refused -> rejected
//                 v                                        |  timeout / EOF -> failed (UNREACHABLE)
//  passive: req_wait --REQ--> req_received --accept: QP -> RTS, REP--> rep_sent --RTU--> established
//                                  |--reject: REJ--> rejected           |--EOF--> failed (CONNECT_ERROR)
//  established --disconnect(): DREQ, QP -> ERR--> disconnecting --DREP/EOF/timeout--> disconnected
//  established --DREQ (DREP sent) / EOF--> disconnected
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/soft/core.h"
#include "rdma/soft/objects.h"

namespace siphon::rdma::soft {
namespace detail {

// The events of one channel. push() from the engine, pop() from the user.
class CmChannelCore {
 public:
  explicit CmChannelCore(int fd) : fd_(fd) {}
  ~CmChannelCore() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const noexcept { return fd_; }
  bool closed() {
    std::lock_guard lk(mu_);
    return closed_;
  }
  void push(CmEvent&& ev) {
    std::lock_guard lk(mu_);
    if (closed_) return;
    q_.push_back(std::move(ev));
    if (q_.size() == 1) {
      const std::uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(fd_, &one, sizeof one);
    }
  }
  bool pop(CmEvent& out) {
    std::lock_guard lk(mu_);
    if (q_.empty()) return false;
    out = std::move(q_.front());
    q_.pop_front();
    if (q_.empty()) drain_fd();
    return true;
  }
  // Removes events about `id`; returns them so the caller destroys them
  // (and any new ids inside) outside the lock.
  std::deque<CmEvent> purge(CmId* id, bool all) {
    std::deque<CmEvent> out;
    std::lock_guard lk(mu_);
    if (all) closed_ = true;
    for (auto it = q_.begin(); it != q_.end();) {
      if (all || it->id == id) {
        out.push_back(std::move(*it));
        it = q_.erase(it);
      } else {
        ++it;
      }
    }
    if (q_.empty()) drain_fd();
    return out;
  }

 private:
  void drain_fd() {
    std::uint64_t v;
    [[maybe_unused]] auto n = ::read(fd_, &v, sizeof v);
  }
  std::mutex mu_;
  std::deque<CmEvent> q_;
  bool closed_ = false;
  int fd_;
};

}  // namespace detail

using namespace detail;

std::error_code connect_qp(CmCore& c, const wire::CmConnect& peer);

namespace {

bool is_local_address(const NetAddress& a) {
  if (a.is_any()) return true;
  const Gid g = address_to_gid(a);
  for (const auto& e : host_gids())
    if (e.gid == g) return true;
  return false;
}

std::uint8_t sgid_index_of(const NetAddress& a) {
  const Gid g = address_to_gid(a);
  for (const auto& e : host_gids())
    if (e.gid == g) return static_cast<std::uint8_t>(std::min<std::uint32_t>(e.index, 255));
  return 0;
}

class CmIdImpl final : public CmId {
 public:
  // Every id is on device 0 (soft0): see use_device().
  CmIdImpl(std::shared_ptr<Fabric> f, std::shared_ptr<CmCore> core)
      : fabric_(std::move(f)), core_(std::move(core)) {
    core_->handle = this;
    fabric_->counters.cm_ids_live.fetch_add(1, std::memory_order_relaxed);
  }
  ~CmIdImpl() override {
    CmCore* c = core_.get();
    fabric_->engine->call([c] { c->destroy(); });
    auto dropped = core_->channel->purge(this, false);
    dropped.clear();  // destroys undelivered new ids outside the channel lock
    std::shared_ptr<QpCore> qp;
    fabric_->engine->call([&] { qp = std::move(c->qp); });
    device_.reset();
    fabric_->counters.cm_ids_live.fetch_sub(1, std::memory_order_relaxed);
  }

  std::error_code bind(const NetAddress& addr) override {
    std::error_code ec;
    call([&] {
      CmCore& c = *core_;
      if (c.st == CmCore::St::removed) ec = errc::device_not_found;
      else if (c.st != CmCore::St::idle) ec = errc::invalid_argument;
      else if (addr.is_unspecified() || !is_local_address(addr)) ec = errc::address_invalid;
      else if (!use_device(c)) ec = errc::device_not_found;
      else {
        c.local = addr;
        c.st = CmCore::St::bound;
      }
    });
    return ec;
  }

  std::error_code listen(int backlog) override {
    std::error_code ec;
    call([&] {
      CmCore& c = *core_;
      if (c.st == CmCore::St::removed) {
        ec = errc::device_not_found;
        return;
      }
      if (c.st != CmCore::St::bound) {
        ec = errc::invalid_argument;
        return;
      }
      const int fd = listen_on(c.local, std::max(backlog, 1), ec);
      if (fd < 0) return;
      c.local = sock_name(fd, false);
      CmCore* cp = &c;
      c.listener = new Listener(*fabric_->engine, fd, [cp](int s) { cp->on_accept(s); });
      if ((ec = fabric_->engine->add_fd(fd, c.listener, EPOLLIN))) {
        delete c.listener;
        c.listener = nullptr;
        return;
      }
      c.st = CmCore::St::listening;
    });
    return ec;
  }

  std::error_code resolve_addr(const NetAddress* src, const NetAddress& dst, int) override {
    if (dst.is_unspecified() || dst.is_any()) return errc::address_invalid;
    std::error_code ec;
    call([&] {
      CmCore& c = *core_;
      if (c.st == CmCore::St::removed) {
        ec = errc::device_not_found;
        return;
      }
      if (c.st != CmCore::St::idle && c.st != CmCore::St::bound) {
        ec = errc::invalid_argument;
        return;
      }
      // The device serving every address is taken away: no route to resolve
      // on (an error now, not an ADDR_ERROR event).
      if (fabric_->devices.front()->removed.load()) {
        ec = errc::device_not_found;
        return;
      }
      if (src != nullptr && !src->is_unspecified() && !is_local_address(*src)) {
        ec = errc::address_invalid;
        return;
      }
      NetAddress local;
      std::error_code rc;
      if (src != nullptr && !src->is_unspecified() && !src->is_any()) {
        local = *src;
      } else if (c.st == CmCore::St::bound && !c.local.is_any()) {
        local = c.local;
      } else {  // which local address routes to dst?
        const int s = ::socket(dst.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0 || ::connect(s, dst.sockaddr_ptr(), dst.sockaddr_len()) != 0)
          rc = from_errno(errno);
        else
          local = sock_name(s, false);
        if (s >= 0) ::close(s);
        local.set_port(0);
      }
      if (!rc && !is_local_address(local)) rc = errc::address_invalid;
      if (rc) {
        c.emit(CmEventType::addr_error, rc);
        return;
      }
      c.local = local;
      c.peer = dst;
      use_device(c);  // not removed: checked above, on this thread
      c.st = CmCore::St::addr_resolved;
      c.emit(CmEventType::addr_resolved);
    });
    return ec;
  }

  std::error_code resolve_route(int) override {
    std::error_code ec;
    call([&] {
      CmCore& c = *core_;
      if (c.st == CmCore::St::removed) {
        ec = errc::device_not_found;
        return;
      }
      if (c.st != CmCore::St::addr_resolved) {
        ec = errc::invalid_argument;
        return;
      }
      c.st = CmCore::St::route_resolved;
      c.emit(CmEventType::route_resolved);
    });
    return ec;
  }

  Device* device() noexcept override {
    DeviceCore* d = nullptr;
    std::uint32_t gen = 0;
    fabric_->engine->call([&] {
      d = core_->dev;
      gen = core_->dev_gen;
    });
    if (d == nullptr) return nullptr;
    // In the generation the id was bound in: dead once its device is removed.
    if (!device_) device_ = open_device_handle(fabric_, *d, gen);
    return device_.get();
  }
  std::uint8_t port_num() const noexcept override { return 1; }

  std::unique_ptr<QueuePair> create_qp(ProtectionDomain& pd, const QpInit& init,
                                       std::error_code& ec) override {
    std::uint32_t pd_id = 0, gen = 0;
    DeviceCore* dev = device_of(pd, &pd_id, &gen);
    DeviceCore* mine = nullptr;
    bool removed = false, has_qp = false;
    call([&] {
      mine = core_->dev;
      removed = core_->st == CmCore::St::removed;
      has_qp = core_->qp != nullptr;
    });
    if (removed) {
      ec = errc::device_not_found;
      return nullptr;
    }
    if (dev == nullptr || dev != mine || has_qp) {
      ec = errc::invalid_argument;
      return nullptr;
    }
    auto qp = create_qp_core(fabric_, *dev, pd_id, gen, init, ec);
    if (!qp) return nullptr;
    QpAttr a;
    a.state = QpState::init;
    a.port_num = 1;
    a.pkey_index = 0;
    a.access_flags = kRemoteWrite | kRemoteRead;
    call([&] {
      ec = qp->modify(a, kAttrState | kAttrPort | kAttrPkeyIndex | kAttrAccessFlags);
      if (!ec) core_->qp = qp;
    });
    if (ec) {
      auto discard = std::make_unique<QpImpl>(fabric_, std::move(qp));
      return nullptr;
    }
    return std::make_unique<QpImpl>(fabric_, std::move(qp));
  }

  std::error_code connect(const ConnParam& param) override {
    if (param.private_data.size() > wire::kReqPrivateData) return errc::invalid_argument;
    std::error_code ec;
    call([&] {
      CmCore& c = *core_;
      if (c.st == CmCore::St::removed) {
        ec = errc::device_not_found;
        return;
      }
      if (c.st != CmCore::St::route_resolved || !c.qp) {
        ec = c.qp ? errc::invalid_argument : errc::not_connected;
        return;
      }
      c.my_param = param;
      std::error_code rc;
      const int fd = fabric_->engine->link_down() ? (rc = from_errno(ENETUNREACH), -1) : connect_nb(c.peer, rc);
      if (fd < 0) {
        c.st = CmCore::St::failed;
        c.emit(rc == errc::connection_refused ? CmEventType::rejected : CmEventType::unreachable, rc);
        return;
      }
      Engine& e = *fabric_->engine;
      auto* link = new Link(e, c.dev, Link::Kind::cm, fd, true, 4096);
      link->cm = &c;
      if ((rc = link->register_fd())) {
        link->cm = nullptr;
        link->close(false);
        ec = rc;
        return;
      }
      c.link = link;
      wire::Header h{};
      h.type = static_cast<wire::u8>(wire::Type::cm_req);
      const wire::CmConnect conn = c.my_conn();
      std::uint8_t buf[sizeof conn + wire::kReqPrivateData];
      std::memcpy(buf, &conn, sizeof conn);
      if (!param.private_data.empty())
        std::memcpy(buf + sizeof conn, param.private_data.data(), param.private_data.size());
      h.len = static_cast<std::uint32_t>(sizeof conn + param.private_data.size());
      link->put(h, buf, h.len.value());
      c.st = CmCore::St::req_sent;
      c.deadline = e.now() + std::chrono::milliseconds(fabric_->options.cm_timeout_ms);
      e.schedule(&c, c.deadline);
    });
    return ec;
  }

  std::error_code accept(const ConnParam& param) override {
    if (param.private_data.size() > wire::kRepPrivateData) return errc::invalid_argument;
    std::error_code ec;
    call([&] {
      CmCore& c = *core_;
      if (c.st == CmCore::St::removed) {
        ec = errc::device_not_found;
        return;
      }
      if (c.st != CmCore::St::req_received || c.link == nullptr || !c.qp) {
        ec = c.qp ? errc::invalid_argument : errc::not_connected;
        return;
      }
      c.my_param = param;
      if ((ec = bring_up(c))) return;
      wire::Header h{};
      h.type = static_cast<wire::u8>(wire::Type::cm_rep);
      const wire::CmConnect conn = c.my_conn();
      std::uint8_t buf[sizeof conn + wire::kRepPrivateData];
      std::memcpy(buf, &conn, sizeof conn);
      if (!param.private_data.empty())
        std::memcpy(buf + sizeof conn, param.private_data.data(), param.private_data.size());
      h.len = static_cast<std::uint32_t>(sizeof conn + param.private_data.size());
      c.link->put(h, buf, h.len.value());
      c.st = CmCore::St::rep_sent;
      Engine& e = *fabric_->engine;
      c.deadline = e.now() + std::chrono::milliseconds(fabric_->options.cm_timeout_ms);
      e.schedule(&c, c.deadline);
    });
    return ec;
  }

  std::error_code set_qos(const CmQos& qos, std::string* not_applied) override {
    if (not_applied != nullptr) not_applied->clear();
    call([&] {
      CmCore& c = *core_;
      if (qos.traffic_class) c.qos.traffic_class = qos.traffic_class;
      if (qos.service_level) c.qos.service_level = qos.service_level;
      if (qos.ack_timeout) c.qos.ack_timeout = std::min<std::uint8_t>(*qos.ack_timeout, 31);
    });
    return {};
  }

  std::error_code reject(std::span<const std::uint8_t> private_data) override {
    if (private_data.size() > wire::kRejPrivateData) return errc::invalid_argument;
    std::error_code ec;
    call([&] {
      CmCore& c = *core_;
      if (c.st == CmCore::St::removed) {
        ec = errc::device_not_found;
        return;
      }
      if (c.st != CmCore::St::req_received || c.link == nullptr) {
        ec = errc::invalid_argument;
        return;
      }
      wire::Header h{};
      h.type = static_cast<wire::u8>(wire::Type::cm_rej);
      h.len = static_cast<std::uint32_t>(private_data.size());
      c.link->put(h, private_data.data(), private_data.size());
      c.link->flush_now();
      c.link->cm = nullptr;
      c.link->close(false);
      c.link = nullptr;
      c.st = CmCore::St::rejected;
    });
    return ec;
  }

  std::error_code disconnect() override {
    std::error_code ec;
    call([&] {
      CmCore& c = *core_;
      if (c.st == CmCore::St::removed) {
        ec = errc::device_not_found;
        return;
      }
      if (c.st == CmCore::St::disconnected || c.st == CmCore::St::disconnecting) return;
      if (c.st != CmCore::St::established && c.st != CmCore::St::rep_sent) {
        ec = errc::invalid_argument;
        return;
      }
      if (c.qp) c.qp->to_error();  // as rdma_disconnect does
      if (c.link != nullptr) {
        wire::Header h{};
        h.type = static_cast<wire::u8>(wire::Type::cm_dreq);
        c.link->put(h);
      }
      c.st = CmCore::St::disconnecting;
      Engine& e = *fabric_->engine;
      c.deadline = e.now() + std::chrono::milliseconds(fabric_->options.cm_timeout_ms);
      e.schedule(&c, c.deadline);
    });
    return ec;
  }

  NetAddress local_address() const override {
    NetAddress a;
    fabric_->engine->call([&] { a = core_->local; });
    return a;
  }
  NetAddress peer_address() const override {
    NetAddress a;
    fabric_->engine->call([&] { a = core_->peer; });
    return a;
  }

 private:
  template <typename F>
  void call(F&& f) {
    fabric_->engine->call(std::function<void()>(std::forward<F>(f)));
  }
  // Passive side: INIT -> RTR -> RTS from the REQ.
  std::error_code bring_up(CmCore& c) { return connect_qp(c, c.peer_conn); }
  // Engine thread: attaches `c` to the device that serves its address.
  // The fabric's devices share the host's addresses and GID table, so every
  // address is served by device 0 (soft0): every id of the provider binds
  // and resolves there (and removing soft0 tells every bound id). False,
  // nothing attached, while that device is removed.
  bool use_device(CmCore& c) {
    DeviceCore* d = fabric_->devices.front().get();
    const std::uint32_t gen = d->generation.load();
    if (d->removed.load()) return false;
    c.dev = d;
    c.dev_gen = gen;
    return true;
  }

  std::shared_ptr<Fabric> fabric_;
  std::shared_ptr<CmCore> core_;
  std::unique_ptr<Device> device_;
};

}  // namespace

// Moves the id's QP to RTS against the peer described by `peer` (REQ or REP).
std::error_code connect_qp(CmCore& c, const wire::CmConnect& peer) {
  if (!c.qp || c.qp->destroyed) return errc::not_connected;
  const DeviceAttr& da = c.dev->attr;
  QpAttr a;
  a.state = QpState::rtr;
  std::memcpy(a.av.dgid.data(), peer.gid, 16);
  a.av.sgid_index = sgid_index_of(c.local);
  a.av.port_num = 1;
  a.av.traffic_class = c.qos.traffic_class.value_or(0);
  a.av.sl = c.qos.service_level.value_or(0);
  a.path_mtu = c.fabric->options.active_mtu;
  a.dest_qp_num = peer.qpn.value();
  a.rq_psn = peer.start_psn.value();
  a.max_dest_rd_atomic =
      static_cast<std::uint8_t>(std::min<std::uint32_t>(c.my_param.responder_resources, da.max_qp_rd_atom));
  a.min_rnr_timer = 12;
  a.access_flags = kRemoteWrite | (c.my_param.responder_resources != 0 ? std::uint32_t{kRemoteRead} : 0u);
  std::error_code ec = c.qp->modify(
      a, kAttrState | kAttrPath | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic | kAttrMinRnrTimer |
             kAttrAccessFlags);
  if (ec) return ec;
  a.state = QpState::rts;
  a.sq_psn = c.start_psn;
  a.timeout = c.qos.ack_timeout.value_or(14);
  // As the IB CM does: our retry count is the active side's, our RNR retry
  // count is the one the peer asked for (it is the peer that would RNR us).
  a.retry_cnt = static_cast<std::uint8_t>(std::min<int>(
      c.st == CmCore::St::req_received ? peer.retry_count : c.my_param.retry_count, 7));
  a.rnr_retry = static_cast<std::uint8_t>(std::min<int>(peer.rnr_retry_count, 7));
  a.max_rd_atomic = static_cast<std::uint8_t>(std::min<std::uint32_t>(
      {c.my_param.initiator_depth, peer.responder_resources, da.max_qp_init_rd_atom}));
  return c.qp->modify(a, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                             kAttrMaxRdAtomic);
}

namespace detail {

CmCore::CmCore(std::shared_ptr<Fabric> f, std::shared_ptr<CmChannelCore> ch)
    : fabric(std::move(f)), channel(std::move(ch)) {
  std::random_device rd;
  start_psn = rd() & wire::kPsnMask;
  fabric->engine->call([this] {
    fabric->engine->add_timer_client(this);
    fabric->cm_cores.insert(this);
  });
}

CmCore::~CmCore() = default;

wire::CmConnect CmCore::my_conn() const {
  wire::CmConnect m{};
  m.magic = wire::kMagic;
  m.version = wire::kVersion;
  m.responder_resources = my_param.responder_resources;
  m.initiator_depth = my_param.initiator_depth;
  m.retry_count = my_param.retry_count;
  m.rnr_retry_count = my_param.rnr_retry_count;
  m.qpn = qp ? qp->qpn : 0;
  m.start_psn = start_psn;
  const Gid g = address_to_gid(local);
  std::memcpy(m.gid, g.data(), 16);
  return m;
}

void CmCore::emit(CmEventType type, std::error_code status, std::span<const std::uint8_t> pd,
                  std::size_t pad_to) {
  if (handle == nullptr || st == St::removed) return;  // DEVICE_REMOVAL is the last event
  CmEvent ev;
  ev.type = type;
  ev.id = handle;
  ev.status = status;
  if (!pd.empty() || pad_to != 0) {
    ev.private_data.assign(pd.begin(), pd.end());
    if (ev.private_data.size() < pad_to) ev.private_data.resize(pad_to, 0);
  }
  channel->push(std::move(ev));
}

void CmCore::drop_link() {
  if (link == nullptr) return;
  link->cm = nullptr;
  link->close(false);
  link = nullptr;
}

void CmCore::destroy() {
  handle = nullptr;
  fabric->cm_cores.erase(this);
  drop_link();
  if (listener != nullptr) {
    listener->close();
    listener = nullptr;
  }
  for (auto& p : pending) p->destroy();
  pending.clear();
  if (timer_id != 0) fabric->engine->remove_timer_client(this);
  if (qp && st == St::established) qp->to_error();  // rdma_destroy_id sends DREQ
}

void CmCore::remove_device() {
  emit(CmEventType::device_removal);
  st = St::removed;
  deadline = TimePoint{};
  drop_link();  // the peer's CM sees the connection go (DISCONNECTED, or a failed connect)
  if (listener != nullptr) {
    listener->close();
    listener = nullptr;
  }
  for (auto& p : pending) p->destroy();  // accepted, REQ not yet in: never seen by the user
  pending.clear();
}

void CmCore::on_accept(int fd) {
  std::erase_if(pending, [](const std::shared_ptr<CmCore>& p) {
    if (p->st != St::failed) return false;
    p->destroy();
    return true;
  });
  if (channel->closed() || handle == nullptr) {
    ::close(fd);
    return;
  }
  auto core = std::make_shared<CmCore>(fabric, channel);
  Engine& e = *fabric->engine;
  auto* l = new Link(e, dev, Link::Kind::cm, fd, false, 4096);
  l->cm = core.get();
  if (l->register_fd()) {
    l->cm = nullptr;
    l->close(false);
    core->destroy();
    return;
  }
  core->link = l;
  core->parent = this;
  core->dev = dev;
  core->dev_gen = dev_gen;
  core->local = sock_name(fd, false);
  core->peer = sock_name(fd, true);
  core->st = St::req_wait;
  core->deadline = e.now() + std::chrono::milliseconds(fabric->options.cm_timeout_ms);
  e.schedule(core.get(), core->deadline);
  pending.push_back(std::move(core));
}

void CmCore::on_link_connected(Link&) {}

void CmCore::on_timer(TimePoint now) {
  if (deadline == TimePoint{} || now < deadline) return;
  deadline = TimePoint{};
  switch (st) {
    case St::req_sent:
      drop_link();
      st = St::failed;
      emit(CmEventType::unreachable, errc::timed_out);
      break;
    case St::req_wait:
      drop_link();
      st = St::failed;
      break;
    case St::rep_sent:
      drop_link();
      st = St::failed;
      emit(CmEventType::connect_error, errc::timed_out);
      break;
    case St::disconnecting:
      drop_link();
      st = St::disconnected;
      emit(CmEventType::disconnected);
      break;
    default:
      break;
  }
}

void CmCore::on_link_lost(Link& l) {
  if (&l != link) return;
  link = nullptr;
  deadline = TimePoint{};
  switch (st) {
    case St::req_sent:
      st = St::failed;
      if (l.error == ECONNREFUSED)
        emit(CmEventType::rejected, errc::connection_refused);
      else
        emit(CmEventType::unreachable, l.error != 0 ? from_errno(l.error)
                                                    : std::error_code(errc::connection_reset));
      break;
    case St::req_wait:
    case St::req_received:
      st = St::failed;
      break;
    case St::rep_sent:
      st = St::failed;
      emit(CmEventType::connect_error, errc::connection_reset);
      break;
    case St::established:
    case St::disconnecting: {
      const bool abrupt = st == St::established;
      st = St::disconnected;
      emit(CmEventType::disconnected,
           abrupt ? std::error_code(errc::connection_reset) : std::error_code{});
      break;
    }
    default:
      break;
  }
}

void CmCore::on_link_message(Link& l, const wire::Header& h, std::span<const std::uint8_t> payload) {
  if (&l != link) return;
  const auto t = static_cast<wire::Type>(h.type);
  switch (t) {
    case wire::Type::cm_req:
      if (st == St::req_wait) on_req(h, payload);
      return;
    case wire::Type::cm_rep:
      if (st == St::req_sent) on_rep(payload);
      return;
    case wire::Type::cm_rej:
      if (st != St::req_sent) return;
      drop_link();
      deadline = TimePoint{};
      st = St::rejected;
      if (qp) qp->to_error();
      emit(CmEventType::rejected, errc::connection_refused, payload, wire::kRejPrivateData);
      return;
    case wire::Type::cm_rtu:
      if (st != St::rep_sent) return;
      deadline = TimePoint{};
      st = St::established;
      emit(CmEventType::established);
      return;
    case wire::Type::cm_dreq: {
      if (st != St::established && st != St::disconnecting) return;
      wire::Header rep{};
      rep.type = static_cast<wire::u8>(wire::Type::cm_drep);
      link->put(rep);
      link->flush_now();
      drop_link();
      deadline = TimePoint{};
      st = St::disconnected;
      emit(CmEventType::disconnected);
      return;
    }
    case wire::Type::cm_drep:
      if (st != St::disconnecting) return;
      drop_link();
      deadline = TimePoint{};
      st = St::disconnected;
      emit(CmEventType::disconnected);
      return;
    default:
      return;
  }
}

void CmCore::on_req(const wire::Header&, std::span<const std::uint8_t> payload) {
  CmCore* owner = parent;
  parent = nullptr;
  deadline = TimePoint{};
  if (payload.size() < sizeof(wire::CmConnect) ||
      payload.size() > sizeof(wire::CmConnect) + wire::kReqPrivateData) {
    drop_link();
    st = St::failed;
    return;
  }
  std::memcpy(&peer_conn, payload.data(), sizeof peer_conn);
  // A failed core stays in its listener's `pending` list until the next
  // accept sweeps it (with destroy()), so it is never freed under our feet.
  if (peer_conn.magic.value() != wire::kMagic || owner == nullptr || owner->handle == nullptr ||
      channel->closed()) {
    drop_link();
    st = St::failed;
    return;
  }
  std::shared_ptr<CmCore> self;
  for (auto it = owner->pending.begin(); it != owner->pending.end(); ++it)
    if (it->get() == this) {
      self = std::move(*it);
      owner->pending.erase(it);
      break;
    }
  if (!self) {
    drop_link();
    st = St::failed;
    return;
  }
  st = St::req_received;
  CmEvent ev;
  ev.type = CmEventType::connect_request;
  ev.id = owner->handle;
  ev.new_id = std::make_unique<CmIdImpl>(fabric, self);
  ev.private_data.assign(payload.begin() + sizeof peer_conn, payload.end());
  ev.private_data.resize(wire::kReqPrivateData, 0);
  ev.param.responder_resources = peer_conn.responder_resources;
  ev.param.initiator_depth = peer_conn.initiator_depth;
  ev.param.retry_count = peer_conn.retry_count;
  ev.param.rnr_retry_count = peer_conn.rnr_retry_count;
  channel->push(std::move(ev));
}

void CmCore::on_rep(std::span<const std::uint8_t> payload) {
  if (payload.size() < sizeof(wire::CmConnect)) return;
  wire::CmConnect rep{};
  std::memcpy(&rep, payload.data(), sizeof rep);
  deadline = TimePoint{};
  const std::error_code ec = connect_qp(*this, rep);
  if (ec) {
    drop_link();
    st = St::failed;
    emit(CmEventType::connect_error, ec);
    return;
  }
  peer_conn = rep;
  wire::Header h{};
  h.type = static_cast<wire::u8>(wire::Type::cm_rtu);
  link->put(h);
  st = St::established;
  emit(CmEventType::established, {}, payload.subspan(sizeof rep), wire::kRepPrivateData);
}

}  // namespace detail

namespace {

class ChannelImpl final : public EventChannel {
 public:
  ChannelImpl(std::shared_ptr<Fabric> f, std::shared_ptr<CmChannelCore> core)
      : fabric_(std::move(f)), core_(std::move(core)) {}
  ~ChannelImpl() override {
    auto dropped = core_->purge(nullptr, true);
    dropped.clear();
  }
  int fd() const noexcept override { return core_->fd(); }
  std::unique_ptr<CmId> create_id(std::error_code& ec) override {
    ec.clear();
    return std::make_unique<CmIdImpl>(fabric_, std::make_shared<CmCore>(fabric_, core_));
  }
  bool get_event(CmEvent& out) override { return core_->pop(out); }

 private:
  std::shared_ptr<Fabric> fabric_;
  std::shared_ptr<CmChannelCore> core_;
};

}  // namespace

std::unique_ptr<EventChannel> make_event_channel(std::shared_ptr<Fabric> fabric, std::error_code& ec) {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    ec = from_errno(errno);
    return nullptr;
  }
  ec.clear();
  return std::make_unique<ChannelImpl>(std::move(fabric), std::make_shared<CmChannelCore>(fd));
}

}  // namespace siphon::rdma::soft

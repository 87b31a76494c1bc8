// Setup path of the soft fabric: the provider, devices (attributes, port,
// GID table from the host's addresses), PDs, MRs, CQs, SRQs and QP handles.
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <set>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/soft/core.h"
#include "rdma/soft/objects.h"

namespace siphon::rdma::soft {
namespace detail {

// ------------------------------------------------------------- GIDs

Gid address_to_gid(const NetAddress& a) {
  Gid g{};
  if (a.is_ipv4()) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a.sockaddr_ptr());
    g[10] = g[11] = 0xff;
    std::memcpy(&g[12], &in->sin_addr, 4);
  } else if (a.is_ipv6()) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a.sockaddr_ptr());
    std::memcpy(g.data(), &in6->sin6_addr, 16);
  }
  return g;
}

bool gid_to_address(const Gid& g, std::uint16_t port, std::uint32_t scope, NetAddress& out) {
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(g.data(), kMapped, 12) == 0) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    std::memcpy(&in.sin_addr, &g[12], 4);
    out = NetAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&in), sizeof in);
    return true;
  }
  if (std::all_of(g.begin(), g.end(), [](std::uint8_t b) { return b == 0; })) return false;
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(port);
  std::memcpy(&in6.sin6_addr, g.data(), 16);
  if (g[0] == 0xfe && (g[1] & 0xc0) == 0x80) in6.sin6_scope_id = scope;
  out = NetAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&in6), sizeof in6);
  return true;
}

std::vector<GidEntry> host_gids() {
  std::vector<GidEntry> out;
  ifaddrs* ifa = nullptr;
  if (::getifaddrs(&ifa) != 0) return out;
  // Per interface, in the order rxe lists them: link-local, IPv4-mapped,
  // other IPv6.
  std::vector<std::string> names;
  for (ifaddrs* p = ifa; p != nullptr; p = p->ifa_next)
    if (p->ifa_addr != nullptr && (p->ifa_flags & IFF_UP) != 0 &&
        std::find(names.begin(), names.end(), p->ifa_name) == names.end())
      names.emplace_back(p->ifa_name);
  for (const auto& name : names) {
    for (int pass = 0; pass < 3; ++pass) {
      for (ifaddrs* p = ifa; p != nullptr; p = p->ifa_next) {
        if (p->ifa_addr == nullptr || (p->ifa_flags & IFF_UP) == 0 || name != p->ifa_name) continue;
        const int fam = p->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6) continue;
        const NetAddress a = NetAddress::from_sockaddr(
            p->ifa_addr, fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
        const Gid g = address_to_gid(a);
        const bool ll = fam == AF_INET6 && g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
        const int want = ll ? 0 : fam == AF_INET ? 1 : 2;
        if (want != pass) continue;
        GidEntry e;
        e.index = static_cast<std::uint32_t>(out.size());
        e.gid = g;
        e.type = GidType::roce_v2;
        e.netdev = name;
        out.push_back(std::move(e));
      }
    }
  }
  ::freeifaddrs(ifa);
  return out;
}

// ------------------------------------------------------------- fabric

DeviceCore::DeviceCore(Fabric& f, unsigned i, const SoftOptions& o)
    : fabric(f), index(i), mrs(o.max_mr) {
  std::random_device rd;
  attr.name = "soft" + std::to_string(i);
  attr.node_guid = (static_cast<std::uint64_t>(rd()) << 32 | rd()) ^
                   (static_cast<std::uint64_t>(::getpid()) << 16) ^ i;
  attr.fw_ver = "siphon-soft 1.0";
  attr.vendor_id = 0x5350;  // not a registered OUI: a software device
  attr.vendor_part_id = 1;
  attr.max_mr_size = 1ull << 40;
  attr.max_qp = o.max_qp;
  attr.max_qp_wr = o.max_qp_wr;
  attr.max_sge = o.max_sge;
  attr.max_cq = o.max_cq;
  attr.max_cqe = o.max_cqe;
  attr.max_mr = o.max_mr;
  attr.max_mw = o.memory_windows ? o.max_mr : 0;
  attr.mw_type2 = o.memory_windows;
  attr.max_pd = o.max_pd;
  attr.max_srq = o.max_srq;
  attr.max_srq_wr = o.max_srq_wr;
  attr.max_srq_sge = o.max_sge;
  attr.max_qp_rd_atom = o.max_qp_rd_atom;
  attr.max_qp_init_rd_atom = o.max_qp_rd_atom;
  attr.phys_port_cnt = 1;
}

Fabric::Fabric(const SoftOptions& o) : options(o) {
  // The environment can only turn the same-host paths off (a test or a user
  // comparing them); any other value keeps the options' choice. tcp: every
  // byte on the TCP link; copy: the TCP link with READs copied same-host.
  if (const char* v = std::getenv("SIPHON_SOFT_LINK"); v != nullptr) {
    if (std::strcmp(v, "tcp") == 0)
      options.same_host_copy = options.same_host_rings = false;
    else if (std::strcmp(v, "copy") == 0)
      options.same_host_rings = false;
    else if (std::strcmp(v, "rings") == 0)
      options.same_host_rings = true;
    else if (std::strcmp(v, "auto") != 0 && v[0] != '\0')
      SIPHON_LOG(rdma, 0, "soft: SIPHON_SOFT_LINK={} ignored: use tcp, copy, rings or auto", v);
  }
  if (!options.same_host_copy) options.same_host_rings = false;
  if (const char* v = std::getenv("SIPHON_SOFT_ENGINE"); v != nullptr) {
    if (std::strcmp(v, "driven") == 0)
      options.driven_engine = true;
    else if (std::strcmp(v, "thread") == 0)
      options.driven_engine = false;
    else if (v[0] != '\0')
      SIPHON_LOG(rdma, 0, "soft: SIPHON_SOFT_ENGINE={} ignored: use driven or thread", v);
  }
  for (unsigned i = 0; i < o.device_count; ++i)
    devices.push_back(std::make_unique<DeviceCore>(*this, i, options));
  engine = std::make_unique<Engine>(options, counters);
}

Fabric::~Fabric() {
  engine->call([this] {
    for (auto& d : devices)
      for (auto& b : d->blocks)
        if (b->listener != nullptr) b->listener->close();
  });
  engine.reset();
}

}  // namespace detail

using namespace detail;

// ------------------------------------------------------------- MR / CQ / SRQ

namespace {

class MrImpl final : public MemoryRegion {
 public:
  MrImpl(std::shared_ptr<Fabric> f, DeviceCore& d, void* addr, std::size_t len, std::uint32_t access,
         std::uint32_t key)
      : fabric_(std::move(f)), dev_(d), addr_(addr), len_(len), access_(access), key_(key) {
    fabric_->counters.mrs_live.fetch_add(1, std::memory_order_relaxed);
  }
  ~MrImpl() override {
    dev_.mrs.remove(key_);
    fabric_->counters.mrs_live.fetch_sub(1, std::memory_order_relaxed);
  }
  void* addr() const noexcept override { return addr_; }
  std::size_t length() const noexcept override { return len_; }
  std::uint32_t lkey() const noexcept override { return key_; }
  std::uint32_t rkey() const noexcept override { return key_; }
  std::uint32_t access() const noexcept override { return access_; }

 private:
  std::shared_ptr<Fabric> fabric_;
  DeviceCore& dev_;
  void* addr_;
  std::size_t len_;
  std::uint32_t access_;
  std::uint32_t key_;
};

}  // namespace

MwImpl::MwImpl(std::shared_ptr<Fabric> f, DeviceCore& d, std::uint32_t key)
    : fabric_(std::move(f)), dev_(d), index_(key >> 8), rkey_(key) {
  fabric_->counters.mws_live.fetch_add(1, std::memory_order_relaxed);
}
MwImpl::~MwImpl() {
  dev_.mrs.remove_mw(index_);
  fabric_->counters.mws_live.fetch_sub(1, std::memory_order_relaxed);
}

namespace {

class SrqImpl final : public SharedReceiveQueue {
 public:
  SrqImpl(std::shared_ptr<Fabric> f, std::shared_ptr<SrqCore> core)
      : fabric_(std::move(f)), core_(std::move(core)) {
    fabric_->counters.srqs_live.fetch_add(1, std::memory_order_relaxed);
  }
  ~SrqImpl() override { fabric_->counters.srqs_live.fetch_sub(1, std::memory_order_relaxed); }
  std::error_code post_recv(std::span<const RecvWr> wrs, std::size_t* bad) noexcept override {
    const FaultPlan& fp = fabric_->options.faults;
    return core_->ring.post(wrs, bad, fp.fail_post.enabled() ? &core_->rng : nullptr, &fp.fail_post,
                            &fabric_->counters);
  }
  std::uint32_t max_wr() const noexcept override { return core_->ring.capacity(); }
  const std::shared_ptr<SrqCore>& core() const noexcept { return core_; }

 private:
  std::shared_ptr<Fabric> fabric_;
  std::shared_ptr<SrqCore> core_;
};

bool memory_mapped(void* addr, std::size_t len) {
  const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(addr);
  if (a + len < a) return false;
  const std::uintptr_t first = a & ~(page - 1);
  const std::uintptr_t last = (a + len + page - 1) & ~(page - 1);
  std::vector<unsigned char> vec((last - first) / page);
  return ::mincore(reinterpret_cast<void*>(first), last - first, vec.data()) == 0;
}

}  // namespace

CqImpl::CqImpl(std::shared_ptr<Fabric> f, DeviceCore& d, std::uint32_t gen,
               std::shared_ptr<CqCore> core)
    : fabric_(std::move(f)), dev_(d), gen_(gen), core_(std::move(core)) {
  fabric_->counters.cqs_live.fetch_add(1, std::memory_order_relaxed);
}
CqImpl::~CqImpl() {
  dev_.cq_count.fetch_sub(1);
  fabric_->counters.cqs_live.fetch_sub(1, std::memory_order_relaxed);
}
std::size_t CqImpl::poll(std::span<Wc> out) noexcept {
  // Driven engine: the attached thread pushes what it posted, and pulls what
  // the rings brought, before it looks.
  if (detail::Engine::attached_cq() == core_.get()) fabric_->engine->drive(false, false);
  return core_->poll(out);
}
int CqImpl::progress_fd() const noexcept {
  return fabric_->engine->driven() ? core_->domain_fd() : -1;
}
void CqImpl::attach_progress(bool on, void (*kick)(void*), void* arg) noexcept {
  fabric_->engine->attach(on, kick, arg, core_.get());
}
bool CqImpl::progress(bool io, bool before_sleep) noexcept {
  return fabric_->engine->driven() && fabric_->engine->drive(io, before_sleep);
}
std::error_code CqImpl::arm(bool solicited_only) noexcept {
  core_->arm(solicited_only);
  return {};
}
int CqImpl::channel_fd() const noexcept { return core_->fd(); }
std::size_t CqImpl::consume_events() noexcept { return core_->consume_events(); }
std::uint32_t CqImpl::capacity() const noexcept { return core_->capacity(); }

// ------------------------------------------------------------- QP

QpImpl::QpImpl(std::shared_ptr<Fabric> f, std::shared_ptr<QpCore> core)
    : fabric_(std::move(f)), core_(std::move(core)) {
  fabric_->counters.qps_live.fetch_add(1, std::memory_order_relaxed);
}

QpImpl::~QpImpl() {
  QpCore* c = core_.get();
  fabric_->engine->call([c] { c->destroy(); });
  c->dev.qp_count.fetch_sub(1);
  fabric_->counters.qps_live.fetch_sub(1, std::memory_order_relaxed);
}
std::uint32_t QpImpl::qp_num() const noexcept { return core_->qpn; }
QpState QpImpl::state() const noexcept { return core_->state(); }
const QpCaps& QpImpl::caps() const noexcept { return core_->caps; }
std::error_code QpImpl::modify(const QpAttr& attr, std::uint32_t mask) noexcept {
  std::error_code ec;
  QpCore* c = core_.get();
  try {
    fabric_->engine->call([&] { ec = c->modify(attr, mask); });
  } catch (const std::bad_alloc&) {
    ec = errc::out_of_memory;
  }
  return ec;
}
std::error_code QpImpl::query_path(QpPath& out) const {
  // The attributes are engine-owned: read them there, as modify() writes them.
  std::error_code ec;
  const QpCore* c = core_.get();
  fabric_->engine->call([&] {
    const QpState st = c->state();
    if (st == QpState::reset || st == QpState::init) {
      ec = errc::invalid_qp_state;
      return;
    }
    out = QpPath{};
    out.dest_qp_num = c->attr.dest_qp_num;
    out.sgid = c->sgid;
    out.dgid = c->attr.av.dgid;
    out.path_mtu = c->attr.path_mtu;
  });
  return ec;
}
std::error_code QpImpl::post_send(std::span<const SendWr> wrs, std::size_t* bad) noexcept {
  return core_->post_send(wrs, bad);
}
std::error_code QpImpl::post_recv(std::span<const RecvWr> wrs, std::size_t* bad) noexcept {
  return core_->post_recv(wrs, bad);
}

std::shared_ptr<QpCore> create_qp_core(const std::shared_ptr<Fabric>& fabric, DeviceCore& dev,
                                       std::uint32_t pd, std::uint32_t gen, const QpInit& init,
                                       std::error_code& ec) {
  const DeviceAttr& a = dev.attr;
  auto* scq = dynamic_cast<CqImpl*>(init.send_cq);
  auto* rcq = dynamic_cast<CqImpl*>(init.recv_cq);
  auto* srq = dynamic_cast<SrqImpl*>(init.srq);
  const QpCaps& c = init.caps;
  if (scq == nullptr || rcq == nullptr || &scq->device() != &dev || &rcq->device() != &dev ||
      (init.srq != nullptr && (srq == nullptr || srq->core()->pd != pd)) ||
      c.max_send_wr > a.max_qp_wr || (init.srq == nullptr && c.max_recv_wr > a.max_qp_wr) ||
      c.max_send_sge > a.max_sge || (init.srq == nullptr && c.max_recv_sge > a.max_sge) ||
      c.max_inline_data > fabric->options.max_inline_data) {
    ec = errc::invalid_argument;
    return nullptr;
  }
  if (!dev.alive(gen) || scq->generation() != gen || rcq->generation() != gen) {
    ec = errc::device_not_found;  // the device (or that of a CQ) was taken away
    return nullptr;
  }
  if (dev.qp_count.fetch_add(1) >= a.max_qp) {
    dev.qp_count.fetch_sub(1);
    ec = errc::resource_exhausted;
    return nullptr;
  }
  const std::uint64_t seed =
      fabric->options.faults.seed * 0x9E3779B97F4A7C15ull + dev.qp_serial.fetch_add(1) + 1;
  std::shared_ptr<QpCore> core;
  try {
    core = std::make_shared<QpCore>(dev, pd, init, scq->core(), rcq->core(),
                                    srq != nullptr ? srq->core() : nullptr, seed);
  } catch (const std::bad_alloc&) {
    dev.qp_count.fetch_sub(1);
    ec = errc::out_of_memory;
    return nullptr;
  }
  // Checked again on the engine thread, where removals run: a QP is either
  // registered before the removal (which moves it to ERR) or not made.
  fabric->engine->call([&] {
    if (!dev.alive(gen))
      ec = errc::device_not_found;
    else
      core->register_qpn(ec);
  });
  if (ec) {
    dev.qp_count.fetch_sub(1);
    return nullptr;
  }
  return core;
}

// ------------------------------------------------------------- PD

namespace {

class PdImpl final : public ProtectionDomain {
 public:
  PdImpl(std::shared_ptr<Fabric> f, DeviceCore& d, std::uint32_t id, std::uint32_t gen)
      : fabric_(std::move(f)), dev_(d), id_(id), gen_(gen) {
    fabric_->counters.pds_live.fetch_add(1, std::memory_order_relaxed);
  }
  ~PdImpl() override { fabric_->counters.pds_live.fetch_sub(1, std::memory_order_relaxed); }

  std::unique_ptr<MemoryRegion> reg_mr(void* addr, std::size_t len, std::uint32_t access,
                                       std::error_code& ec) override {
    constexpr std::uint32_t kKnown = kLocalWrite | kRemoteWrite | kRemoteRead | kMwBind;
    if (!dev_.alive(gen_)) {
      ec = errc::device_not_found;
      return nullptr;
    }
    if ((access & ~kKnown) != 0 || ((access & kRemoteWrite) != 0 && (access & kLocalWrite) == 0) ||
        (addr == nullptr && len != 0) || len > dev_.attr.max_mr_size) {
      ec = errc::invalid_argument;
      return nullptr;
    }
    if (len != 0 && !memory_mapped(addr, len)) {
      ec = errc::memory_registration_failed;
      return nullptr;
    }
    const std::uint32_t key =
        dev_.mrs.add(reinterpret_cast<std::uint64_t>(addr), len, access, id_, ec);
    if (ec) return nullptr;
    return std::make_unique<MrImpl>(fabric_, dev_, addr, len, access, key);
  }

  std::unique_ptr<SharedReceiveQueue> create_srq(const SrqInit& init, std::error_code& ec) override {
    if (!dev_.alive(gen_)) {
      ec = errc::device_not_found;
      return nullptr;
    }
    if (init.max_wr == 0 || init.max_wr > dev_.attr.max_srq_wr || init.max_sge == 0 ||
        init.max_sge > dev_.attr.max_srq_sge) {
      ec = errc::invalid_argument;
      return nullptr;
    }
    auto core = std::make_shared<SrqCore>(init.max_wr, init.max_sge, id_);
    core->rng = Rng(fabric_->options.faults.seed ^ 0x5352510000000000ull ^ init.max_wr);
    ec.clear();
    return std::make_unique<SrqImpl>(fabric_, std::move(core));
  }

  std::unique_ptr<MemoryWindow> alloc_mw(std::error_code& ec) override {
    if (!dev_.alive(gen_)) {
      ec = errc::device_not_found;
      return nullptr;
    }
    if (!dev_.attr.mw_type2) {
      ec = errc::not_supported;
      return nullptr;
    }
    const std::uint32_t key = dev_.mrs.add_mw(id_, ec);
    if (ec) return nullptr;
    return std::make_unique<MwImpl>(fabric_, dev_, key);
  }

  std::unique_ptr<QueuePair> create_qp(const QpInit& init, std::error_code& ec) override {
    auto core = create_qp_core(fabric_, dev_, id_, gen_, init, ec);
    if (!core) return nullptr;
    return std::make_unique<QpImpl>(fabric_, std::move(core));
  }

  DeviceCore& device() noexcept { return dev_; }
  std::uint32_t id() const noexcept { return id_; }
  std::uint32_t generation() const noexcept { return gen_; }

 private:
  std::shared_ptr<Fabric> fabric_;
  DeviceCore& dev_;
  std::uint32_t id_;
  std::uint32_t gen_;  // DeviceCore::generation of the device handle it came from
};

// ------------------------------------------------------------- device

class DeviceImpl final : public Device {
 public:
  DeviceImpl(std::shared_ptr<Fabric> f, DeviceCore& d, std::uint32_t gen)
      : fabric_(std::move(f)), dev_(d), gen_(gen) {
    fabric_->counters.contexts_live.fetch_add(1, std::memory_order_relaxed);
  }
  ~DeviceImpl() override {
    fabric_->counters.contexts_live.fetch_sub(1, std::memory_order_relaxed);
  }
  const DeviceAttr& attr() const noexcept override { return dev_.attr; }

  std::error_code query_port(std::uint8_t port, PortAttr& out) const override {
    if (!dev_.alive(gen_)) return errc::device_not_found;
    if (port != 1) return errc::invalid_argument;
    const bool up = !host_gids().empty();
    out.state = up ? PortState::active : PortState::down;
    out.max_mtu = fabric_->options.max_mtu;
    out.active_mtu = fabric_->options.active_mtu;
    out.link_layer = LinkLayer::ethernet;
    out.lid = 0;
    out.gid_tbl_len = 1024;
    return {};
  }

  std::error_code query_gids(std::uint8_t port, std::vector<GidEntry>& out) const override {
    if (!dev_.alive(gen_)) return errc::device_not_found;
    if (port != 1) return errc::invalid_argument;
    out = host_gids();
    return {};
  }

  std::unique_ptr<ProtectionDomain> alloc_pd(std::error_code& ec) override {
    if (!dev_.alive(gen_)) {
      ec = errc::device_not_found;
      return nullptr;
    }
    const std::uint32_t id = dev_.next_pd.fetch_add(1);
    if (id > dev_.attr.max_pd) {
      ec = errc::resource_exhausted;
      return nullptr;
    }
    ec.clear();
    return std::make_unique<PdImpl>(fabric_, dev_, id, gen_);
  }

  std::unique_ptr<CompletionQueue> create_cq(std::uint32_t cqe, std::error_code& ec) override {
    if (!dev_.alive(gen_)) {
      ec = errc::device_not_found;
      return nullptr;
    }
    if (cqe == 0 || cqe > dev_.attr.max_cqe) {
      ec = errc::invalid_argument;
      return nullptr;
    }
    if (dev_.cq_count.fetch_add(1) >= dev_.attr.max_cq) {
      dev_.cq_count.fetch_sub(1);
      ec = errc::resource_exhausted;
      return nullptr;
    }
    ec.clear();
    auto core = std::make_shared<CqCore>(cqe, fabric_->counters, fabric_->options.faults, ec);
    if (!ec && fabric_->engine->driven()) {
      // Its progress domain: the links of QPs completing here wake only its poller.
      const int ep = fabric_->engine->open_domain();
      if (ep < 0) ec = from_errno(errno);
      core->set_domain(ep);
    }
    if (ec) {
      dev_.cq_count.fetch_sub(1);
      return nullptr;
    }
    return std::make_unique<CqImpl>(fabric_, dev_, gen_, std::move(core));
  }

 private:
  std::shared_ptr<Fabric> fabric_;
  DeviceCore& dev_;
  std::uint32_t gen_;  // DeviceCore::generation when it was opened
};

// ------------------------------------------------------------- provider

// Every live provider of the process, for set_link_down_all. Never
// destroyed: a provider held in a static (tests keep some) may be destroyed
// after a function-local registry would have been.
std::mutex& providers_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::set<Fabric*>& providers() {
  static auto* all = new std::set<Fabric*>;
  return *all;
}

// Engine thread: device `d` has just been marked removed. Its CM ids are
// told (one DEVICE_REMOVAL each; listeners and connections closed), then
// its QPs go to ERR (everything outstanding flushed) and its QPN blocks
// close, so peers' requests find no adapter. New blocks open on demand
// once the device is given back.
void take_device_away(Fabric& f, DeviceCore& d) {
  std::vector<CmCore*> ids;
  for (CmCore* c : f.cm_cores)
    if (c->dev == &d && c->handle != nullptr && c->st != CmCore::St::removed) ids.push_back(c);
  // Telling one id never destroys another user-visible id (only the
  // pending, not yet requested cores of a listener), so `ids` stays valid.
  for (CmCore* c : ids) c->remove_device();
  std::size_t qps = 0;
  for (auto& b : d.blocks) {
    for (QpCore* q : b->qps)
      if (q != nullptr) {
        q->remove_device();
        ++qps;
      }
    if (b->listener != nullptr) b->listener->close();
    b->listener = nullptr;
  }
  d.blocks.clear();
  SIPHON_LOG(rdma, 1,
             "soft: device {} removed (soft::set_device_removed): {} CM ids told, {} QPs to ERR",
             d.attr.name, ids.size(), qps);
}

class ProviderImpl final : public Provider {
 public:
  explicit ProviderImpl(const SoftOptions& o) : fabric_(std::make_shared<Fabric>(o)) {
    std::lock_guard lk(providers_mu());
    providers().insert(fabric_.get());
  }
  ~ProviderImpl() override {
    std::lock_guard lk(providers_mu());
    providers().erase(fabric_.get());
  }
  void set_link_down(bool down) { set_fabric_link_down(*fabric_, down); }
  static void set_fabric_link_down(Fabric& f, bool down) {
    if (f.engine->link_down() == down) return;
    SIPHON_LOG(rdma, 1, "soft: link {} (soft::set_link_down)", down ? "down: every link closed" : "up again");
    f.engine->call([&f, down] { f.engine->set_link_down(down); });
  }
  bool set_device_removed(std::string_view name, bool removed) {
    return set_fabric_device_removed(*fabric_, name, removed);
  }
  // False when the fabric has no device `name`.
  static bool set_fabric_device_removed(Fabric& f, std::string_view name, bool removed) {
    DeviceCore* d = nullptr;
    for (auto& dc : f.devices)
      if (dc->attr.name == name) d = dc.get();
    if (d == nullptr) return false;
    f.engine->call([&f, d, removed] {
      if (d->removed.load() == removed) return;
      if (!removed) {
        d->removed.store(false);
        SIPHON_LOG(rdma, 1, "soft: device {} given back (soft::set_device_removed)", d->attr.name);
        return;
      }
      // `removed` before `generation` (DeviceCore::generation).
      d->removed.store(true);
      d->generation.fetch_add(1);
      Counters::bump(f.counters.device_removals);
      take_device_away(f, *d);
    });
    return true;
  }
  std::string_view name() const noexcept override { return "soft"; }
  // Driven: the engine thread only stands in while no worker is attached.
  bool completions_from_process_thread() const noexcept override { return !fabric_->options.driven_engine; }
  bool progress_by_pollers() const noexcept override { return fabric_->options.driven_engine; }
  std::vector<std::string> list_devices() override {
    std::vector<std::string> names;
    for (auto& d : fabric_->devices)
      if (!d->removed.load()) names.push_back(d->attr.name);
    return names;
  }
  std::unique_ptr<Device> open_device(std::string_view name, std::error_code& ec) override {
    for (auto& d : fabric_->devices)
      if (d->attr.name == name) {
        // The generation before `removed` (see DeviceCore::generation).
        const std::uint32_t gen = d->generation.load();
        if (d->removed.load()) break;  // taken away: as if it did not exist
        ec.clear();
        return std::make_unique<DeviceImpl>(fabric_, *d, gen);
      }
    ec = fabric_->devices.empty() ? errc::no_device : errc::device_not_found;
    return nullptr;
  }
  std::unique_ptr<EventChannel> create_event_channel(std::error_code& ec) override {
    return make_event_channel(fabric_, ec);
  }
  SoftCounters counters() const noexcept { return fabric_->counters.snapshot(); }
  std::vector<SoftQpPath> qp_paths() const {
    std::vector<SoftQpPath> out;
    fabric_->engine->call([&] {
      for (auto& d : fabric_->devices)
        for (auto& b : d->blocks)
          for (QpCore* q : b->qps)
            if (q != nullptr && !q->destroyed)
              out.push_back({q->qpn, q->attr.av.traffic_class, q->attr.av.sl, q->attr.timeout});
    });
    return out;
  }

 private:
  std::shared_ptr<Fabric> fabric_;
};

}  // namespace

std::unique_ptr<Device> open_device_handle(std::shared_ptr<Fabric> fabric, DeviceCore& dev,
                                           std::uint32_t gen) {
  return std::make_unique<DeviceImpl>(std::move(fabric), dev, gen);
}

DeviceCore* device_of(ProtectionDomain& pd, std::uint32_t* pd_id, std::uint32_t* gen) {
  auto* p = dynamic_cast<PdImpl*>(&pd);
  if (p == nullptr) return nullptr;
  *pd_id = p->id();
  *gen = p->generation();
  return &p->device();
}

std::unique_ptr<Provider> make_provider(const SoftOptions& o) {
  const char* bad = nullptr;
  if (o.device_count == 0 || o.device_count > 16) bad = "device_count must be 1..16";
  else if (o.max_qp_wr == 0 || o.max_sge == 0 || o.max_cqe == 0 || o.max_srq_wr == 0 ||
           o.max_qp == 0 || o.max_cq == 0 || o.max_mr == 0 || o.max_pd == 0)
    bad = "device limits must be positive";
  else if (o.max_qp_rd_atom == 0 || o.max_qp_rd_atom > 255) bad = "max_qp_rd_atom must be 1..255";
  else if (o.active_mtu > o.max_mtu || o.max_mtu < Mtu::mtu256 || o.max_mtu > Mtu::mtu4096)
    bad = "active_mtu must not exceed max_mtu (256..4096)";
  else if (o.link_buffer_bytes < 4096) bad = "link_buffer_bytes must be at least 4096";
  else if (o.same_host_ring_bytes < 4096 || o.same_host_ring_bytes > (64u << 20))
    bad = "same_host_ring_bytes must be between 4096 and 64 MiB";
  else if (o.faults.fail_post.probability < 0 || o.faults.fail_post.probability > 1 ||
           o.faults.error_completion.probability < 0 || o.faults.error_completion.probability > 1 ||
           o.faults.qp_to_err.probability < 0 || o.faults.qp_to_err.probability > 1 ||
           o.faults.link_drop.probability < 0 || o.faults.link_drop.probability > 1 ||
           o.faults.delay.probability < 0 || o.faults.delay.probability > 1 ||
           o.faults.corrupt_data.probability < 0 || o.faults.corrupt_data.probability > 1)
    bad = "fault probabilities must be within 0..1";
  else if (o.faults.completion_error == WcStatus::success)
    bad = "faults.completion_error must be an error status";
  if (bad != nullptr)
    throw SetupError(errc::config_error, std::string("invalid soft fabric options: ") + bad,
                     "fix the SoftOptions passed to soft::make_provider");
  return std::make_unique<ProviderImpl>(o);
}

std::vector<SoftQpPath> qp_paths(const Provider& provider) {
  const auto* p = dynamic_cast<const ProviderImpl*>(&provider);
  return p != nullptr ? p->qp_paths() : std::vector<SoftQpPath>{};
}

bool set_link_down(Provider& provider, bool down) {
  auto* p = dynamic_cast<ProviderImpl*>(&provider);
  if (p == nullptr) return false;
  p->set_link_down(down);
  return true;
}

std::size_t set_link_down_all(bool down) {
  std::lock_guard lk(providers_mu());
  for (Fabric* f : providers()) ProviderImpl::set_fabric_link_down(*f, down);
  return providers().size();
}

bool set_device_removed(Provider& provider, std::string_view name, bool removed) {
  auto* p = dynamic_cast<ProviderImpl*>(&provider);
  return p != nullptr && p->set_device_removed(name, removed);
}

std::size_t set_device_removed_all(std::string_view name, bool removed) {
  std::lock_guard lk(providers_mu());
  std::size_t n = 0;
  for (Fabric* f : providers())
    if (ProviderImpl::set_fabric_device_removed(*f, name, removed)) ++n;
  return n;
}

std::optional<SoftCounters> counters(const Provider& provider) {
  const auto* p = dynamic_cast<const ProviderImpl*>(&provider);
  if (p == nullptr) return std::nullopt;
  return p->counters();
}

}  // namespace siphon::rdma::soft

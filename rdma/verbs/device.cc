// The verbs Provider and Device: discovery, opening, attributes, ports, GID
// tables, PDs and CQs (with their completion channels).
//
// Opening: when librdmacm works, devices are opened through
// rdma_get_devices(), so PDs and CQs live on the same ibv_context that
// rdma_cm ids use (rdma_create_qp requires that). When it does not (no
// rdma_ucm module, no /dev/infiniband/rdma_cm), the device is opened with
// ibv_open_device() and out-of-band QP setup still works; only
// create_event_channel() fails.
#include <endian.h>
#include <fcntl.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/verbs/verbs_internal.h"

namespace siphon::rdma::verbs {
namespace detail {
namespace {

std::string device_name(ibv_device* d) {
  const char* n = ::ibv_get_device_name(d);
  return n != nullptr ? std::string(n) : std::string();
}

// The arrays rdma-core hands out, freed on every path.
struct DeviceListFree {
  void operator()(ibv_device** l) const noexcept { ::ibv_free_device_list(l); }
};
struct CmDevicesFree {
  void operator()(ibv_context** l) const noexcept { ::rdma_free_devices(l); }
};
using DeviceList = std::unique_ptr<ibv_device*[], DeviceListFree>;
using CmDevices = std::unique_ptr<ibv_context*[], CmDevicesFree>;

std::error_code set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return setup_error(errno);
  return {};
}

}  // namespace

// ---------------------------------------------------------------- handles

ContextRef::~ContextRef() {
  if (owned && ctx != nullptr) {
    if (const int rc = ::ibv_close_device(ctx); rc != 0)
      SIPHON_LOG(rdma, 0, "verbs: ibv_close_device failed: {}", std::strerror(errno));
  }
}

PdRef::~PdRef() {
  if (pd != nullptr) {
    if (const int rc = ::ibv_dealloc_pd(pd); rc != 0)
      SIPHON_LOG(rdma, 0, "verbs: ibv_dealloc_pd failed: {} (an MR, SRQ or QP still uses it)",
                 std::strerror(rc));
  }
}

CqRef::~CqRef() {
  if (cq != nullptr) {
    if (unacked != 0) ::ibv_ack_cq_events(cq, unacked);
    if (const int rc = ::ibv_destroy_cq(cq); rc != 0)
      SIPHON_LOG(rdma, 0, "verbs: ibv_destroy_cq failed: {} (a QP still uses it)",
                 std::strerror(rc));
  }
  if (channel != nullptr) {
    if (const int rc = ::ibv_destroy_comp_channel(channel); rc != 0)
      SIPHON_LOG(rdma, 0, "verbs: ibv_destroy_comp_channel failed: {}", std::strerror(errno));
  }
}

// ----------------------------------------------------------------- device

std::unique_ptr<VerbsDevice> VerbsDevice::open(std::shared_ptr<ContextRef> ctx,
                                               std::error_code& ec) {
  ibv_device_attr a{};
  if (const int rc = ::ibv_query_device(ctx->ctx, &a); rc != 0) {
    ec = setup_error(rc);
    SIPHON_LOG(rdma, 1, "verbs: ibv_query_device({}) failed: {}", device_name(ctx->ctx->device),
               std::strerror(rc));
    return nullptr;
  }
  DeviceAttr d;
  d.name = device_name(ctx->ctx->device);
  d.node_guid = be64toh(a.node_guid);
  d.fw_ver = std::string(a.fw_ver, ::strnlen(a.fw_ver, sizeof(a.fw_ver)));
  d.vendor_id = a.vendor_id;
  d.vendor_part_id = a.vendor_part_id;
  d.max_mr_size = a.max_mr_size;
  auto u32 = [](int v) { return v < 0 ? 0u : static_cast<std::uint32_t>(v); };
  d.max_qp = u32(a.max_qp);
  d.max_qp_wr = u32(a.max_qp_wr);
  d.max_sge = u32(a.max_sge);
  d.max_cq = u32(a.max_cq);
  d.max_cqe = u32(a.max_cqe);
  d.max_mr = u32(a.max_mr);
  d.max_pd = u32(a.max_pd);
  d.max_mw = u32(a.max_mw);
  d.mw_type2 = d.max_mw != 0 && (a.device_cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A |
                                                       IBV_DEVICE_MEM_WINDOW_TYPE_2B)) != 0;
  d.max_srq = u32(a.max_srq);
  d.max_srq_wr = u32(a.max_srq_wr);
  d.max_srq_sge = u32(a.max_srq_sge);
  d.max_qp_rd_atom = u32(a.max_qp_rd_atom);
  d.max_qp_init_rd_atom = u32(a.max_qp_init_rd_atom);
  d.phys_port_cnt = a.phys_port_cnt;
  ec.clear();
  return std::unique_ptr<VerbsDevice>(new VerbsDevice(std::move(ctx), std::move(d)));
}

std::error_code VerbsDevice::query_port(std::uint8_t port, PortAttr& out) const {
  if (auto ec = check_port_number(port, attr_.phys_port_cnt)) return ec;
  ibv_port_attr pa{};
  if (const int rc = ::ibv_query_port(ctx_->ctx, port, &pa); rc != 0) return setup_error(rc);
  const RawPortAnswer raw{static_cast<int>(pa.state), static_cast<int>(pa.max_mtu),
                          static_cast<int>(pa.active_mtu), static_cast<int>(pa.link_layer),
                          pa.gid_tbl_len};
  if (const char* problem = port_answer_problem(raw)) {
    SIPHON_LOG(rdma, 1,
               "verbs: {} port {}: ibv_query_port returned an answer no device gives ({}: state {}, "
               "MTU {}/{}, link layer {}, {} GIDs); ignoring the port (a driver that did not "
               "answer, or a broken device)",
               attr_.name, port, problem, static_cast<int>(pa.state), static_cast<int>(pa.active_mtu),
               static_cast<int>(pa.max_mtu), static_cast<int>(pa.link_layer), pa.gid_tbl_len);
    return errc::io_error;
  }
  out.state = port_state_from_ibv(pa.state);
  out.max_mtu = mtu_from_ibv(pa.max_mtu);
  out.active_mtu = mtu_from_ibv(pa.active_mtu);
  out.link_layer = link_layer_from_ibv(pa.link_layer);
  out.lid = pa.lid;
  out.gid_tbl_len = pa.gid_tbl_len < 0 ? 0u : static_cast<std::uint32_t>(pa.gid_tbl_len);
  return {};
}

std::error_code VerbsDevice::query_gids(std::uint8_t port, std::vector<GidEntry>& out) const {
  out.clear();
  PortAttr pa;
  if (auto ec = query_port(port, pa)) return ec;
  auto add = [&](const ibv_gid_entry& e) {
    GidEntry g;
    g.index = e.gid_index;
    std::memcpy(g.gid.data(), e.gid.raw, sizeof(e.gid.raw));
    if (std::all_of(g.gid.begin(), g.gid.end(), [](std::uint8_t b) { return b == 0; })) return;
    g.type = gid_type_from_ibv(e.gid_type, pa.link_layer);
    char name[IF_NAMESIZE] = {};
    if (e.ndev_ifindex != 0 && ::if_indextoname(e.ndev_ifindex, name) != nullptr) g.netdev = name;
    out.push_back(std::move(g));
  };

  // The whole table in one call (ioctl, or libibverbs' sysfs fallback); it
  // holds every port's entries, so size it for all ports.
  std::size_t slots = 0;
  for (unsigned p = 1; p <= attr_.phys_port_cnt; ++p) {  // not u8: 255 ports must end
    PortAttr other;
    if (!query_port(static_cast<std::uint8_t>(p), other)) slots += other.gid_tbl_len;
  }
  std::vector<ibv_gid_entry> table(std::max<std::size_t>(slots, 1));
  const ssize_t n = ::ibv_query_gid_table(ctx_->ctx, table.data(), table.size(), 0);
  if (n >= 0) {
    for (ssize_t i = 0; i < n; ++i)
      if (table[static_cast<std::size_t>(i)].port_num == port) add(table[static_cast<std::size_t>(i)]);
  } else {
    // One bad slot fails the whole table; read the port's slots one by one
    // and skip the empty or unreadable ones.
    SIPHON_LOG(rdma, 5, "verbs: ibv_query_gid_table({}) failed: {}; reading entries one by one",
               attr_.name, std::strerror(static_cast<int>(-n)));
    int last_error = 0;
    for (std::uint32_t i = 0; i < pa.gid_tbl_len; ++i) {
      ibv_gid_entry e{};
      const int rc = ::ibv_query_gid_ex(ctx_->ctx, port, i, &e, 0);
      if (rc == 0)
        add(e);
      else if (rc != ENODATA && rc != EINVAL)
        last_error = rc;
    }
    if (out.empty() && last_error != 0) return setup_error(last_error);
  }
  std::sort(out.begin(), out.end(),
            [](const GidEntry& a, const GidEntry& b) { return a.index < b.index; });
  return {};
}

std::unique_ptr<ProtectionDomain> VerbsDevice::alloc_pd(std::error_code& ec) {
  auto ref = std::make_shared<PdRef>(ctx_, nullptr);
  ref->pd = ::ibv_alloc_pd(ctx_->ctx);
  if (ref->pd == nullptr) {
    ec = setup_error(errno);
    SIPHON_LOG(rdma, 1, "verbs: ibv_alloc_pd({}) failed: {}", attr_.name, std::strerror(errno));
    return nullptr;
  }
  ec.clear();
  return std::make_unique<VerbsPd>(std::move(ref));
}

std::unique_ptr<CompletionQueue> VerbsDevice::create_cq(std::uint32_t cqe, std::error_code& ec) {
  if (cqe == 0 || (attr_.max_cqe != 0 && cqe > attr_.max_cqe)) {
    SIPHON_LOG(rdma, 1, "verbs: create_cq({}) on {}: the size must be 1-{}", cqe, attr_.name,
               attr_.max_cqe);
    ec = errc::invalid_argument;
    return nullptr;
  }
  auto ref = std::make_shared<CqRef>(ctx_);
  ref->channel = ::ibv_create_comp_channel(ctx_->ctx);
  if (ref->channel == nullptr) {
    ec = setup_error(errno);
    SIPHON_LOG(rdma, 1, "verbs: ibv_create_comp_channel({}) failed: {}", attr_.name,
               std::strerror(errno));
    return nullptr;
  }
  if ((ec = set_nonblocking(ref->channel->fd))) return nullptr;
  ref->cq = ::ibv_create_cq(ctx_->ctx, static_cast<int>(cqe), nullptr, ref->channel, 0);
  if (ref->cq == nullptr) {
    ec = setup_error(errno);
    SIPHON_LOG(rdma, 1, "verbs: ibv_create_cq({}, {}) failed: {}", attr_.name, cqe,
               std::strerror(errno));
    return nullptr;
  }
  ec.clear();
  return std::make_unique<VerbsCq>(std::move(ref));
}

// --------------------------------------------------------------- provider

namespace {

class VerbsProvider final : public Provider {
 public:
  explicit VerbsProvider(VerbsPathOptions options) : options_(std::move(options)) {}

  std::string_view name() const noexcept override { return "verbs"; }

  std::vector<std::string> list_devices() override {
    std::vector<std::string> names;
    int n = 0;
    errno = 0;
    const DeviceList list(::ibv_get_device_list(&n));
    if (!list) {
      // ENOSYS: the kernel has no RDMA support at all (no uverbs).
      SIPHON_LOG(rdma, 5, "verbs: ibv_get_device_list found no devices: {}",
                 errno != 0 ? std::strerror(errno) : "no error reported");
      return names;
    }
    for (int i = 0; i < n; ++i) names.push_back(device_name(list[i]));
    return names;
  }

  std::unique_ptr<Device> open_device(std::string_view name, std::error_code& ec) override {
    const std::vector<std::string> names = list_devices();
    if (names.empty()) {
      ec = errc::no_device;
      return nullptr;
    }
    const std::optional<std::string> chosen = choose_device(name, names);
    if (!chosen) {
      ec = errc::device_not_found;
      return nullptr;
    }
    const std::string& want = *chosen;
    std::shared_ptr<ContextRef> ctx = cm_context(want);
    if (ctx) {
      SIPHON_LOG(rdma, 5, "verbs: opened {} through librdmacm (shared with rdma_cm ids)", want);
    } else {
      ctx = open_context(want, ec);
      if (!ctx) return nullptr;
      SIPHON_LOG(rdma, 5, "verbs: opened {} with ibv_open_device", want);
    }
    return VerbsDevice::open(std::move(ctx), ec);
  }

  // librdmacm keeps its own ibv_context of every device it has seen (the
  // one rdma_get_devices() hands out and cm ids use) and closes that of a
  // device that went away only when it next syncs its device list: this
  // makes it sync. Until it does, the kernel cannot finish unregistering a
  // device without disassociate_ucontext (rxe: `rdma link delete` waits).
  // librdmacm (rdma-core 31 and later) skips the sync while no device at all
  // is listed, so on a host whose only RDMA device was removed its context
  // stays until a device is listed again; the stack calls this at every
  // check while its device is away, so that happens at the first check
  // after (docs/rdma-transport.md, Device removal).
  void release_removed_devices() noexcept override {
    int n = 0;
    const CmDevices list(::rdma_get_devices(&n));
    SIPHON_LOG(rdma, 20, "verbs: librdmacm's device list synced ({} devices)", list ? n : 0);
  }

  std::unique_ptr<EventChannel> create_event_channel(std::error_code& ec) override {
    auto ref = std::make_shared<ChannelRef>(nullptr);
    errno = 0;
    ref->channel = ::rdma_create_event_channel();
    if (ref->channel == nullptr) {
      const int err = errno;
      // ENODEV/ENOENT: no /dev/infiniband/rdma_cm (no rdma_ucm, or no RDMA);
      // EPERM: librdmacm does not support the kernel's ABI. All of it means
      // "no rdma_cm here", except running out of memory or descriptors.
      ec = err == ENOMEM                   ? make_error_code(errc::out_of_memory)
           : (err == EMFILE || err == ENFILE) ? make_error_code(errc::resource_exhausted)
                                              : make_error_code(errc::not_supported);
      SIPHON_LOG(rdma, 1,
                 "verbs: rdma_cm is not available (rdma_create_event_channel: {}): load the "
                 "rdma_ucm module and check /dev/infiniband/rdma_cm, or set up QPs out of band",
                 err != 0 ? std::strerror(err) : "failed");
      return nullptr;
    }
    if ((ec = set_nonblocking(ref->channel->fd))) return nullptr;
    return make_event_channel(std::move(ref), options_);
  }

 private:
  // librdmacm's context for `name`, or null when rdma_cm is unavailable.
  static std::shared_ptr<ContextRef> cm_context(const std::string& name) {
    int n = 0;
    errno = 0;
    const CmDevices list(::rdma_get_devices(&n));
    if (!list) {
      SIPHON_LOG(rdma, 1,
                 "verbs: rdma_cm is not available ({}); opening {} with ibv_open_device: "
                 "out-of-band QP setup works, rdma_cm connections do not (load rdma_ucm)",
                 errno != 0 ? std::strerror(errno) : "rdma_get_devices failed", name);
      return nullptr;
    }
    std::shared_ptr<ContextRef> found;
    for (int i = 0; i < n && !found; ++i)
      if (list[i] != nullptr && device_name(list[i]->device) == name)
        found = std::make_shared<ContextRef>(list[i], /*owned=*/false);
    return found;
  }

  static std::shared_ptr<ContextRef> open_context(const std::string& name, std::error_code& ec) {
    int n = 0;
    const DeviceList list(::ibv_get_device_list(&n));
    if (!list) {
      ec = errc::no_device;
      return nullptr;
    }
    std::shared_ptr<ContextRef> ref;
    int err = ENODEV;
    for (int i = 0; i < n && !ref; ++i) {
      if (device_name(list[i]) != name) continue;
      ref = std::make_shared<ContextRef>(nullptr, /*owned=*/true);
      errno = 0;
      ref->ctx = ::ibv_open_device(list[i]);
      err = errno;
    }
    if (!ref || ref->ctx == nullptr) {
      ec = err == ENODEV ? make_error_code(errc::device_not_found) : setup_error(err);
      SIPHON_LOG(rdma, 1, "verbs: ibv_open_device({}) failed: {}", name,
                 err != 0 ? std::strerror(err) : "unknown error");
      return nullptr;
    }
    ec.clear();
    return ref;
  }

  VerbsPathOptions options_;
};

}  // namespace
}  // namespace detail

std::unique_ptr<Provider> make_provider() {
  std::error_code ec;
  return make_provider(VerbsPathOptions{}, ec);
}

std::unique_ptr<Provider> make_provider(const VerbsPathOptions& options, std::error_code& ec) {
  std::string why;
  if ((ec = validate(options, why))) {
    SIPHON_LOG(rdma, 0, "verbs: {}", why);
    return nullptr;
  }
  ec.clear();
  return std::make_unique<detail::VerbsProvider>(options);
}

}  // namespace siphon::rdma::verbs

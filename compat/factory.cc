#include "compat/factory.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <optional>

#include "compat/ms_type.h"
#include "compat/stack_plugins.h"
#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "msgr/transport/tcp_stack.h"
#include "rdma/soft/soft_provider.h"
#include "rdma/transport/rdma_stack.h"
#include "rdma/verbs/verbs_provider.h"

namespace siphon::compat {
namespace {

using std::chrono::duration_cast;

template <typename T>
T narrow(std::uint64_t v) {
  return static_cast<T>(std::min<std::uint64_t>(v, std::numeric_limits<T>::max()));
}

std::chrono::nanoseconds seconds(double s) {
  return duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

proto::FrameLimits frame_limits(const Config& c) {
  proto::FrameLimits l;
  l.max_control_payload = narrow<std::uint32_t>(c.get<Opt::ms_max_control_frame_size>());
  l.max_segment = narrow<std::uint32_t>(c.get<Opt::ms_max_segment_size>());
  l.max_frame = c.get<Opt::ms_max_frame_size>();
  return l;
}

}  // namespace

transport::TransportOptions transport_options(const Config& c) {
  transport::TransportOptions t;
  t.async_op_threads = c.get<Opt::ms_async_op_threads>();
  t.frame_limits = frame_limits(c);
  t.inject.socket_failures = narrow<std::uint32_t>(c.get<Opt::ms_inject_socket_failures>());
  t.inject.delay_type = c.get<Opt::ms_inject_delay_type>();
  t.inject.delay_max = c.get<Opt::ms_inject_delay_max>();
  t.inject.delay_probability = c.get<Opt::ms_inject_delay_probability>();
  t.inject.corruption_probability = c.get<Opt::ms_inject_corruption_probability>();
  t.inject.seed = c.get<Opt::ms_inject_seed>();
  t.send_queue_high_water = c.get<Opt::ms_send_queue_high_water>();
  t.send_queue_low_water = c.get<Opt::ms_send_queue_low_water>();
  return t;
}

namespace {

// The software fabric's fault injection (ms_async_rdma_soft_inject_*). A
// seed of 0 picks one from the clock and logs it, so a failure can be rerun.
rdma::soft::SoftOptions soft_options(const Config& c) {
  rdma::soft::SoftOptions so;
  rdma::soft::FaultPlan& f = so.faults;
  f.fail_post.probability = c.get<Opt::ms_async_rdma_soft_inject_post_failure_probability>();
  f.error_completion.probability = c.get<Opt::ms_async_rdma_soft_inject_completion_error_probability>();
  f.qp_to_err.probability = c.get<Opt::ms_async_rdma_soft_inject_qp_error_probability>();
  f.link_drop.probability = c.get<Opt::ms_async_rdma_soft_inject_link_drop_probability>();
  f.delay.probability = c.get<Opt::ms_async_rdma_soft_inject_delay_probability>();
  f.delay_us = narrow<std::uint32_t>(static_cast<std::uint64_t>(
      std::max(0.0, c.get<Opt::ms_async_rdma_soft_inject_delay_max>()) * 1e6));
  f.corrupt_data.probability = c.get<Opt::ms_async_rdma_soft_inject_corruption_probability>();
  const bool injecting = f.fail_post.enabled() || f.error_completion.enabled() || f.qp_to_err.enabled() ||
                         f.link_drop.enabled() || f.delay.enabled() || f.corrupt_data.enabled();
  f.seed = c.get<Opt::ms_async_rdma_soft_inject_seed>();
  if (f.seed == 0) {
    f.seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) | 1;
    if (injecting)
      SIPHON_LOG(compat, 1, "software fabric fault injection with seed {} (set ms_async_rdma_soft_inject_seed "
                            "to repeat it)", f.seed);
  }
  return so;
}

// A stack that owns the RDMA provider it runs on (the provider must outlive
// the stack).
struct OwnedRdmaStack {
  std::unique_ptr<rdma::Provider> provider;
  std::unique_ptr<rdma::RdmaStack> stack;
  ~OwnedRdmaStack() {
    stack.reset();  // before the provider
  }
};

}  // namespace

transport::TcpOptions tcp_options(const Config& c) {
  transport::TcpOptions t;
  t.common = transport_options(c);
  t.tcp_nodelay = c.get<Opt::ms_tcp_nodelay>();
  t.tcp_rcvbuf = c.get<Opt::ms_tcp_rcvbuf>();
  t.tcp_listen_backlog = narrow<int>(static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.get<Opt::ms_tcp_listen_backlog>())));
  t.bind_port_min = narrow<std::uint16_t>(static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.get<Opt::ms_bind_port_min>())));
  t.bind_port_max = narrow<std::uint16_t>(static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.get<Opt::ms_bind_port_max>())));
  t.bind_retry_count = narrow<int>(static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.get<Opt::ms_bind_retry_count>())));
  t.bind_retry_delay = std::chrono::seconds(std::max<std::int64_t>(0, c.get<Opt::ms_bind_retry_delay>()));
  t.bind_ipv4 = c.get<Opt::ms_bind_ipv4>();
  t.bind_ipv6 = c.get<Opt::ms_bind_ipv6>();
  t.bind_prefer_ipv4 = c.get<Opt::ms_bind_prefer_ipv4>();
  t.bind_before_connect = c.get<Opt::ms_bind_before_connect>();
  t.max_accept_failures = narrow<int>(static_cast<std::uint64_t>(std::max<std::int64_t>(1, c.get<Opt::ms_max_accept_failures>())));
  t.tcp_keepalive = c.get<Opt::ms_tcp_keepalive>();
  t.tcp_read_chunk = c.get<Opt::ms_tcp_read_chunk>();
  t.busy_poll = std::chrono::microseconds(c.get<Opt::ms_tcp_busy_poll_us>());
  t.zerocopy_threshold = c.get<Opt::siphon_ms_tcp_zerocopy_threshold>();
  t.zerocopy_check_copies = c.get<Opt::siphon_ms_tcp_zerocopy_check_copies>();
  t.rcvlowat = c.get<Opt::siphon_ms_tcp_rcvlowat>();
  return t;
}

MessengerOptions messenger_options(const Config& c) {
  MessengerOptions m;
  m.ms_connection_ready_timeout = std::chrono::seconds(c.get<Opt::ms_connection_ready_timeout>());
  m.ms_connection_idle_timeout = std::chrono::seconds(c.get<Opt::ms_connection_idle_timeout>());
  m.ms_initial_backoff = seconds(c.get<Opt::ms_initial_backoff>());
  m.ms_max_backoff = seconds(c.get<Opt::ms_max_backoff>());
  m.ms_dispatch_throttle_bytes = c.get<Opt::ms_dispatch_throttle_bytes>();
  m.ms_max_undispatched_bytes_per_connection = c.get<Opt::ms_max_undispatched_bytes_per_connection>();
  m.ms_max_connections = c.get<Opt::ms_max_connections>();
  m.ms_max_queued_send_bytes_per_connection = c.get<Opt::ms_max_queued_send_bytes_per_connection>();
  m.ms_keepalive_interval = seconds(c.get<Opt::ms_keepalive_interval>());
  m.ms_msgr2_rev1 = c.get<Opt::ms_msgr2_rev1>();
  m.siphon_ms_fallback_after = seconds(c.get<Opt::siphon_ms_fallback_after>());
  m.siphon_ms_fallback_retry_interval = seconds(c.get<Opt::siphon_ms_fallback_retry_interval>());
  return m;
}

rdma::RdmaOptions rdma_options(const Config& c) {
  rdma::RdmaOptions r;
  r.common = transport_options(c);
  r.device_name = c.get<Opt::ms_async_rdma_device_name>();
  r.port_num = narrow<std::uint8_t>(c.get<Opt::ms_async_rdma_port_num>());
  // Ceph's default gid_idx 0 is usually a RoCEv1 or link-local entry: Siphon
  // pins an index only when the configuration sets one, and otherwise lets
  // the connection manager pick the RoCEv2 GID of the address in use.
  if (c.source(Opt::ms_async_rdma_gid_idx).kind != ValueSource::Kind::default_value)
    r.gid_idx = static_cast<int>(c.get<Opt::ms_async_rdma_gid_idx>());
  r.local_gid = c.get<Opt::ms_async_rdma_local_gid>();
  r.roce_ver = static_cast<int>(c.get<Opt::ms_async_rdma_roce_ver>());
  r.sl = narrow<std::uint8_t>(static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.get<Opt::ms_async_rdma_sl>())));
  // Ceph's meaning: the whole traffic-class byte (96 = DSCP 24).
  r.dscp = narrow<std::uint8_t>(static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.get<Opt::ms_async_rdma_dscp>())));
  r.buffer_size = c.get<Opt::ms_async_rdma_buffer_size>();
  r.send_buffers = c.get<Opt::ms_async_rdma_send_buffers>();
  r.receive_buffers = c.get<Opt::ms_async_rdma_receive_buffers>();
  r.receive_queue_len = c.get<Opt::ms_async_rdma_receive_queue_len>();
  // Ceph's default is true; Siphon uses an SRQ only when the option is set
  // explicitly (left at its default, receives are per QP: credits keep them
  // small and pinned memory follows the connections).
  r.support_srq = c.get<Opt::ms_async_rdma_support_srq>() &&
                  c.source(Opt::ms_async_rdma_support_srq).kind != ValueSource::Kind::default_value;
  // Ceph's default (1000 us) spins three workers per messenger whether or
  // not the CPUs can take it: left at its default, the stack decides (auto,
  // docs/rdma-transport.md, Polling); a value set explicitly is honoured.
  if (c.source(Opt::ms_async_rdma_polling_us).kind != ValueSource::Kind::default_value)
    r.polling = std::chrono::microseconds(c.get<Opt::ms_async_rdma_polling_us>());
  r.enable_hugepage = c.get<Opt::ms_async_rdma_enable_hugepage>();
  r.credits = narrow<std::uint32_t>(c.get<Opt::ms_async_rdma_credits>());
  r.zero_copy_threshold = c.get<Opt::ms_async_rdma_zero_copy_threshold>();
  r.inline_threshold = c.get<Opt::ms_async_rdma_inline_threshold>();
  r.send_queue_depth = narrow<std::uint32_t>(c.get<Opt::ms_async_rdma_send_queue_depth>());
  r.cq_depth = narrow<std::uint32_t>(c.get<Opt::ms_async_rdma_cq_depth>());
  r.rnr_retry = narrow<std::uint8_t>(static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.get<Opt::ms_async_rdma_rnr_retry>())));
  r.retry_count = narrow<std::uint8_t>(static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.get<Opt::ms_async_rdma_retry_count>())));
  r.ack_timeout = narrow<std::uint8_t>(static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.get<Opt::ms_async_rdma_timeout>())));
  r.cm_timeout = std::chrono::milliseconds(narrow<std::int64_t>(c.get<Opt::ms_async_rdma_cm_timeout>()));
  r.max_connections = c.get<Opt::ms_async_rdma_max_connections>();
  // Seconds (a float) to whole milliseconds, rounded up: a tiny timeout stays a timeout.
  r.transfer_timeout = std::chrono::ceil<std::chrono::milliseconds>(
      std::chrono::duration<double>(c.get<Opt::ms_async_rdma_transfer_timeout>()));
  r.device_check_interval = std::chrono::ceil<std::chrono::milliseconds>(
      std::chrono::duration<double>(c.get<Opt::ms_async_rdma_device_check_interval>()));
  return r;
}

rdma::verbs::VerbsPathOptions verbs_path_options(const Config& cfg) {
  const rdma::RdmaOptions o = rdma_options(cfg);
  rdma::verbs::VerbsPathOptions path;
  path.gid_index = o.gid_idx.value_or(-1);
  path.local_gid = o.local_gid;
  path.sl = o.sl;
  path.dscp = o.dscp >> 2;
  path.max_path_mtu = narrow<std::uint32_t>(cfg.get<Opt::ms_async_rdma_path_mtu>());
  return path;
}

entity_name_t messenger_name(const Config& c) {
  static const std::map<std::string, std::uint8_t> kTypes = {
      {"mon", entity_type::mon}, {"mds", entity_type::mds}, {"osd", entity_type::osd},
      {"client", entity_type::client}, {"mgr", entity_type::mgr}, {"auth", entity_type::auth}};
  const auto it = kTypes.find(c.name().type);
  entity_name_t n;
  n.type = it != kTypes.end() ? it->second : entity_type::client;
  std::int64_t num = -1;
  const std::string& id = c.name().id;
  const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), num);
  n.num = ec == std::errc() && end == id.data() + id.size() ? num : -1;
  return n;
}

StackRegistry::StackRegistry() {
  factories_["posix"] = [](const Config& c) { return create_tcp_stack(c); };
  factories_["rdma"] = [](const Config& c) { return create_rdma_stack(c); };
}

StackRegistry& StackRegistry::instance() {
  static StackRegistry r;
  return r;
}

void StackRegistry::add(std::string name, Factory f) {
  std::lock_guard lk(mu_);
  factories_[std::move(name)] = std::move(f);
}

std::vector<std::string> StackRegistry::names() const {
  std::lock_guard lk(mu_);
  std::vector<std::string> v;
  for (const auto& [n, f] : factories_) v.push_back("async+" + n);
  return v;
}

std::shared_ptr<transport::Stack> StackRegistry::create(const std::string& name, const Config& cfg) const {
  Factory f;
  {
    std::lock_guard lk(mu_);
    const auto it = factories_.find(name);
    if (it == factories_.end()) return nullptr;
    f = it->second;
  }
  return f(cfg);
}

std::shared_ptr<transport::Stack> create_tcp_stack(const Config& cfg) {
  return transport::make_tcp_stack(tcp_options(cfg));
}

std::shared_ptr<transport::Stack> create_rdma_stack(const Config& cfg) {
  rdma::RdmaOptions o = rdma_options(cfg);
  // The stack checks every option's range itself (rdma::ranges, the same
  // ones the schema enforces), e.g. ms_async_rdma_roce_ver = 1 only.
  auto owned = std::make_shared<OwnedRdmaStack>();
  const bool soft = o.device_name.rfind("soft", 0) == 0;
  if (soft) {
    owned->provider = rdma::soft::make_provider(soft_options(cfg));
  } else {
    // The path every rdma_cm connection's QP gets (docs/rdma-verbs.md): the
    // source GID (pinned, or the RoCEv2 GID of the address in use), the SL
    // and the MTU cap. The stack sets the TOS byte per connection itself.
    const rdma::verbs::VerbsPathOptions path = verbs_path_options(cfg);
    std::error_code ec;
    owned->provider = rdma::verbs::make_provider(path, ec);
    if (!owned->provider) {
      std::string why;
      (void)rdma::verbs::validate(path, why);
      throw SetupError(errc::config_error, why, "correct the option in the configuration");
    }
    if (o.device_name.empty() && owned->provider->list_devices().empty()) {
      SIPHON_LOG(compat, 1, "no RDMA hardware found: async+rdma runs on the software fabric (soft0); "
                            "set ms_async_rdma_device_name to choose a device");
      owned->provider = rdma::soft::make_provider(soft_options(cfg));
      o.device_name = "soft0";
    }
  }
  owned->stack = std::make_unique<rdma::RdmaStack>(*owned->provider, std::move(o));
  return std::shared_ptr<transport::Stack>(owned, owned->stack.get());
}

namespace {
std::shared_ptr<transport::Stack> create_stack_of(const MsType& t, const Config& cfg) {
  auto& reg = StackRegistry::instance();
  auto stack = reg.create(t.name, cfg);
  if (!stack && t.stack == MsType::Stack::plugin) {
    load_stack_plugin(t.name, cfg);  // throws with the cause
    stack = reg.create(t.name, cfg);
  }
  if (!stack) {
    std::string avail;
    for (const auto& n : reg.names()) avail += (avail.empty() ? "" : ", ") + n;
    throw SetupError(errc::config_error, fmt::format("ms_type {} is not available", t.to_string()),
                     fmt::format("use one of: {}", avail));
  }
  return stack;
}
}  // namespace

std::shared_ptr<transport::Stack> create_stack(const Config& cfg, Purpose purpose) {
  const MsTypes types = cfg.ms_types();
  return create_stack_of(purpose == Purpose::cluster_network ? types.cluster_type : types.public_type, cfg);
}

std::shared_ptr<transport::Stack> create_fallback_stack(const Config& cfg, const MsType& primary) {
  const std::string text = cfg.get<Opt::siphon_ms_fallback_type>();
  if (text.empty()) return nullptr;
  std::string why;
  const std::optional<MsType> fb = parse_ms_type(text, why);
  if (!fb) throw SetupError(errc::config_error, "siphon_ms_fallback_type: " + why, "correct the option");
  if (*fb == primary)
    throw SetupError(errc::config_error,
                     fmt::format("siphon_ms_fallback_type = {} is the messenger's own stack", fb->to_string()),
                     "name another stack (e.g. async+posix beside async+rdma) or leave it empty");
  return create_stack_of(*fb, cfg);
}

std::size_t set_soft_link_down(bool down) { return rdma::soft::set_link_down_all(down); }

std::unique_ptr<Messenger> create_messenger(const Config& cfg, Purpose purpose) {
  MessengerOptions o = messenger_options(cfg);
  o.role = purpose == Purpose::public_network    ? "public"
           : purpose == Purpose::cluster_network ? "cluster"
                                                 : "client";
  const entity_name_t name = messenger_name(cfg);
  // A daemon named mon.* listens with nonce 0, as ceph-mon does: clients
  // dial a monitor at an address from -m / mon_host, whose nonce is 0, and
  // the server checks CLIENT_IDENT's target address, nonce included.
  std::optional<std::uint32_t> nonce;
  if (name.type == entity_type::mon && purpose != Purpose::client) nonce = 0;
  auto msgr = Messenger::create(create_stack(cfg, purpose), name, std::move(o), nonce);
  const MsTypes types = cfg.ms_types();
  if (auto fb = create_fallback_stack(cfg, purpose == Purpose::cluster_network ? types.cluster_type : types.public_type))
    msgr->set_fallback_stack(std::move(fb));
  return msgr;
}

}  // namespace siphon::compat

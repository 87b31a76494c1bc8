#include "tools/bench/stack.h"

#include <chrono>

namespace siphon::bench {
namespace {

template <typename Rep>
std::chrono::nanoseconds seconds(Rep s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(static_cast<double>(s)));
}

}  // namespace

MessengerOptions messenger_options(const compat::Config& cfg) {
  using compat::Opt;
  MessengerOptions o;
  transport::TcpOptions& t = o.transport;
  t.common.async_op_threads = cfg.get<Opt::ms_async_op_threads>();
  t.common.frame_limits.max_control_payload = static_cast<std::uint32_t>(cfg.get<Opt::ms_max_control_frame_size>());
  t.common.frame_limits.max_segment = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(cfg.get<Opt::ms_max_segment_size>(), UINT32_MAX));
  t.common.frame_limits.max_frame = cfg.get<Opt::ms_max_frame_size>();
  t.common.inject.socket_failures = static_cast<std::uint32_t>(cfg.get<Opt::ms_inject_socket_failures>());
  t.common.inject.delay_type = cfg.get<Opt::ms_inject_delay_type>();
  t.common.inject.delay_max = cfg.get<Opt::ms_inject_delay_max>();
  t.common.inject.delay_probability = cfg.get<Opt::ms_inject_delay_probability>();
  t.tcp_nodelay = cfg.get<Opt::ms_tcp_nodelay>();
  t.tcp_rcvbuf = cfg.get<Opt::ms_tcp_rcvbuf>();
  t.tcp_listen_backlog = static_cast<int>(cfg.get<Opt::ms_tcp_listen_backlog>());
  t.bind_port_min = static_cast<std::uint16_t>(cfg.get<Opt::ms_bind_port_min>());
  t.bind_port_max = static_cast<std::uint16_t>(cfg.get<Opt::ms_bind_port_max>());
  t.bind_retry_count = static_cast<int>(cfg.get<Opt::ms_bind_retry_count>());
  t.bind_retry_delay = std::chrono::milliseconds(cfg.get<Opt::ms_bind_retry_delay>() * 1000);
  t.bind_ipv4 = cfg.get<Opt::ms_bind_ipv4>();
  t.bind_ipv6 = cfg.get<Opt::ms_bind_ipv6>();
  o.ms_connection_ready_timeout = seconds(cfg.get<Opt::ms_connection_ready_timeout>());
  o.ms_connection_idle_timeout = seconds(cfg.get<Opt::ms_connection_idle_timeout>());
  o.ms_initial_backoff = seconds(cfg.get<Opt::ms_initial_backoff>());
  o.ms_max_backoff = seconds(cfg.get<Opt::ms_max_backoff>());
  o.ms_dispatch_throttle_bytes = cfg.get<Opt::ms_dispatch_throttle_bytes>();
  return o;
}

std::shared_ptr<transport::Stack> create_stack(const compat::MsType& type, const compat::Config& /*cfg*/,
                                               const MessengerOptions& opts, std::string& why_not) {
  switch (type.stack) {
    case compat::MsType::Stack::posix:
      return make_tcp_stack(opts);
    case compat::MsType::Stack::rdma:
      why_not = "the RDMA stack is not part of this build yet (compat/factory.h will register it)";
      return nullptr;
    case compat::MsType::Stack::plugin:
      why_not = "stack plugins (" + type.to_string() + ") are not supported yet";
      return nullptr;
  }
  why_not = "unknown stack";
  return nullptr;
}

}  // namespace siphon::bench

// TcpConnection setup: connect, accept, the banner exchange, close and
// faults. The frame data path is in tcp_connection_datapath.cc.
#include "msgr/transport/tcp_connection.h"

#include <cassert>
#include <cstring>

#include <boost/asio/read.hpp>
#include <fmt/format.h>

#include "msgr/base/error.h"
#include "msgr/base/log.h"

namespace siphon::transport {

namespace {

std::error_code apply_socket_options(boost::asio::ip::tcp::socket& s, const TcpOptions& o) {
  boost::system::error_code ec;
  if (o.tcp_nodelay) s.set_option(boost::asio::ip::tcp::no_delay(true), ec);
  if (!ec && o.tcp_keepalive) s.set_option(boost::asio::socket_base::keep_alive(true), ec);
  if (!ec && o.tcp_rcvbuf > 0)
    s.set_option(boost::asio::socket_base::receive_buffer_size(static_cast<int>(o.tcp_rcvbuf)), ec);
  return ec ? map_asio_error(ec) : std::error_code{};
}

NetAddress to_net(const boost::asio::ip::tcp::endpoint& ep) {
  return NetAddress::from_sockaddr(ep.data(), static_cast<socklen_t>(ep.size()));
}

}  // namespace

void TcpShared::note_listener(const NetAddress& bound) {
  if (bound.is_any() || (!bound.is_ipv4() && !bound.is_ipv6())) return;
  NetAddress a = bound;
  a.set_port(0);
  std::lock_guard lock(bind_mu_);
  auto& slot = a.is_ipv4() ? bind_v4_ : bind_v6_;
  if (!slot) slot = a;
}

std::optional<NetAddress> TcpShared::connect_bind_address(int family) const {
  std::lock_guard lock(bind_mu_);
  return family == AF_INET ? bind_v4_ : family == AF_INET6 ? bind_v6_ : std::nullopt;
}

std::error_code map_asio_error(const boost::system::error_code& ec) noexcept {
  if (!ec) return {};
  if (ec == boost::asio::error::eof) return errc::connection_reset;
  if (ec == boost::asio::error::operation_aborted) return errc::shutting_down;
  if (ec.category() == boost::system::system_category()) return from_errno(ec.value());
  return errc::io_error;
}

TcpConnection::TcpConnection(std::shared_ptr<TcpWorker> worker, std::shared_ptr<TcpShared> shared,
                             tcp::socket socket, bool client)
    : worker_(std::move(worker)),
      shared_(std::move(shared)),
      socket_(std::move(socket)),
      delay_timer_(worker_->io()),
      client_(client),
      serial_(shared_->next_serial.fetch_add(1, std::memory_order_relaxed)),
      state_(client ? State::connecting : State::idle),
      injector_(shared_->live_injection.get(), shared_->seed, serial_, &shared_->counters),
      stream_(shared_->opts.common.frame_limits),
      zc_timer_(worker_->io()) {
  worker_->add_load();
}

TcpConnection::~TcpConnection() { zc_destroy(); }

void TcpConnection::assert_on_worker() const noexcept { SIPHON_ASSERT_ON_WORKER(*worker_); }

void TcpConnection::learn_addresses() {
  boost::system::error_code ec;
  const auto local = socket_.local_endpoint(ec);
  if (!ec) local_ = to_net(local);
  const auto remote = socket_.remote_endpoint(ec);
  if (!ec) peer_ = to_net(remote);
}

void TcpConnection::connect_to(const NetAddress& peer, ConnectHandler done) {
  assert_on_worker();
  peer_ = peer;
  tcp::endpoint ep;
  std::memcpy(ep.data(), peer.sockaddr_ptr(), peer.sockaddr_len());
  ep.resize(peer.sockaddr_len());
  boost::system::error_code ec;
  socket_.open(ep.protocol(), ec);
  // Options before connect(): SO_RCVBUF must be set before the handshake to
  // size the window.
  std::error_code setup = ec ? map_asio_error(ec) : apply_socket_options(socket_, shared_->opts);
  if (!setup && shared_->opts.bind_before_connect) {
    if (const auto local = shared_->connect_bind_address(peer.family())) {
      tcp::endpoint lep;
      std::memcpy(lep.data(), local->sockaddr_ptr(), local->sockaddr_len());
      lep.resize(local->sockaddr_len());
      socket_.bind(lep, ec);
      if (ec) {
        SIPHON_LOG(transport, 1, "tcp conn {}: ms_bind_before_connect: cannot bind to {}: {}", serial_,
                   local->to_string(), ec.message());
        setup = map_asio_error(ec);
      }
    }
  }
  if (setup) {
    SIPHON_LOG(transport, 1, "tcp conn {}: cannot set up a socket to {}: {}", serial_,
               peer.to_string(), setup.message());
    const auto keep = self();
    shutdown();
    done(setup, nullptr);
    return;
  }
  socket_.async_connect(ep, [self = self(), done = std::move(done)](
                                const boost::system::error_code& cec) mutable {
    if (self->state_ != State::connecting) {  // closed by stop() meanwhile
      done(errc::shutting_down, nullptr);
      return;
    }
    if (cec) {
      const std::error_code code = map_asio_error(cec);
      SIPHON_LOG(transport, 1, "tcp conn {}: connect to {} failed: {}", self->serial_,
                 self->peer_.to_string(), cec.message());
      self->shutdown();
      done(code, nullptr);
      return;
    }
    self->learn_addresses();
    self->state_ = State::idle;
    SIPHON_LOG(transport, 5, "tcp conn {}: connected {} -> {}", self->serial_,
               self->local_.to_string(), self->peer_.to_string());
    done({}, self);
  });
}

void TcpConnection::accepted() {
  const std::error_code ec = apply_socket_options(socket_, shared_->opts);
  if (ec)
    SIPHON_LOG(transport, 1, "tcp conn {}: cannot set socket options: {}", serial_, ec.message());
  learn_addresses();
  SIPHON_LOG(transport, 5, "tcp conn {}: accepted {} -> {}", serial_, peer_.to_string(),
             local_.to_string());
}

int TcpConnection::native_handle() noexcept { return socket_.native_handle(); }

// ---------------------------------------------------------------------------
// Banner exchange

void TcpConnection::start(ConnectionHandler& handler, const proto::Banner& mine) {
  assert_on_worker();
  if (state_ != State::idle) return;  // started twice, or already closed
  handler_ = &handler;
  stream_.set_mine(mine);
  state_ = State::banner;
  setup_zerocopy();
  // Both sides send at once; nothing waits for the peer's banner.
  enqueue(proto::encode_banner(mine));
  schedule_flush();
  read_banner();
}

// The peer's banner is read exactly (its prefix, then the payload length it
// names), so every byte after it is read by start_read() into frame segments.
void TcpConnection::read_banner() {
  banner_rx_.resize(stream_.banner_bytes_wanted());
  boost::asio::async_read(socket_, boost::asio::buffer(banner_rx_),
                          [self = self()](const boost::system::error_code& ec, std::size_t n) {
                            self->on_banner_bytes(ec, n);
                          });
}

void TcpConnection::on_banner_bytes(const boost::system::error_code& ec, std::size_t n) {
  if (!read_completed(State::banner, ec, n, "banner read")) return;
  switch (stream_.feed(BufferList::copy_of(banner_rx_.data(), n))) {
    case FrameStream::Fed::error:
      return fault(stream_.error(), stream_.error_reason());
    case FrameStream::Fed::more:
      return read_banner();
    case FrameStream::Fed::established:
      banner_rx_ = {};
      return establish(stream_.negotiated());
  }
}

void TcpConnection::establish(const proto::Negotiated& n) {
  state_ = State::established;
  SIPHON_LOG(transport, 5, "tcp conn {}: established with {} (msgr2 rev{}, peer supports {:#x})",
             serial_, peer_.to_string(), static_cast<int>(n.rev), n.peer.supported);
  // Frames sent before the revision was known go out first, in order.
  for (const proto::Frame& f : stream_.take_early()) enqueue(proto::encode_frame(f, n.rev));
  schedule_flush();
  handler_->on_established(n);
  deliver_frames();
  start_read();
}

// ---------------------------------------------------------------------------
// Close and faults

void TcpConnection::io_fault(const boost::system::error_code& ec, std::string_view op) {
  if (ec == boost::asio::error::operation_aborted || state_ == State::closed) return;
  if (ec == boost::asio::error::eof) {
    if (stream_.buffered() > 0)
      return fault(errc::truncated, "peer closed the connection inside a frame");
    if (state_ == State::banner)
      return fault(errc::connection_reset, "peer closed the connection during the banner exchange");
    return fault(errc::connection_reset, "peer closed the connection");
  }
  fault(map_asio_error(ec), fmt::format("{} failed: {}", op, ec.message()));
}

void TcpConnection::fault(std::error_code code, std::string_view reason) {
  if (state_ == State::closed) return;
  SIPHON_LOG(transport, 1, "tcp conn {} {} -> {}: fault: {} ({})", serial_, local_.to_string(),
             peer_.to_string(), reason, code.message());
  ConnectionHandler* handler = handler_;
  const auto keep = self();
  shutdown();
  if (handler != nullptr) handler->on_fault(Fault{code, std::string(reason)});
}

void TcpConnection::close() {
  assert_on_worker();
  const auto keep = self();
  shutdown();
}

void TcpConnection::shutdown() noexcept {
  if (state_ == State::closed) return;
  state_ = State::closed;
  handler_ = nullptr;
  if (zc_outstanding()) {
    // The kernel may still read buffers of zero-copy sends: keep the socket
    // (shut down) until it says it is done (tcp_zerocopy.cc).
    try {
      zc_linger();
    } catch (...) {
      // No memory for the wait: reset now, so the kernel lets go of the
      // pages before the buffers are freed.
      zc_abort_socket();
      zc_release_all();
      zc_finish_close();
    }
  } else {
    boost::system::error_code ignored;
    socket_.close(ignored);  // cancels pending operations; their handlers see `closed`
  }
  try {
    delay_timer_.cancel();
  } catch (...) {
    // Cancelling only fails on a broken reactor; the handler checks `closed`.
  }
  // Memory a pending operation may still use (the batch being written, the
  // segment being read into) is released when that operation completes.
  tx_queue_.clear();
  tx_queue_zc_ = 0;
  held_.reset();
  stream_.reset();
  queued_bytes_ = 0;
  worker_->drop_load();
  worker_->remove(this);
}

}  // namespace siphon::transport

// The admin socket's server: binding (mode 0600, stale sockets), and every
// client served on its own asynchronously, bounded in size and time, so a
// client that sends nothing or never ends its request holds up nobody.
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "msgr/admin/admin_impl.h"
#include "msgr/base/log.h"

namespace siphon::admin {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;

class Client : public std::enable_shared_from_this<Client> {
 public:
  Client(AdminSocket::Impl& s, Local::socket sock) : srv_(s), sock_(std::move(sock)), timer_(srv_.io) {}

  void start() {
    // One deadline for the whole exchange: the request in, the reply out.
    timer_.expires_after(srv_.opts.request_timeout);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->done_) return;
      if (!self->replying_) self->srv_.dropped_timeout.fetch_add(1, std::memory_order_relaxed);
      SIPHON_LOG(tools, 5, "admin socket: client dropped: no complete exchange within {} ms",
                 self->srv_.opts.request_timeout.count());
      self->finish();
    });
    read();
  }

  // Closes the socket and forgets the client (I/O thread).
  void finish() {
    if (done_) return;
    done_ = true;
    boost::system::error_code ignored;
    timer_.cancel();
    sock_.close(ignored);
    srv_.finished(shared_from_this());
  }

 private:
  void read() {
    sock_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](const boost::system::error_code& ec,
                                                                          std::size_t n) { self->on_read(ec, n); });
  }

  void on_read(const boost::system::error_code& ec, std::size_t n) {
    if (done_) return;
    if (ec) {  // EOF or an error before the terminator: no reply, as Ceph
      finish();
      return;
    }
    const std::size_t before = req_.size();
    req_.append(buf_.data(), n);
    std::size_t end = std::string::npos;
    if (req_.front() == '\0') {
      if (req_.size() >= 4) end = 4;  // the legacy 4-byte code
    } else {
      const auto p = req_.find_first_of(std::string_view("\0\n", 2), before);
      if (p != std::string::npos) end = p;
    }
    if (end == std::string::npos || end > srv_.opts.max_request) {
      if (req_.size() > srv_.opts.max_request) {
        srv_.dropped_oversize.fetch_add(1, std::memory_order_relaxed);
        reply(error_payload(-E2BIG, fmt::format("request longer than {} bytes", srv_.opts.max_request)));
        return;
      }
      read();
      return;
    }
    req_.resize(end);
    // Bytes after the terminator are not read (one command per connection).
    replying_ = true;
    asio::post(srv_.cmd_io, [self = shared_from_this()] {
      std::string payload = self->srv_.execute(self->req_);
      asio::post(self->srv_.io, [self, p = std::move(payload)]() mutable { self->reply(std::move(p)); });
    });
  }

  void reply(std::string payload) {
    if (done_) return;
    replying_ = true;
    payload_ = std::move(payload);
    const auto n = static_cast<std::uint32_t>(payload_.size());
    // Big-endian length; header and payload go out in one gather write, so
    // the 4 length bytes are never split (the stock CLI reads them with a
    // single recv(4)).
    len_ = {static_cast<unsigned char>(n >> 24), static_cast<unsigned char>(n >> 16),
            static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(n)};
    const std::array<asio::const_buffer, 2> bufs{asio::buffer(len_), asio::buffer(payload_)};
    asio::async_write(sock_, bufs, [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
      if (!ec) self->srv_.served.fetch_add(1, std::memory_order_relaxed);
      if (!self->done_) {
        boost::system::error_code ignored;
        self->sock_.shutdown(Local::socket::shutdown_send, ignored);
      }
      self->finish();
    });
  }

  AdminSocket::Impl& srv_;
  Local::socket sock_;
  asio::steady_timer timer_;
  std::array<char, 4096> buf_{};
  std::string req_;
  std::string payload_;
  std::array<unsigned char, 4> len_{};
  bool replying_ = false;
  bool done_ = false;
};

void AdminSocket::Impl::finished(const std::shared_ptr<Client>& c) { clients.erase(c); }

void AdminSocket::Impl::accept_next() {
  acceptor->async_accept([this](const boost::system::error_code& ec, Local::socket sock) {
    if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
    if (!ec) {
      if (clients.size() >= opts.max_clients) {
        refused_busy.fetch_add(1, std::memory_order_relaxed);
        boost::system::error_code ignored;
        sock.close(ignored);
      } else {
        auto c = std::make_shared<Client>(*this, std::move(sock));
        clients.insert(c);
        c->start();
      }
    }
    accept_next();
  });
}

namespace {

std::string parent_of(const std::string& path) {
  const auto p = std::filesystem::path(path).parent_path().string();
  return p.empty() ? "." : p;
}

// A socket file at `path` that nobody answers on is stale (a daemon that
// died); a live one means another process serves this path.
bool replace_stale(const std::string& path, std::string& error) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return true;  // nothing there
  if (!S_ISSOCK(st.st_mode)) {
    error = fmt::format("admin socket {}: the path exists and is not a socket; remove it or set admin_socket "
                        "to another path",
                        path);
    return false;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size());
    const int r = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    ::close(fd);
    if (r == 0) {
      error = fmt::format("admin socket {}: another process is serving this path (is the daemon already "
                          "running?); stop it or set admin_socket to another path",
                          path);
      return false;
    }
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    error = fmt::format("admin socket {}: cannot remove the stale socket file: {}", path, std::strerror(errno));
    return false;
  }
  return true;
}

std::string bind_error(const std::string& path, int err) {
  const std::string dir = parent_of(path);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return fmt::format("admin socket {}: the directory {} does not exist; create it (install -d {}) or set "
                         "admin_socket (or run_dir) to a writable directory; admin_socket = \"\" disables the socket",
                         path, dir, dir);
    case EACCES:
    case EPERM:
    case EROFS:
      return fmt::format("admin socket {}: the directory {} is not writable by this user (uid {}); make it "
                         "writable or set admin_socket (or run_dir) to a directory that is; admin_socket = \"\" "
                         "disables the socket",
                         path, dir, ::getuid());
    default:
      return fmt::format("admin socket {}: cannot bind: {}", path, std::strerror(err));
  }
}

}  // namespace

bool AdminSocket::start(const std::string& path, std::string& error) {
  Impl& s = *impl_;
  std::lock_guard lk(s.life_mu);
  if (s.running) {
    error = fmt::format("admin socket {}: already serving {}", path, s.path);
    return false;
  }
  if (path.empty()) {
    error = "admin socket: empty path";
    return false;
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    error = fmt::format("admin socket {}: the path is {} bytes long, a UNIX socket path holds at most {}; set "
                        "admin_socket (or run_dir) to a shorter path",
                        path, path.size(), sizeof(sockaddr_un::sun_path) - 1);
    return false;
  }
  if (!replace_stale(path, error)) return false;
  boost::system::error_code ec;
  auto acc = std::make_unique<Local::acceptor>(s.io);
  acc->open(Local(), ec);
  if (!ec) acc->bind(Local::endpoint(path), ec);
  if (ec) {
    error = bind_error(path, ec.value());
    return false;
  }
  // Only the owner may talk to it (connecting needs write permission).
  if (::chmod(path.c_str(), 0600) != 0) {
    error = fmt::format("admin socket {}: cannot set mode 0600: {}", path, std::strerror(errno));
    ::unlink(path.c_str());
    return false;
  }
  acc->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error = fmt::format("admin socket {}: cannot listen: {}", path, ec.message());
    ::unlink(path.c_str());
    return false;
  }
  s.acceptor = std::move(acc);
  s.path = path;
  s.io.restart();
  s.cmd_io.restart();
  s.io_guard.emplace(s.io.get_executor());
  s.cmd_guard.emplace(s.cmd_io.get_executor());
  s.accept_next();
  s.io_thread = std::thread([&s] {
    ::pthread_setname_np(::pthread_self(), "admin_socket");
    s.io.run();
  });
  s.cmd_thread = std::thread([&s] {
    ::pthread_setname_np(::pthread_self(), "admin_command");
    s.cmd_io.run();
  });
  s.running = true;
  return true;
}

void AdminSocket::stop() {
  Impl& s = *impl_;
  std::lock_guard lk(s.life_mu);
  if (!s.running) return;
  asio::post(s.io, [&s] {
    boost::system::error_code ignored;
    s.acceptor->close(ignored);
    auto all = s.clients;  // finish() erases
    for (const auto& c : all) c->finish();
  });
  s.io_guard.reset();
  s.io_thread.join();  // returns once every client is closed
  s.cmd_guard.reset();
  s.cmd_io.stop();  // a command still running finishes first; queued ones are dropped
  s.cmd_thread.join();
  s.acceptor.reset();
  ::unlink(s.path.c_str());
  s.running = false;
}

}  // namespace siphon::admin

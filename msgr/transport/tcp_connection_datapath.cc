// TcpConnection data path: send queue and gathered writes, reads into
// refcounted segments, frame delivery, pause/resume, injected delays.
//
// Everything here runs on the connection's worker. Steady state allocates
// only what the data needs: one small block per encoded frame (preamble and
// crcs) and one receive segment per `tcp_read_chunk` bytes (or per large
// frame); the queues and the iovec array keep their capacity. No locks; logs
// only at trace level, except on faults.
//
// MSG_ZEROCOPY (siphon_ms_tcp_zerocopy_threshold, tcp_zerocopy.cc): a batch
// carrying a frame with a segment of at least the threshold is sent with the
// flag; its buffers then move to a hold (a reused vector, no allocation in
// steady state) until the kernel's notification covers it. Per such batch:
// the same sendmsg() calls plus one recvmsg(MSG_ERRQUEUE) per wake-up of the
// error-queue wait (notifications coalesce); nothing for other batches
// beyond a flag test per send().
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <span>

#include <boost/asio/post.hpp>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "msgr/transport/tcp_connection.h"

namespace siphon::transport {

namespace {
// Largest receive segment allocated for one pending frame; bigger frames
// arrive in several segments.
constexpr std::size_t kMaxReadBuffer = 16u << 20;
constexpr std::string_view kInjectedFailure = "injected socket failure";
}  // namespace

// ---------------------------------------------------------------------------
// Send side

std::error_code TcpConnection::send(proto::Frame&& frame) {
  assert_on_worker();
  if (state_ == State::closed) return errc::not_connected;
  ++stats_.frames_sent;
  if (state_ == State::established) {
    BufferList wire;
    std::string why;
    if (!stream_.encode(frame, wire, why)) {
      // Secure mode ran out of nonces: this connection is done (the
      // session reconnects with fresh keys). Faulted from the event loop,
      // never inside the caller's send().
      boost::asio::post(worker_->io(), [self = self(), why] { self->fault(errc::resource_exhausted, why); });
      return errc::resource_exhausted;
    }
    const bool idle = !writing_ && !flush_scheduled_ && tx_queue_.empty();
    bool zc = false;
    if (zc_threshold_ != 0) {
      for (const BufferList& seg : frame.segments) zc = zc || seg.length() >= zc_threshold_;
    }
    enqueue(std::move(wire), zc);
    if (idle) {
      write_from_send();
    } else {
      schedule_flush();
    }
  } else {
    // The revision is decided by the banners: encode once it is known. rev0
    // is the longer encoding, so the estimate never under-reports.
    stream_.hold_early(std::move(frame));
  }
  if (queued_bytes() > shared_->opts.common.send_queue_high_water) backpressure_ = true;
  return {};
}

void TcpConnection::enqueue(BufferList&& wire, bool zerocopy) {
  queued_bytes_ += wire.length();
  tx_queue_zc_ += zerocopy ? 1 : 0;
  tx_queue_.push_back(std::move(wire));
}

// Issue 20: the first frame sent on an idle connection is written at once,
// from inside send(), so a reply leaves before the worker goes back to its
// event loop. The flush posted right after it makes every later send() of
// the same handler queue behind it and go out in one gathered write, as
// before. Nothing here calls the handler (docs/transport.md §1): a failure,
// injected or real, is faulted from the event loop, and a write the socket
// does not take completely finishes there too.
void TcpConnection::write_from_send() {
  if (injector_.socket_failure()) {
    boost::asio::post(worker_->io(), [self = self()] { self->fault(errc::injected_fault, kInjectedFailure); });
    flush_scheduled_ = true;  // sends until then only queue (the fault drops them)
    return;
  }
  in_send_ = true;
  begin_batch();
  write_batch();
  in_send_ = false;
  flush_scheduled_ = true;
  boost::asio::post(worker_->io(), [self = self()] {
    self->flush_scheduled_ = false;
    self->start_write();
    if (!self->writing_) self->maybe_writable();
  });
}

// Writes are deferred to the end of the current handler so that every frame
// queued by it goes out in one gathered write.
void TcpConnection::schedule_flush() {
  if (writing_ || flush_scheduled_ || tx_queue_.empty()) return;
  flush_scheduled_ = true;
  boost::asio::post(worker_->io(), [self = self()] {
    self->flush_scheduled_ = false;
    self->start_write();
  });
}

void TcpConnection::start_write() {
  if (writing_ || tx_queue_.empty()) return;
  if (state_ != State::banner && state_ != State::established) return;
  if (injector_.socket_failure()) return fault(errc::injected_fault, kInjectedFailure);
  begin_batch();
  write_batch();
}

void TcpConnection::begin_batch() {
  tx_inflight_.swap(tx_queue_);  // tx_inflight_ was empty: capacities swap, nothing allocates
  iov_.clear();
  iov_pos_ = 0;
  batch_written_ = 0;
  batch_zc_ = tx_queue_zc_ != 0 && zc_threshold_ != 0;
  tx_queue_zc_ = 0;
  std::size_t bytes = 0;
  for (const BufferList& wire : tx_inflight_) {
    for (const BufferPtr& p : wire.ptrs()) {
      if (p.length() == 0) continue;
      iov_.push_back(iovec{const_cast<std::byte*>(p.data()), p.length()});
      bytes += p.length();
    }
  }
  inflight_bytes_ = bytes;
  writing_ = true;
  ++stats_.write_batches;
  SIPHON_TRACE(transport, "tcp conn {}: writing {} frames, {} bytes in {} pieces", serial_,
               tx_inflight_.size(), bytes, iov_.size());
}

// One sendmsg() for the whole batch (up to IOV_MAX pieces), repeated while
// the socket takes bytes. Not boost::asio::async_write: its completion
// condition caps every write at 64 KiB and posts a handler per piece, so a
// 4 MiB frame cost 64 sendmsg() calls, 64 epoll_wait() calls and 64 handler
// runs (docs/performance.md, "Issue 20"). The socket is waited for only when
// it is full; a batch the socket takes at once completes here, without a
// posted completion.
void TcpConnection::write_batch() {
  const int fd = socket_.native_handle();
  while (iov_pos_ < iov_.size()) {
    msghdr msg{};
    msg.msg_iov = iov_.data() + iov_pos_;
    msg.msg_iovlen = std::min<std::size_t>(iov_.size() - iov_pos_, IOV_MAX);
    const int zc_flag = batch_zc_ ? MSG_ZEROCOPY : 0;
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT | zc_flag);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS && zc_flag != 0) {
        // The socket's optmem limit or the locked-pages limit: this batch
        // goes on with copies (msg_zerocopy.rst, "Transmission").
        zc_fallback();
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        socket_.async_wait(tcp::socket::wait_write, [self = self()](const boost::system::error_code& ec) {
          self->on_socket_writable(ec);
        });
        return;
      }
      const boost::system::error_code ec(errno, boost::system::system_category());
      if (in_send_) {
        // Inside send(): the fault comes from the event loop.
        boost::asio::post(worker_->io(), [self = self(), ec] { self->on_write_error(ec); });
        return;
      }
      return on_write_error(ec);
    }
    // Skip the pieces written completely, trim the one written in part.
    std::size_t left = static_cast<std::size_t>(n);
    if (zc_flag != 0) zc_sent(left);
    batch_written_ += left;
    while (left > 0 && left >= iov_[iov_pos_].iov_len) left -= iov_[iov_pos_++].iov_len;
    if (left > 0) {
      iov_[iov_pos_].iov_base = static_cast<std::byte*>(iov_[iov_pos_].iov_base) + left;
      iov_[iov_pos_].iov_len -= left;
    }
  }
  on_write_done();
}

void TcpConnection::on_socket_writable(const boost::system::error_code& ec) {
  if (state_ == State::closed) {
    writing_ = false;
    retire_batch();
    return;
  }
  if (ec) return on_write_error(ec);
  write_batch();
}

void TcpConnection::on_write_error(const boost::system::error_code& ec) {
  writing_ = false;
  retire_batch();
  io_fault(ec, "write");
}

void TcpConnection::on_write_done() {
  writing_ = false;
  retire_batch();  // drops our references to the written frames (or holds them for MSG_ZEROCOPY)
  const WorkerPerf::Section timed(worker_->perf(), l_msgr_running_send_time);
  stats_.bytes_sent += batch_written_;
  worker_->perf().inc(l_msgr_send_bytes, batch_written_);
  queued_bytes_ -= inflight_bytes_;
  inflight_bytes_ = 0;
  if (in_send_) return;  // inside send(): no callback (the posted flush checks)
  start_write();  // whatever was queued while this batch was in flight
  maybe_writable();
}

void TcpConnection::maybe_writable() {
  if (state_ != State::closed && backpressure_ &&
      queued_bytes() <= shared_->opts.common.send_queue_low_water) {
    backpressure_ = false;
    handler_->on_writable();
  }
}

std::error_code TcpConnection::start_secure(std::span<const std::uint8_t> secret, std::string& why) {
  assert_on_worker();
  if (state_ != State::established) {
    why = "secure mode asked for on a connection that is not established";
    return errc::not_connected;
  }
  return stream_.start_secure(secret, client_, why);
}

// ---------------------------------------------------------------------------
// Receive side

void TcpConnection::pause_receive(bool paused) {
  assert_on_worker();
  if (paused) {
    paused_ = true;
    return;
  }
  if (!paused_) return;
  paused_ = false;
  if (state_ != State::established || resume_scheduled_) return;
  // Never call back into the handler from inside its own call.
  resume_scheduled_ = true;
  boost::asio::post(worker_->io(), [self = self()] {
    self->resume_scheduled_ = false;
    self->deliver_frames();
    self->start_read();
  });
}

void TcpConnection::start_read() {
  if (state_ != State::established || reading_ || paused_ || delaying_) return;
  // Read into the current segment while it has room for what the decoder
  // wants (up to a chunk); otherwise start a segment sized for the pending
  // frame, so a large segment arrives (mostly) contiguous and uncopied.
  const std::size_t chunk = shared_->opts.tcp_read_chunk;
  const std::size_t want = std::max<std::size_t>(stream_.bytes_wanted(), 1);
  Segment* seg = rx_hold_.segment();
  std::size_t room = seg != nullptr ? seg->capacity() - rx_used_ : 0;
  if (room < std::min(want, chunk)) {
    const std::size_t cap = std::max(chunk, std::min(want, kMaxReadBuffer));
    seg = Segment::allocate(cap);
    rx_hold_ = BufferPtr(seg, 0, 0);
    rx_used_ = 0;
    room = cap;
  }
  if (!set_rcvlowat(want, room)) return;
  reading_ = true;
  socket_.async_read_some(
      boost::asio::buffer(seg->data() + rx_used_, room),
      [self = self()](const boost::system::error_code& ec, std::size_t n) { self->on_read(ec, n); });
}

// siphon_ms_tcp_rcvlowat: while a large frame is pending, let the kernel wake
// this worker only once the frame's remaining bytes (as many as this read can
// take) are queued. The value never exceeds what the pending frame still
// needs, so the wait always ends: those bytes are on their way, and the
// kernel also wakes the reader on EOF, errors, memory pressure and a closing
// receive window (tcp_data_ready). A lower value is set at once (correctness);
// a higher one only when it at least doubles the current one, which keeps
// it to about one system call per large frame. Asio's speculative read after
// each completion still returns whatever has arrived; only the waits are
// spaced out.
// Returns false when it faulted the connection: a value that could not be
// lowered could leave the reader waiting for bytes that never come.
bool TcpConnection::set_rcvlowat(std::size_t want, std::size_t room) {
  const std::size_t threshold = shared_->opts.rcvlowat;
  if (rcvlowat_refused_ || (threshold == 0 && rcvlowat_ == 1)) return true;
  std::size_t need = std::min({want, room, static_cast<std::size_t>(INT_MAX)});
  if (threshold == 0 || need <= threshold) need = 1;
  const int v = static_cast<int>(need);
  if (v == rcvlowat_ || (v > rcvlowat_ && rcvlowat_ > 1 && v < 2 * rcvlowat_)) return true;
  const auto set = [this](int value) {
    return ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVLOWAT, &value, sizeof value) == 0 ? 0 : errno;
  };
  if (const int err = set(v); err != 0) {
    // A raise that fails leaves the connection at 1 for good (reads take
    // whatever arrives); a value it cannot bring down to what the frame
    // needs faults it.
    const int down = v < rcvlowat_ ? err : rcvlowat_ == 1 ? 0 : set(1);
    if (down != 0) {
      fault(std::error_code(down, std::system_category()),
            fmt::format("setsockopt(SO_RCVLOWAT) failed lowering it from {}: {}", rcvlowat_, std::strerror(down)));
      return false;
    }
    rcvlowat_ = 1;
    rcvlowat_refused_ = true;
    SIPHON_LOG(transport, 1, "tcp conn {}: setsockopt(SO_RCVLOWAT, {}) failed: {}; reading whatever arrives "
                             "(siphon_ms_tcp_rcvlowat has no effect on this connection)",
               serial_, v, std::strerror(err));
    return true;
  }
  rcvlowat_ = v;
  return true;
}

bool TcpConnection::read_completed(State expected, const boost::system::error_code& ec,
                                   std::size_t n, std::string_view op) {
  if (state_ != expected) return false;
  if (ec) {
    io_fault(ec, op);
    return false;
  }
  ++stats_.read_ops;
  stats_.bytes_received += n;
  worker_->perf().inc(l_msgr_recv_bytes, n);
  if (injector_.socket_failure()) {
    fault(errc::injected_fault, kInjectedFailure);
    return false;
  }
  return true;
}

void TcpConnection::on_read(const boost::system::error_code& ec, std::size_t n) {
  reading_ = false;
  if (!read_completed(State::established, ec, n, "read")) return;
  // Decoding and delivering what this read brought, fast dispatch included.
  const WorkerPerf::Section timed(worker_->perf(), l_msgr_running_recv_time);
  // ms_inject_corruption_probability: damage below the messenger, before
  // the decoder checks the CRCs (nothing else references these bytes yet).
  if (injector_.corrupt(rx_hold_.segment()->data() + rx_used_, n))
    SIPHON_TRACE(transport, "tcp conn {}: injected a bit flip into {} bytes read", serial_, n);
  BufferList bytes;
  bytes.append(BufferPtr(rx_hold_.segment(), rx_used_, n));
  rx_used_ += n;
  (void)stream_.feed(std::move(bytes));  // after the banner: to the decoder
  deliver_frames();
  start_read();
}

void TcpConnection::deliver_frames() {
  // The handler may close, pause or send from on_frame(): re-check each time.
  while (state_ == State::established && !paused_ && !delaying_) {
    proto::Frame frame;
    if (held_) {
      frame = std::move(*held_);
      held_.reset();
    } else {
      const auto status = stream_.next(frame);
      if (status == proto::FrameDecoder::Status::need_more) return;
      if (status == proto::FrameDecoder::Status::error)
        return fault(stream_.decoder_error(), std::string(stream_.decoder_error_reason()));  // a copy: fault() resets the stream
      if (frame.tag == proto::Tag::message) {
        const auto delay = injector_.message_delay();
        if (delay.count() > 0) {
          // Hold this frame (and, by not reading, everything after it).
          held_ = std::move(frame);
          delaying_ = true;
          delay_timer_.expires_after(delay);
          delay_timer_.async_wait(
              [self = self()](const boost::system::error_code& ec) { self->on_delay_done(ec); });
          return;
        }
      }
    }
    ++stats_.frames_received;
    SIPHON_TRACE(transport, "tcp conn {}: frame {} ({} bytes)", serial_, proto::to_string(frame.tag),
                 frame.payload_length());
    handler_->on_frame(std::move(frame));
  }
}

void TcpConnection::on_delay_done(const boost::system::error_code& ec) {
  delaying_ = false;
  if (ec || state_ != State::established) return;
  deliver_frames();
  start_read();
}

}  // namespace siphon::transport

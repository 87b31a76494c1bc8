// TcpConnection: MSG_ZEROCOPY sends (siphon_ms_tcp_zerocopy_threshold).
//
// Facts used, from the kernel's Documentation/networking/msg_zerocopy.rst:
// - SO_ZEROCOPY must be set on the socket first; a kernel that does not know
//   it refuses the setsockopt(), and the flag would then be ignored.
// - Each sendmsg(MSG_ZEROCOPY) that sends data takes the next value of a
//   per-socket u32 counter (not incremented on failure; it wraps). The
//   kernel queues completions on the socket's error queue, read with
//   recvmsg(MSG_ERRQUEUE) (never blocks; POLLERR/EPOLLERR signals them) as a
//   sock_extended_err with ee_origin SO_EE_ORIGIN_ZEROCOPY, ee_errno 0 and
//   the inclusive range [ee_info, ee_data]; consecutive completions are
//   coalesced into one range, and they may arrive out of order on
//   retransmission and socket teardown.
// - ENOBUFS: the socket's optmem limit or the locked-pages limit; the send
//   did nothing and may be repeated without the flag.
// - SO_EE_CODE_ZEROCOPY_COPIED in ee_code: the kernel copied after all
//   (always on loopback; devices without scatter-gather). The document
//   suggests a process may stop passing the flag on that socket then.
//
// The buffers of a batch sent with the flag move to a ZcHold (whose vector is
// reused) and are released only when notifications covered every zero-copy
// sendmsg() of the batch. A closed connection with sends outstanding keeps
// its socket open (shut down, its operations cancelled) until they complete;
// after kZcLingerMax it resets the connection (connect(AF_UNSPEC), which
// purges the socket's send queues and so completes them) and waits
// kZcAbortWait more before it releases what is left and closes.
#include <time.h>  // before linux/errqueue.h (struct timespec)

#include <linux/errqueue.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "msgr/base/log.h"
#include "msgr/transport/tcp_connection.h"

namespace siphon::transport {

namespace {
// Sends below this are cheaper to copy (msg_zerocopy.rst: "generally only
// effective at writes over around 10 KB"); smaller thresholds are raised.
constexpr std::size_t kZcMinThreshold = 4096;
// Completions judged together for "the kernel copies anyway".
constexpr std::uint32_t kZcWindow = 32;
// Consecutive ENOBUFS fallbacks after which a connection stops trying.
constexpr std::uint32_t kZcEnobufsLimit = 8;
constexpr auto kZcLingerMax = std::chrono::seconds(2);
constexpr auto kZcAbortWait = std::chrono::seconds(1);

std::atomic<bool> g_refusal_logged{false};
std::atomic<int> g_forced_refusal{0};
}  // namespace

void tcp_zerocopy_force_refusal_for_test(int err) noexcept {
  g_forced_refusal.store(err, std::memory_order_relaxed);
  if (err != 0) g_refusal_logged.store(false, std::memory_order_relaxed);
}

void TcpWorker::zerocopy_hold(std::uint64_t add, std::uint64_t drop) noexcept {
  zc_held_bytes_ = zc_held_bytes_ + add - drop;
  perf().set(l_msgr_tcp_zerocopy_held_bytes, zc_held_bytes_);
}

void TcpConnection::setup_zerocopy() {
  const std::size_t threshold = shared_->opts.zerocopy_threshold;
  if (threshold == 0) return;
  const int one = 1;
  int err = g_forced_refusal.load(std::memory_order_relaxed);
  if (err == 0 && ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) != 0)
    err = errno;
  if (err != 0) {
    if (!g_refusal_logged.exchange(true))
      SIPHON_LOG(transport, 0,
                 "tcp: the kernel refuses SO_ZEROCOPY ({}): TCP sends copy (siphon_ms_tcp_zerocopy_threshold "
                 "needs Linux 4.14 or later; set it to 0 to silence this)",
                 std::strerror(err));
    worker_->perf().inc(l_msgr_tcp_zerocopy_fallbacks);
    ++stats_.zc_fallbacks;
    return;
  }
  zc_threshold_ = std::max(threshold, kZcMinThreshold);
  stats_.zc_on = true;
}

void TcpConnection::zc_sent(std::size_t n) {
  if (!zc_batch_open_) {
    zc_holds_.emplace_back();
    ZcHold& h = zc_holds_.back();
    if (!zc_spare_.empty()) {
      h.bufs.swap(zc_spare_.back());
      zc_spare_.pop_back();
    }
    h.first = zc_next_id_;
    zc_batch_open_ = true;
  }
  ++zc_holds_.back().count;
  ++zc_next_id_;
  zc_enobufs_run_ = 0;
  ++stats_.zc_sends;
  worker_->perf().inc(l_msgr_tcp_zerocopy_sends);
  worker_->perf().inc(l_msgr_tcp_zerocopy_bytes, n);
}

void TcpConnection::zc_fallback() {
  batch_zc_ = false;
  ++stats_.zc_fallbacks;
  worker_->perf().inc(l_msgr_tcp_zerocopy_fallbacks);
  if (++zc_enobufs_run_ >= kZcEnobufsLimit && zc_threshold_ != 0) {
    zc_threshold_ = 0;
    stats_.zc_on = false;
    worker_->perf().inc(l_msgr_tcp_zerocopy_disabled);
    SIPHON_LOG(transport, 1,
               "tcp conn {}: zero-copy sends off on this connection: {} in a row failed with ENOBUFS "
               "(raise net.core.optmem_max or the memlock limit)",
               serial_, zc_enobufs_run_);
  }
}

void TcpConnection::retire_batch() {
  if (!zc_batch_open_) {
    tx_inflight_.clear();
    return;
  }
  zc_batch_open_ = false;
  ZcHold& h = zc_holds_.back();
  h.sealed = true;
  h.bufs.swap(tx_inflight_);  // tx_inflight_ was h.bufs: empty, with a spare's capacity
  h.bytes = 0;
  for (const BufferList& b : h.bufs) h.bytes += b.length();
  stats_.zc_held_frames += h.bufs.size();
  stats_.zc_held_bytes += h.bytes;
  worker_->zerocopy_hold(h.bytes, 0);
  SIPHON_TRACE(transport, "tcp conn {}: holding {} frames ({} bytes) for zero-copy ids {}+{}", serial_,
               h.bufs.size(), h.bytes, h.first, h.count);
  zc_progress();
}

void TcpConnection::zc_release(ZcHold& h) noexcept {
  stats_.zc_held_frames -= h.bufs.size();
  stats_.zc_held_bytes -= h.bytes;
  stats_.zc_released_frames += h.bufs.size();
  worker_->zerocopy_hold(0, h.bytes);
  h.bufs.clear();  // drops our references: the memory may now be reused
  h.bytes = 0;
  if (zc_spare_.size() < 4 && h.bufs.capacity() != 0) zc_spare_.push_back(std::move(h.bufs));
}

// Releases the completed holds at the head, then closes (lingering) or waits
// for more notifications while any are outstanding.
void TcpConnection::zc_progress() {
  while (zc_head_ < zc_holds_.size()) {
    ZcHold& h = zc_holds_[zc_head_];
    if (!h.sealed || h.done < h.count) break;
    zc_release(h);
    ++zc_head_;
  }
  if (zc_head_ == zc_holds_.size()) {
    zc_holds_.clear();  // keeps the capacity
    zc_head_ = 0;
  } else if (zc_head_ >= 8) {
    zc_holds_.erase(zc_holds_.begin(), zc_holds_.begin() + static_cast<std::ptrdiff_t>(zc_head_));
    zc_head_ = 0;
  }
  if (zc_lingering_ && !zc_outstanding()) return zc_finish_close();
  zc_arm();
}

void TcpConnection::zc_arm() {
  if (zc_waiting_ || !zc_outstanding() || !socket_.is_open()) return;
  zc_waiting_ = true;
  // Completes on EPOLLERR, which the kernel raises when it queues a
  // notification. Notifications queued before this wait was armed were read
  // by the zc_drain() that precedes every arming (same thread, so none can
  // slip in between).
  socket_.async_wait(tcp::socket::wait_error, [self = self()](const boost::system::error_code&) {
    self->zc_waiting_ = false;
    if (!self->socket_.is_open()) return;
    self->zc_drain();
  });
}

void TcpConnection::zc_drain() {
  const int fd = socket_.native_handle();
  for (;;) {
    alignas(cmsghdr) unsigned char control[256];
    msghdr msg{};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t r = ::recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR) continue;
      break;  // EAGAIN: the queue is empty
    }
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      const bool recverr = (cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
                           (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR);
      if (!recverr || cm->cmsg_len < CMSG_LEN(sizeof(sock_extended_err))) continue;
      sock_extended_err serr{};
      std::memcpy(&serr, CMSG_DATA(cm), sizeof serr);
      if (serr.ee_origin != SO_EE_ORIGIN_ZEROCOPY || serr.ee_errno != 0) continue;
      zc_complete(serr.ee_info, serr.ee_data, (serr.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) != 0);
    }
  }
  zc_progress();
}

void TcpConnection::zc_complete(std::uint32_t lo, std::uint32_t hi, bool copied) {
  if (zc_head_ == zc_holds_.size()) return;
  // Ids relative to the oldest outstanding one: every outstanding id is a
  // small distance after it, so the u32 wrap does not matter.
  const std::uint32_t base = zc_holds_[zc_head_].first;
  const std::uint64_t a = static_cast<std::uint32_t>(lo - base);
  const std::uint64_t b = static_cast<std::uint32_t>(hi - base);
  if (b < a) return;  // not a range of ours
  const std::uint64_t n = b - a + 1;
  for (std::size_t i = zc_head_; i < zc_holds_.size(); ++i) {
    ZcHold& h = zc_holds_[i];
    const std::uint64_t ha = static_cast<std::uint32_t>(h.first - base);
    const std::uint64_t hb = ha + h.count;  // [ha, hb)
    const std::uint64_t from = std::max(a, ha), to = std::min(b + 1, hb);
    if (to > from) h.done += static_cast<std::uint32_t>(to - from);
  }
  stats_.zc_completed += n;
  zc_window_done_ += static_cast<std::uint32_t>(n);
  if (copied) {
    stats_.zc_copied += n;
    zc_window_copied_ += static_cast<std::uint32_t>(n);
    worker_->perf().inc(l_msgr_tcp_zerocopy_copied, n);
  }
  if (zc_window_done_ < kZcWindow) return;
  // The kernel copied most of the last window's sends: zero-copy costs this
  // connection page pinning and notifications for nothing.
  if (zc_threshold_ != 0 && shared_->opts.zerocopy_check_copies && zc_window_copied_ * 2 > zc_window_done_) {
    zc_threshold_ = 0;
    stats_.zc_on = false;
    worker_->perf().inc(l_msgr_tcp_zerocopy_disabled);
    SIPHON_LOG(transport, 5,
               "tcp conn {}: zero-copy sends off on this connection: the kernel copied {} of the last {} "
               "(loopback or a device without scatter-gather)",
               serial_, zc_window_copied_, zc_window_done_);
  }
  zc_window_done_ = zc_window_copied_ = 0;
}

void TcpConnection::zc_linger() {
  zc_lingering_ = true;
  boost::system::error_code ignored;
  socket_.cancel(ignored);  // pending reads and writes end; their handlers see `closed`
  ::shutdown(socket_.native_handle(), SHUT_RDWR);
  SIPHON_TRACE(transport, "tcp conn {}: closing with zero-copy sends outstanding; waiting for them", serial_);
  zc_timer_.expires_after(kZcLingerMax);
  zc_timer_.async_wait([self = self()](const boost::system::error_code& ec) { self->zc_linger_expired(ec); });
  zc_drain();
}

void TcpConnection::zc_linger_expired(const boost::system::error_code& ec) {
  if (ec || !zc_lingering_) return;
  if (!zc_aborted_) {
    // The peer does not acknowledge what is outstanding. Reset the
    // connection: the kernel drops the socket's send queues, which completes
    // their zero-copy sends; the socket stays open to read the notifications.
    zc_aborted_ = true;
    SIPHON_LOG(transport, 1,
               "tcp conn {}: closed with zero-copy sends unacknowledged after {} s: resetting the connection",
               serial_, kZcLingerMax.count());
    zc_abort_socket();
    zc_timer_.expires_after(kZcAbortWait);
    zc_timer_.async_wait([self = self()](const boost::system::error_code& e) { self->zc_linger_expired(e); });
    zc_drain();
    return;
  }
  SIPHON_LOG(transport, 1, "tcp conn {}: no zero-copy completion after the reset: releasing {} held bytes",
             serial_, stats_.zc_held_bytes);
  zc_release_all();
  zc_finish_close();
}

void TcpConnection::zc_abort_socket() noexcept {
  sockaddr unspec{};
  unspec.sa_family = AF_UNSPEC;
  (void)::connect(socket_.native_handle(), &unspec, sizeof unspec);  // tcp_disconnect()
}

void TcpConnection::zc_release_all() noexcept {
  for (std::size_t i = zc_head_; i < zc_holds_.size(); ++i) zc_release(zc_holds_[i]);
  zc_holds_.clear();
  zc_head_ = 0;
  zc_batch_open_ = false;  // a batch still being retired is then freed as a copied one
}

void TcpConnection::zc_finish_close() noexcept {
  zc_lingering_ = false;
  try {
    zc_timer_.cancel();
  } catch (...) {
    // Only on a broken reactor; the handler checks zc_lingering_.
  }
  boost::system::error_code ignored;
  socket_.close(ignored);
}

// Last resort, from the destructor (the worker's io_context went away with
// our handlers pending): reset the connection so that the kernel drops its
// references to the pages before our buffers are freed.
void TcpConnection::zc_destroy() noexcept {
  if (!zc_outstanding()) return;
  if (socket_.is_open()) zc_abort_socket();
  zc_release_all();
}

}  // namespace siphon::transport

// ConnectionImpl: the READY data path. Per message: no lock (unless sending
// from another thread, which appends to the inbox under one short lock per
// batch), no logging above trace, one Message allocation on receipt.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "msgr/api/connection_impl.h"
#include "msgr/api/message_access.h"
#include "msgr/base/log.h"
#include "msgr/perf/sampling.h"

namespace siphon::detail {
namespace {

// Data an RDMA stack received zero-copy sits in that stack's registered
// receive pool (segments carrying region keys; nothing else does). Sent on
// as it is -- an echo, a forward -- it would stay pinned in the pool while
// queued and, on a lossless session, in the sent list until the peer
// acknowledges it, which takes the peer's RDMA READ into *its* pool. Two
// peers doing that to each other fill both pools and each READ waits for
// room the other holds, until ms_async_rdma_transfer_timeout faults them
// and the replay stalls again (issue 19, messenger_rdma_echo_test). One
// copy into ordinary memory, on the caller's thread, lets the pool buffers
// go back as soon as the application drops the message it received.
void unpin_received_data(Message& m) {
  BufferList& d = m.data();
  const auto& ptrs = d.ptrs();
  if (d.empty() || std::none_of(ptrs.begin(), ptrs.end(), [](const BufferPtr& p) {
        return p.segment() != nullptr && p.segment()->keys() != nullptr;
      }))
    return;
  const std::size_t n = d.length();
  BufferList copy;
  d.copy_out(0, n, copy.append_uninitialized(n));
  d = std::move(copy);
}

}  // namespace

std::error_code ConnectionImpl::send_message(MessageRef m) {
  if (!m) return make_error_code(errc::invalid_argument);
  if (closed_flag_.load(std::memory_order_acquire)) return make_error_code(errc::not_connected);
  // ms_max_queued_send_bytes_per_connection: refuse rather than grow
  // without bound behind a peer that does not read (a message always passes
  // when nothing is queued). The caller keeps the message.
  const std::uint64_t n = m->payload_length();
  const std::uint64_t max = core_->options.ms_max_queued_send_bytes_per_connection;
  std::uint64_t cur = send_queued_.load(std::memory_order_acquire);
  do {
    if (max != 0 && cur != 0 && cur + n > max) {
      core_->counters.send_queue_full.fetch_add(1, std::memory_order_relaxed);
      // Logged once per episode (until a message is taken again).
      if (!queue_full_logged_.exchange(true, std::memory_order_acq_rel))
        SIPHON_LOG(ms, 1,
                   "send_message to {}: {} bytes already queued, ms_max_queued_send_bytes_per_connection = {}; "
                   "refused with queue_full (the peer reads too slowly; retry later or raise the option)",
                   get_peer_addrs().to_string(), cur, max);
      return make_error_code(errc::queue_full);
    }
  } while (!send_queued_.compare_exchange_weak(cur, cur + n, std::memory_order_acq_rel));
  queue_full_logged_.store(false, std::memory_order_relaxed);
  unpin_received_data(*m);
  MessageAccess::send_stamp(*m) = transport::WorkerPerf::queue_stamp();  // msgr_send_messages_queue_lat, sampled
  bool post = false;
  {
    std::lock_guard l(inbox_mtx_);
    inbox_.emplace_back(std::move(m), n);
    if (!drain_posted_) post = drain_posted_ = true;
  }
  if (post) {
    // Issue 20: on the owning worker (a reply from ms_fast_dispatch, a
    // closed loop refilling its window) the message goes to the transport
    // now instead of one event-loop turn later; nothing is queued ahead of
    // it (the inbox was empty and no drain was pending), so order holds.
    if (in_owner() && can_drain_inline()) {
      drain_inbox();
      return {};
    }
    ConnectionImplRef self(this);
    owner().post([self] { self->on_owner([self] { self->drain_inbox(); }); });
  }
  return {};
}

bool ConnectionImpl::can_drain_inline() const noexcept {
  // READY only: in other states a drain may dial (connect_attempt), which
  // must not run inside the caller's dispatcher callback. Never from inside
  // flush() itself (an encode_payload() that sends).
  return state_ == State::ready && conn_ && !flushing_;
}

void ConnectionImpl::send_keepalive() {
  if (closed_flag_.load(std::memory_order_acquire)) return;
  bool post = false;
  {
    std::lock_guard l(inbox_mtx_);
    keepalive_requested_ = true;
    if (!drain_posted_) post = drain_posted_ = true;
  }
  if (post) {
    ConnectionImplRef self(this);
    owner().post([self] { self->on_owner([self] { self->drain_inbox(); }); });
  }
}

void ConnectionImpl::drain_inbox() {
  SIPHON_ASSERT_ON_WORKER(owner());
  std::vector<std::pair<MessageRef, std::uint64_t>> batch;
  bool keepalive = false;
  {
    std::lock_guard l(inbox_mtx_);
    batch.swap(inbox_);
    keepalive = std::exchange(keepalive_requested_, false);
    drain_posted_ = false;
  }
  if (state_ == State::closed) {
    std::uint64_t n = 0;
    for (const auto& [m, bytes] : batch) n += bytes;
    send_queued_.fetch_sub(n, std::memory_order_acq_rel);
    return;
  }
  for (auto& [m, bytes] : batch) {
    unsent_.emplace_back(m.get(), bytes);
    outq_.push(std::move(m));
  }
  if (keepalive) {
    if (state_ == State::ready)
      send_frame(session::encode(session::Keepalive2{session::stamp_now()}));
    else
      pending_keepalive_ = true;
  }
  if (state_ == State::ready) {
    flush();
  } else if (state_ == State::standby && outq_.has_pending() && can_dial()) {
    connect_attempt();
  }
}

void ConnectionImpl::send_frame(proto::Frame&& f) {
  SIPHON_ASSERT_ON_WORKER(owner());
  if (!conn_) return;
  touch();
  if (const std::error_code ec = conn_->send(std::move(f)); ec) {
    // The transport reports the fault itself; make sure it is handled even
    // if it does not, but not from inside our caller's loop.
    ConnectionImplRef self(this);
    const std::uint64_t gen = attempt_;
    owner().post([self, gen, ec] {
      self->on_owner([self, gen, ec] {
        if (gen == self->attempt_) self->fault(ec, "send failed");
      });
    });
  }
}

// Transport queue level above which flush() stops handing messages over
// (they wait in outq_) and keepalive acks are coalesced: the stack's
// ms_send_queue_high_water, past which it reports backpressure and later
// calls on_writable(). Asked of the stack this connection runs on, so it is
// the mark that stack (TCP, RDMA or a plugin) was configured with.
std::size_t ConnectionImpl::transport_high_water() const {
  return core_->stack->send_queue_marks().high_water;
}

void ConnectionImpl::flush() {
  SIPHON_ASSERT_ON_WORKER(owner());
  if (state_ != State::ready || !conn_) return;
  struct Flushing {
    bool& f;
    const bool was = std::exchange(f, true);
    ~Flushing() { f = was; }
  } flushing{flushing_};
  transport::WorkerPerf& wp = owner().perf();
  // Encoding messages into frames and handing them to the transport.
  const transport::WorkerPerf::Section timed(wp, transport::l_msgr_running_send_time);
  const std::size_t high_water = transport_high_water();
  if (pending_keepalive_ack_ && conn_->queued_bytes() <= high_water)
    send_frame(session::encode(session::Keepalive2Ack{*std::exchange(pending_keepalive_ack_, std::nullopt)}));
  const bool lossless = !lossy_;
  // When the messages of this flush reach the transport, for
  // msgr_send_messages_queue_lat: the section's start, or, in a nested
  // flush (which reads no clock of its own), one clock read taken when the
  // first stamped message goes out.
  transport::WorkerPerf::Clock::time_point handed = timed.start();
  // Until a send takes the queue *above* the mark: that is what makes the
  // transport call on_writable() later (docs/transport.md §1). Stopping at
  // the mark itself left the rest queued with no callback to come, a READY
  // session that sent nothing more (backpressure_test.cc).
  while (outq_.has_pending() && conn_ && conn_->queued_bytes() <= high_water) {
    bool replayed = false;
    MessageRef m = outq_.next_to_send(lossless, replayed);
    if (replayed) core_->counters.messages_replayed.fetch_add(1, std::memory_order_relaxed);
    if (!unsent_.empty() && unsent_.front().first == m.get()) {
      send_queued_.fetch_sub(unsent_.front().second, std::memory_order_acq_rel);
      unsent_.pop_front();
    }
    if (!MessageAccess::encoded(*m)) {
      try {
        m->encode_payload(peer_.features);
      } catch (const std::exception& e) {
        SIPHON_LOG(ms, 0, "encode_payload of message type {} threw: {}; sending it as is",
                   m->get_type(), e.what());
      }
      MessageAccess::encoded(*m) = true;
    }
    const MessageHeader& mh = m->header();
    session::MsgHeader2 h;
    h.seq = mh.seq;
    h.tid = mh.tid;
    h.type = mh.type;
    h.priority = mh.priority;
    h.version = mh.version;
    h.data_off = mh.data_off;
    h.ack_seq = ids_.in_seq;
    h.compat_version = mh.compat_version;
    proto::Frame f;
    f.tag = proto::Tag::message;
    // A segment of exactly 41 bytes (BufferPtr's copying constructor sizes
    // it to fit), not append_uninitialized()'s ~4 KiB chunk: the header is
    // the only thing ever in it.
    std::array<std::byte, session::MsgHeader2::kSize> raw;
    h.encode_to(raw);
    f.segments[0].append(BufferPtr(raw.data(), raw.size()));
    f.segments[1] = m->front();
    f.segments[2] = m->middle();
    f.segments[3] = m->data();
    acked_in_seq_ = ids_.in_seq;
    SIPHON_TRACE(session, "send seq {} type {} ({} bytes)", h.seq, h.type, m->payload_length());
    send_frame(std::move(f));
    core_->counters.messages_sent.fetch_add(1, std::memory_order_relaxed);
    wp.inc(transport::l_msgr_send_messages);
    // send_message() -> handed to the transport (at most one clock read per
    // flush, not per message). Replays are not measured again. A zero stamp
    // means counters were off when it was sent, or the message was not
    // sampled (connection_io.cc's send_message); a zero `handed` after the
    // read, that counters are off now.
    if (auto& stamp = MessageAccess::send_stamp(*m); stamp != transport::WorkerPerf::Clock::time_point{}) {
      if (handed == transport::WorkerPerf::Clock::time_point{}) handed = transport::WorkerPerf::now();
      if (handed != transport::WorkerPerf::Clock::time_point{})
        wp.tinc(transport::l_msgr_send_messages_queue_lat,
                std::max(handed - stamp, transport::WorkerPerf::Clock::duration{}));
      stamp = {};
    }
  }
}

void ConnectionImpl::receive_ready_frame(proto::Frame&& f) {
  std::string why;
  switch (f.tag) {
    case proto::Tag::message:
      receive_message(std::move(f));
      return;
    case proto::Tag::ack: {
      session::Ack a;
      if (!session::decode(f, a, why)) break;
      if (!lossy_) {
        // Ceph's msgr_handle_ack_lat: the time to drop what the ACK covers.
        const auto t0 = transport::WorkerPerf::now();
        outq_.ack(a.seq);
        if (t0 != transport::WorkerPerf::Clock::time_point{})
          owner().perf().tinc(transport::l_msgr_handle_ack_lat, transport::WorkerPerf::read_clock() - t0);
      }
      return;
    }
    case proto::Tag::keepalive2: {
      session::Keepalive2 k;
      if (!session::decode(f, k, why)) break;
      if (conn_ && conn_->queued_bytes() > transport_high_water()) {
        // The peer is not reading what we send: answer only its newest
        // keepalive, once the queue drains (flush(), from on_writable).
        if (!pending_keepalive_ack_)
          SIPHON_LOG(session, 5, "{}: send queue full, coalescing keepalive acks", describe());
        pending_keepalive_ack_ = k.timestamp;
        return;
      }
      pending_keepalive_ack_.reset();
      send_frame(session::encode(session::Keepalive2Ack{k.timestamp}));
      return;
    }
    case proto::Tag::keepalive2_ack: {
      session::Keepalive2Ack k;
      if (!session::decode(f, k, why)) break;
      keepalive_ack_ns_.store(std::uint64_t{k.timestamp.sec} * 1000000000u + k.timestamp.nsec);
      return;
    }
    default:
      core_->counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
      fault(make_error_code(errc::unexpected_frame),
            fmt::format("unexpected {} frame in READY", proto::to_string(f.tag)));
      return;
  }
  core_->counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
  fault(make_error_code(errc::decode_error), why);
}

void ConnectionImpl::receive_message(proto::Frame&& f) {
  auto decoded = session::MsgHeader2::decode(f.segments[0]);
  if (!decoded) {
    core_->counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
    fault(make_error_code(errc::decode_error), decoded.error().message());
    return;
  }
  const session::MsgHeader2& h = *decoded;
  if (h.seq <= ids_.in_seq) {
    // Already have it (a replay overlapping what we acknowledged late).
    core_->counters.duplicates_dropped.fetch_add(1, std::memory_order_relaxed);
    SIPHON_TRACE(session, "dropping old message seq {} (in_seq {})", h.seq, ids_.in_seq);
    return;
  }
  if (h.seq != ids_.in_seq + 1)
    SIPHON_LOG(session, 5, "message seq {} skips ahead of in_seq {}", h.seq, ids_.in_seq);
  ids_.in_seq = h.seq;
  if (!lossy_) outq_.ack(h.ack_seq);

  MessageRef m;
  if (core_->registry) m = core_->registry->create(h.type);
  const bool typed = static_cast<bool>(m);
  if (typed && h.compat_version > m->get_version()) {
    core_->counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
    fault(make_error_code(errc::decode_error),
          fmt::format("message type {} has compat_version {}, we understand up to version {}", h.type,
                      h.compat_version, m->get_version()));
    return;
  }
  if (!typed) m = MessageRef(new Message(h.type, h.version, h.compat_version));
  MessageHeader& mh = m->header();
  mh.seq = h.seq;
  mh.tid = h.tid;
  mh.type = h.type;
  mh.priority = h.priority;
  mh.version = h.version;
  mh.compat_version = h.compat_version;
  mh.data_off = h.data_off;
  m->front() = std::move(f.segments[1]);
  m->middle() = std::move(f.segments[2]);
  m->data() = std::move(f.segments[3]);
  if (typed) {
    try {
      m->decode_payload();
    } catch (const std::exception& e) {
      core_->counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
      fault(make_error_code(errc::decode_error),
            fmt::format("message type {} seq {} failed to decode: {}", h.type, h.seq, e.what()));
      return;
    }
  }
  const auto received = std::chrono::steady_clock::now();
  MessageAccess::set_received(*m, ConnectionRef(this), entity_name_t{peer_.type, peer_.gid}, received);
  const std::uint64_t bytes = m->payload_length();
  bool over = false;
  if (policy_.throttler_messages || policy_.throttler_bytes)
    MessageAccess::set_budget(*m, MessengerCore::take_budget(core_, policy_, bytes, over));
  core_->counters.messages_received.fetch_add(1, std::memory_order_relaxed);
  transport::WorkerPerf& wp = owner().perf();
  wp.inc(transport::l_msgr_recv_messages);

  bool fast = false;
  if (core_->any_fast_dispatch) {
    for (Dispatcher* d : core_->dispatchers) {
      if (d->ms_can_fast_dispatch(*m)) {
        // Sampled (msgr/perf/sampling.h): from the receive stamp above to
        // the dispatcher's return, one more clock read.
        const bool timed = perf::sample_at_random<perf::kFastDispatchSampleEvery>();
        d->ms_fast_dispatch(std::move(m));
        if (timed)
          wp.tinc(transport::l_msgr_running_fast_dispatch_time,
                  (transport::WorkerPerf::read_clock() - received) * perf::kFastDispatchSampleEvery);
        fast = true;
        break;
      }
    }
  }
  if (!fast) {
    const std::uint64_t queued = core_->dispatch_bytes.fetch_add(bytes, std::memory_order_acq_rel) + bytes;
    set_gauge(*core_->perf, l_siphon_msgr_undispatched_bytes, queued);
    const std::uint64_t mine = undispatched_.fetch_add(bytes, std::memory_order_acq_rel) + bytes;
    core_->dispatch_queue.enqueue({DispatchQueue::Kind::message, std::move(m), ConnectionRef(this), bytes});
    if (queued > core_->options.ms_dispatch_throttle_bytes) over = true;
    if (const std::uint64_t max = core_->options.ms_max_undispatched_bytes_per_connection; max != 0 && mine > max) {
      over = true;
      SIPHON_TRACE(session, "{} undispatched bytes over ms_max_undispatched_bytes_per_connection ({})", mine, max);
    }
  }
  if (state_ != State::ready) return;  // a dispatcher marked us down
  if (over) pause_for_budget();
  maybe_ack();
}

void ConnectionImpl::maybe_ack() {
  if (lossy_ || ack_posted_ || ids_.in_seq <= acked_in_seq_) return;
  ack_posted_ = true;
  // After the frames already delivered in this read have been handled, so
  // one ACK covers them all (and none is needed if a message went out).
  ConnectionImplRef self(this);
  owner().post([self] { self->on_owner([self] { self->send_ack_now(); }); });
}

void ConnectionImpl::send_ack_now() {
  ack_posted_ = false;
  if (state_ != State::ready || ids_.in_seq <= acked_in_seq_) return;
  acked_in_seq_ = ids_.in_seq;
  send_frame(session::encode(session::Ack{ids_.in_seq}));
}

void ConnectionImpl::forget_unsent() {
  std::uint64_t n = 0;
  for (const auto& u : unsent_) n += u.second;
  unsent_.clear();
  send_queued_.fetch_sub(n, std::memory_order_acq_rel);
}

void ConnectionImpl::release_undispatched(std::uint64_t bytes) {
  // The dispatch queue's release callback wakes the paused connections next
  // (MessengerCore), and each re-checks over_budget().
  undispatched_.fetch_sub(bytes, std::memory_order_acq_rel);
}

bool ConnectionImpl::over_budget() const {
  if (core_->dispatch_bytes.load(std::memory_order_acquire) > core_->options.ms_dispatch_throttle_bytes)
    return true;
  if (const std::uint64_t max = core_->options.ms_max_undispatched_bytes_per_connection;
      max != 0 && undispatched_.load(std::memory_order_acquire) > max)
    return true;
  if (policy_.throttler_messages && policy_.throttler_messages->full()) return true;
  if (policy_.throttler_bytes && policy_.throttler_bytes->full()) return true;
  return false;
}

void ConnectionImpl::pause_for_budget() {
  if (!paused_) {
    paused_ = true;
    if (conn_) conn_->pause_receive(true);
    SIPHON_TRACE(session, "throttled: pausing receive");
  }
  // Keeps our place in line if we were already waiting (woken, still full).
  wait_ticket_ = core_->add_waiter(ConnectionImplRef(this), wait_ticket_);
  if (!over_budget()) core_->wake_waiters();  // released while we registered
}

void ConnectionImpl::try_resume() {
  ConnectionImplRef self(this);
  owner().post([self] {
    self->on_owner([self] {
      if (!self->paused_ || self->state_ == State::closed) return;
      if (self->over_budget()) {
        self->pause_for_budget();
        return;
      }
      self->paused_ = false;
      self->wait_ticket_ = 0;  // served: a later pause waits at the back
      if (self->conn_) self->conn_->pause_receive(false);
    });
  });
}

}  // namespace siphon::detail

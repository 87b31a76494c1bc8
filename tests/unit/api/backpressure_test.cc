// The session keeps the transport's backpressure contract (docs/transport.md
// §1): a transport calls on_writable() only after a send() took
// queued_bytes() *above* its high-water mark, so the session must keep
// handing frames over while the queue is at the mark, not stop there. A
// session that stopped at exactly the mark waited for an on_writable() that
// never came: a READY connection with messages queued and nothing sent,
// forever, and no fault to say so.
//
// The stack here wraps the TCP stack and keeps its own books: every frame
// counts as exactly kUnit queued bytes, held until the worker's next turn
// (then handed to TCP), with a high-water mark of kMarkFrames frames. Each
// flush therefore reaches the mark exactly, which a real transport does only
// by the chance of frame sizes.
#include <atomic>
#include <deque>
#include <memory>

#include "messenger_pair.h"
#include "messenger_state.h"
#include "msgr/transport/tcp_stack.h"
#include "msgr/transport/transport.h"
#include "msgr_test_util.h"

namespace siphon::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kUnit = 4096;
constexpr std::size_t kMarkFrames = 4;
constexpr std::size_t kHighWater = kMarkFrames * kUnit;
constexpr std::uint16_t kType = 0x7601;

// A connection that queues frames itself (kUnit bytes each, whatever their
// size) and hands them to the TCP connection below at the worker's next
// turn, reporting backpressure as the contract says: on_writable() once,
// after a send() took the queue above kHighWater, when it has drained.
class GatedConnection final : public transport::Connection, public transport::ConnectionHandler {
 public:
  explicit GatedConnection(transport::ConnectionRef inner) : inner_(std::move(inner)) {}

  void start(transport::ConnectionHandler& handler, const proto::Banner& mine) override {
    handler_ = &handler;
    inner_->start(*this, mine);
  }
  std::error_code send(proto::Frame&& frame) override {
    if (closed_) return make_error_code(errc::not_connected);
    held_.push_back(std::move(frame));
    queued_ += kUnit;
    if (queued_ > kHighWater) backpressure_ = true;
    if (!release_posted_) {
      release_posted_ = true;
      inner_->worker().post([self = self()] { self->release(); });
    }
    return {};
  }
  std::size_t queued_bytes() const noexcept override { return queued_; }
  void pause_receive(bool paused) override { inner_->pause_receive(paused); }
  void close() override {
    closed_ = true;
    held_.clear();
    inner_->close();
  }
  std::error_code start_secure(std::span<const std::uint8_t> secret, std::string& why) override {
    return inner_->start_secure(secret, why);
  }
  transport::Worker& worker() noexcept override { return inner_->worker(); }
  const NetAddress& peer_address() const noexcept override { return inner_->peer_address(); }
  const NetAddress& local_address() const noexcept override { return inner_->local_address(); }
  bool is_client() const noexcept override { return inner_->is_client(); }

  // The TCP connection's callbacks, passed up (its own on_writable never
  // fires: its 4 MiB mark is never reached here).
  void on_established(const proto::Negotiated& n) override {
    if (!closed_) handler_->on_established(n);
  }
  void on_frame(proto::Frame&& f) override {
    if (!closed_) handler_->on_frame(std::move(f));
  }
  void on_fault(const transport::Fault& f) override {
    if (!closed_) handler_->on_fault(f);
  }

  static inline std::atomic<std::uint64_t> writables{0};

 private:
  std::shared_ptr<GatedConnection> self() { return std::static_pointer_cast<GatedConnection>(shared_from_this()); }

  void release() {
    release_posted_ = false;
    if (closed_) return;
    while (!held_.empty()) {
      proto::Frame f = std::move(held_.front());
      held_.pop_front();
      if (inner_->send(std::move(f))) break;  // faulted: TCP reports it
    }
    queued_ = 0;
    if (backpressure_) {
      backpressure_ = false;
      writables.fetch_add(1, std::memory_order_relaxed);
      handler_->on_writable();  // from the event loop, never inside send()
    }
  }

  transport::ConnectionRef inner_;
  transport::ConnectionHandler* handler_ = nullptr;
  std::deque<proto::Frame> held_;
  std::size_t queued_ = 0;
  bool backpressure_ = false;
  bool release_posted_ = false;
  bool closed_ = false;
};

class GatedStack final : public transport::Stack {
 public:
  GatedStack() : inner_(transport::make_tcp_stack(test_stack_options())) {}
  std::string_view type() const noexcept override { return inner_->type(); }
  std::size_t worker_count() const noexcept override { return inner_->worker_count(); }
  transport::Worker& worker(std::size_t i) noexcept override { return inner_->worker(i); }
  transport::Worker& pick_worker() noexcept override { return inner_->pick_worker(); }
  transport::SendQueueMarks send_queue_marks() const noexcept override { return {kHighWater, 0}; }
  void start() override { inner_->start(); }
  void stop() override { inner_->stop(); }
  std::error_code listen(const NetAddress& addr, transport::AcceptHandler on_accept, NetAddress& bound) override {
    return inner_->listen(
        addr, [on_accept](transport::ConnectionRef c) { on_accept(std::make_shared<GatedConnection>(std::move(c))); },
        bound);
  }
  void connect(const NetAddress& peer, transport::Worker& w, transport::ConnectHandler done) override {
    inner_->connect(peer, w, [done](std::error_code ec, transport::ConnectionRef c) {
      done(ec, c ? std::make_shared<GatedConnection>(std::move(c)) : nullptr);
    });
  }

 private:
  std::shared_ptr<transport::Stack> inner_;
};

// Messages sent before the session is READY wait in its queue; at READY one
// flush hands them over, and with every frame kUnit bytes it stops with the
// queue exactly at the mark. Every request must still reach the server and
// every reply the client, each in order (the server's replies go through the
// same flush, several per turn).
TEST(SessionBackpressure, AQueueExactlyAtTheHighWaterMarkKeepsSending) {
  constexpr std::uint64_t kCount = 200;
  RecordingDispatcher server_d, client_d;
  std::atomic<std::uint64_t> out_of_order{0};
  std::uint64_t next_tid = 1, next_reply = 1;
  client_d.on_message = [&](const MessageRef& m) {
    if (m->get_tid() != next_reply++) out_of_order.fetch_add(1);
  };
  server_d.on_message = [&](const MessageRef& m) {
    if (m->get_tid() != next_tid++) out_of_order.fetch_add(1);
    MessageRef r = make_message<Message>(kType);
    r->set_tid(m->get_tid());
    r->data().append(BufferList::copy_of("pong"));
    EXPECT_FALSE(m->get_connection()->send_message(r));
  };
  MessengerPair p;
  p.server = Messenger::create(std::make_shared<GatedStack>(), {entity_type::osd, 0}, test_options());
  p.client = Messenger::create(std::make_shared<GatedStack>(), {entity_type::client, 1}, test_options());
  p.server->set_policy(entity_type::client, Policy::stateful_server());
  p.client->set_policy(entity_type::osd, Policy::lossless_client());
  ASSERT_NO_FATAL_FAILURE(start_pair(*p.server, server_d, *p.client, client_d));
  GatedConnection::writables = 0;
  ConnectionRef con = p.client->connect_to(entity_type::osd, p.server->get_myaddrs());
  for (std::uint64_t i = 1; i <= kCount; ++i) {
    MessageRef m = make_message<Message>(kType);
    m->set_tid(i);
    m->data().append(BufferList::copy_of("ping"));
    ASSERT_FALSE(con->send_message(m));
  }
  const bool all = client_d.w.wait_for([&] { return client_d.messages == kCount; }, 30s);
  if (!all) {
    print_messenger_state("client", *p.client);
    print_messenger_state("server", *p.server);
  }
  EXPECT_TRUE(all) << "the server got " << server_d.counts().messages << " of " << kCount
                   << " requests and the client " << client_d.counts().messages
                   << " replies: a session stopped at the high-water mark and was never told to go on";
  EXPECT_EQ(out_of_order.load(), 0u);
  // The mark was crossed (so the stack had to call on_writable), and each
  // time the session went on.
  EXPECT_GT(GatedConnection::writables.load(), 0u) << "no send took the queue above the mark";
  EXPECT_EQ(p.client->stats().faults, 0u);
}

}  // namespace
}  // namespace siphon::test

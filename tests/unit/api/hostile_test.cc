// Hostile peers against a running messenger (issue 10, item 2). Built twice:
// messenger_hostile_test (async+posix) and messenger_hostile_test_rdma
// (async+rdma on the software fabric, SIPHON_TEST_RDMA); the attacker is the
// same byte-level msgr2 client over a TCP socket or a raw RC queue pair
// (hostile_link.h).
//
// Every scenario checks three things:
//   1. the attacked connection is closed with a logged reason the test looks
//      for (or, for floods of valid traffic, held and served);
//   2. a well-behaved client on the same server completes a fixed number of
//      round trips while the attack runs (behaviour, no timing);
//   3. the server stays within a stated memory bound, printed as
//      "hostile-bound ..." lines: the messenger's own accounting
//      (undispatched bytes vs ms_dispatch_throttle_bytes, live connections),
//      the RDMA stack's (pool buffers in use, registered bytes) and the
//      process's RSS growth with a generous margin.
// The scenarios and bounds are listed in docs/testing.md §Hostile peers.
#include <fstream>
#include <map>
#include <thread>

#include "hostile_link.h"
#include "msgr_test_util.h"
#ifdef SIPHON_TEST_RDMA
#include "rdma/transport/rdma_stack.h"
#endif

namespace siphon::test {
namespace {

constexpr std::uint16_t kPing = 0x7301;
constexpr std::uint16_t kPong = 0x7302;
constexpr std::uint16_t kSink = 0x7303;
constexpr int kRoundTrips = 20;
constexpr std::uint64_t kThrottle = 4u << 20;  // ms_dispatch_throttle_bytes in these tests
constexpr std::size_t kHighWater = 1u << 20;   // ms_send_queue_high_water in these tests

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif
// RSS growth allowed during one scenario: generous (allocator caches, the
// attacker's own buffers live in this process too); sanitizers keep freed
// memory in quarantine (ASan: 256 MiB by default), hence the larger margin.
constexpr std::uint64_t kRssSlack = kSanitized ? (768ull << 20) : (64ull << 20);

std::uint64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

#ifdef SIPHON_TEST_RDMA
constexpr std::string_view kStack = "async+rdma";
#else
constexpr std::string_view kStack = "async+posix";
#endif

struct Hostile : ::testing::Test {
  MessengerOptions opts = test_options();
  transport::TcpOptions stack_opts = test_stack_options(2);  // both stacks'
  std::shared_ptr<transport::Stack> sstack;
  std::unique_ptr<Messenger> server, client;
  RecordingDispatcher sd, cd;
  ConnectionRef good;
  std::uint64_t pongs = 0;
  std::uint64_t baseline_connections = 0;
  std::uint32_t next_nonce = 0x51000;
  static constexpr std::uint64_t kMessageCap = 256;
  std::shared_ptr<Throttle> client_messages = std::make_shared<Throttle>("client messages", kMessageCap);
  std::atomic<bool> slow_sink{false};

  // Short for the scenarios that wait for it; generous for the others, whose
  // handshakes must not time out on a loaded (sanitized, shared) CI machine.
  std::chrono::milliseconds ready_timeout = 5s;

  void SetUp() override {
    opts.ms_connection_ready_timeout = ready_timeout;
    opts.ms_dispatch_throttle_bytes = kThrottle;
    // The marks are the stacks' own: the messengers' sessions ask their stack.
    stack_opts.common.send_queue_high_water = kHighWater;
    stack_opts.common.send_queue_low_water = kHighWater / 4;
    sstack = make_test_stack(stack_opts);
    server = Messenger::create(sstack, {entity_type::osd, 0}, opts);
    client = make_messenger({entity_type::client, 1}, opts, stack_opts);
    // As an OSD does for clients (osd_client_message_cap): a budget for
    // messages received and not yet released by the application.
    Policy sp = Policy::stateful_server();
    sp.throttler_messages = client_messages;
    server->set_policy(entity_type::client, sp);
    client->set_policy(entity_type::osd, Policy::lossless_client());
    // The server echoes pings; everything else is counted and dropped
    // (slowly when slow_sink is set: the dispatcher falls behind a flood).
    sd.on_message = [this](const MessageRef& m) {
      if (m->get_type() == kSink && slow_sink.load()) {
        const auto until = std::chrono::steady_clock::now() + 10us;  // a spin: sleeps are 50 us+
        while (std::chrono::steady_clock::now() < until) {
        }
      }
      if (m->get_type() != kPing) return;
      auto pong = make_message<Message>(kPong);
      pong->front() = m->front();
      m->get_connection()->send_message(pong);
    };
    ASSERT_NO_FATAL_FAILURE(start_pair(*server, sd, *client, cd));
    good = client->connect_to(entity_type::osd, server->get_myaddrs());
    ASSERT_NO_FATAL_FAILURE(round_trips(2));
    baseline_connections = server->stats().connections;
  }
  void TearDown() override {
    client->shutdown();
    server->shutdown();
    client->wait();
    server->wait();
  }

  NetAddress addr() const { return server->get_myaddrs().front().addr; }
  EntityAddr target() const { return server->get_myaddrs().front(); }

  // The bystander: `n` ping/pong round trips on the good connection.
  void round_trips(int n) {
    for (int i = 0; i < n; ++i) {
      auto m = make_message<Message>(kPing);
      m->front() = BufferList::copy_of(std::string(512, 'p'));
      good->send_message(m);
      ++pongs;
      ASSERT_TRUE(cd.w.wait_for([&] { return cd.messages >= pongs; }))
          << "the well-behaved client stalled at round trip " << i;
    }
    EXPECT_EQ(cd.resets + cd.remote_resets, 0) << "the well-behaved client's session was disturbed";
  }

  std::unique_ptr<RawClient> raw() {
    auto l = open_link(addr());
    if (!l) return nullptr;
    return std::make_unique<RawClient>(std::move(l));
  }
  // A raw client with a READY lossless session (new nonce, new session).
  std::unique_ptr<RawClient> ready_raw() {
    auto r = raw();
    if (!r) return nullptr;
    EXPECT_TRUE(r->exchange_banners());
    session::ClientHandshake hs(raw_identity(++next_nonce), lossless_client_view(), target(),
                                proto::kEntityTypeOsd, {}, raw_services());
    const auto st = r->handshake(hs);
    EXPECT_EQ(st.outcome, session::Step::Outcome::ready) << st.reason;
    if (st.outcome != session::Step::Outcome::ready) return nullptr;
    return r;
  }
  static std::string message_frame(std::uint64_t seq, std::size_t front, std::uint16_t type = kSink) {
    proto::Frame m;
    m.tag = proto::Tag::message;
    m.segments[0] = proto::MessageHeader2::make(type, seq, 0).encode();
    if (front > 0) m.segments[1] = BufferList::copy_of(std::string(front, 'f'));
    return proto::encode_frame(m, proto::FrameRev::rev1).to_string();
  }
  // A MESSAGE frame whose preamble claims a front segment of `claim` bytes
  // (segment 1's length at preamble offset 2 + 6; the preamble crc
  // re-sealed), followed by only 64 KiB of it.
  static std::string claiming_frame(std::uint32_t claim) {
    std::string f = message_frame(1, 1);
    std::memcpy(f.data() + 8, &claim, 4);
    const std::uint32_t crc = BufferList::copy_of(f.data(), 28).crc32c(0);
    std::memcpy(f.data() + 28, &crc, 4);
    return f + std::string(64 * 1024, 'z');
  }
  // Opens `n` raw clients -- past the banner exchange, or with `ready` past
  // the handshake too -- that each send a MESSAGE claiming 200 MiB
  // (claiming_frame).
  void open_claimers(int n, bool ready, std::vector<std::unique_ptr<RawClient>>& peers) {
    for (int i = 0; i < n; ++i) {
      auto r = ready ? ready_raw() : raw();
      ASSERT_TRUE(r);
      if (!ready) {
        ASSERT_TRUE(r->exchange_banners());
      }
      ASSERT_TRUE(r->send(claiming_frame(200u << 20)));
      peers.push_back(std::move(r));
    }
  }

  // Samples the server's accounting while an attack runs.
  struct Watch {
    Hostile& t;
    std::atomic<bool> stop{false};
    std::uint64_t rss0 = rss_bytes();
    std::uint64_t rss_peak = rss0, undispatched_peak = 0, connections_peak = 0;
    std::uint64_t buffers_peak = 0, registered0 = 0, registered_peak = 0;
    std::thread th;
    explicit Watch(Hostile& h) : t(h) {
#ifdef SIPHON_TEST_RDMA
      registered0 = registered_peak = rdma_stack().registered_bytes();
#endif
      th = std::thread([this] {
        while (!stop.load()) {
          sample();
          std::this_thread::sleep_for(1ms);
        }
      });
    }
    ~Watch() { finish(); }
#ifdef SIPHON_TEST_RDMA
    const rdma::RdmaStack& rdma_stack() const { return dynamic_cast<const rdma::RdmaStack&>(*t.sstack); }
#endif
    void sample() {
      const MessengerStats s = t.server->stats();
      undispatched_peak = std::max(undispatched_peak, s.undispatched_bytes);
      connections_peak = std::max(connections_peak, s.connections);
      rss_peak = std::max(rss_peak, rss_bytes());
#ifdef SIPHON_TEST_RDMA
      buffers_peak = std::max<std::uint64_t>(buffers_peak, rdma_stack().buffers_in_use());
      registered_peak = std::max<std::uint64_t>(registered_peak, rdma_stack().registered_bytes());
#endif
    }
    void finish() {
      if (th.joinable()) {
        stop = true;
        th.join();
        sample();
      }
    }
    // Checks and prints the bounds. `attackers`: connections the attack opened.
    void check(std::string_view scenario, std::uint64_t attackers, std::uint64_t undispatched_bound = kThrottle + (1u << 20)) {
      finish();
      const std::uint64_t rss_delta = rss_peak - rss0;
      const std::uint64_t conn_bound = t.baseline_connections + attackers;
      std::printf("hostile-bound %s [%.*s]: undispatched peak %llu <= %llu B (ms_dispatch_throttle_bytes %llu + 1 MiB); "
                  "connections peak %llu <= %llu; RSS delta %llu <= %llu B\n",
                  std::string(scenario).c_str(), static_cast<int>(kStack.size()), kStack.data(),
                  static_cast<unsigned long long>(undispatched_peak), static_cast<unsigned long long>(undispatched_bound),
                  static_cast<unsigned long long>(kThrottle), static_cast<unsigned long long>(connections_peak),
                  static_cast<unsigned long long>(conn_bound), static_cast<unsigned long long>(rss_delta),
                  static_cast<unsigned long long>(kRssSlack));
      EXPECT_LE(undispatched_peak, undispatched_bound);
      EXPECT_LE(connections_peak, conn_bound);
      EXPECT_LE(rss_delta, kRssSlack);
#ifdef SIPHON_TEST_RDMA
      const auto& opt = rdma_stack().options();
      // The pools grow in slabs of 64 buffers up to a hard cap and never
      // shrink. An attacking connection holds its posted receives (credits +
      // update slots) and at most its send credits' worth of send buffers.
      const std::uint64_t per_conn = std::uint64_t{opt.credits} * 2 + rdma::kUpdateSlots;
      const std::uint64_t buffers_bound = 64 + (t.baseline_connections + attackers) * per_conn;
      const std::uint64_t growth_bound = (2 * 64 + attackers * per_conn) * opt.buffer_size;
      const std::uint64_t cap = (std::uint64_t{opt.send_buffers} + opt.receive_buffers) * opt.buffer_size;
      std::printf("hostile-bound %s [rdma]: pool buffers in use peak %llu <= %llu (64 + %llu per connection); "
                  "registered bytes grew %llu <= %llu B, peak %llu <= cap %llu B\n",
                  std::string(scenario).c_str(), static_cast<unsigned long long>(buffers_peak),
                  static_cast<unsigned long long>(buffers_bound), static_cast<unsigned long long>(per_conn),
                  static_cast<unsigned long long>(registered_peak - registered0),
                  static_cast<unsigned long long>(growth_bound), static_cast<unsigned long long>(registered_peak),
                  static_cast<unsigned long long>(cap));
      EXPECT_LE(buffers_peak, buffers_bound);
      EXPECT_LE(registered_peak - registered0, growth_bound);
      EXPECT_LE(registered_peak, cap);
#endif
      std::fflush(stdout);
    }
  };

  // After the attack: the server is back to the well-behaved client, plus
  // `standby` lossless sessions the attackers established (a stateful server
  // keeps those for a reconnect; ms_max_connections bounds how many).
  void expect_baseline(std::uint64_t standby = 0) {
    EXPECT_TRUE(eventually([&] { return server->stats().connections == baseline_connections + standby; }, 20s))
        << server->stats().connections << " connections, want " << baseline_connections << " + " << standby
        << " standby sessions";
  }
  static std::size_t count(LogCapture& logs, const std::string& needle) {
    std::size_t n = 0;
    for (const auto& l : logs.lines()) n += l.find(needle) != std::string::npos;
    return n;
  }
};

// The scenarios that end in ms_connection_ready_timeout run with 1 s.
struct HostileHandshake : Hostile {
  HostileHandshake() { ready_timeout = 1s; }
};

// Handshakes that never finish: banner and HELLO, then silence. Each is
// closed by ms_connection_ready_timeout.
TEST_F(HostileHandshake, HalfOpenHandshakesHitTheReadyTimeout) {
  LogCapture logs;
  constexpr int kN = 16;
  Watch w(*this);
  std::vector<std::unique_ptr<RawClient>> peers;
  for (int i = 0; i < kN; ++i) {
    auto r = raw();
    ASSERT_TRUE(r);
    ASSERT_TRUE(r->exchange_banners());
    session::ClientHandshake hs(raw_identity(++next_nonce), lossless_client_view(), target(),
                                proto::kEntityTypeOsd, {}, raw_services());
    for (const auto& f : hs.start().send) ASSERT_TRUE(r->send(f));
    peers.push_back(std::move(r));
  }
  round_trips(kRoundTrips);
  for (auto& p : peers) EXPECT_TRUE(p->link().closed_by_peer()) << "a half-open handshake was kept open";
  EXPECT_TRUE(eventually([&] { return count(logs, "ms_connection_ready_timeout") >= kN; }, 10s))
      << count(logs, "ms_connection_ready_timeout") << " ready timeouts logged, want " << kN;
  round_trips(kRoundTrips);
  w.check("half-open handshakes x16", kN);
  expect_baseline();
}

// Slow senders: a valid banner and HELLO, one byte per SEND/write every
// 20 ms. The handshake cannot finish within ms_connection_ready_timeout, so
// the connection is closed; the decoder never holds more than one frame.
TEST_F(HostileHandshake, SlowSendersTrickleOneByteAtATime) {
  LogCapture logs;
  constexpr int kN = 4;
  Watch w(*this);
  std::vector<std::thread> trickles;
  std::atomic<int> closed{0};
  std::atomic<std::size_t> max_sent{0};
  for (int i = 0; i < kN; ++i) {
    trickles.emplace_back([&, nonce = ++next_nonce] {
      auto r = raw();
      if (!r) return;
      session::ClientHandshake hs(raw_identity(nonce), lossless_client_view(), target(), proto::kEntityTypeOsd, {},
                                  raw_services());
      std::string bytes = RawClient::banner();
      for (const auto& f : hs.start().send) bytes += r->wire(f);
      std::size_t sent = 0;
      const auto end = std::chrono::steady_clock::now() + 20s;
      while (std::chrono::steady_clock::now() < end) {
        if (sent < bytes.size() && !r->send(bytes.substr(sent, 1))) break;
        if (sent < bytes.size()) ++sent;
        std::string sink;
        if (!r->link().recv(sink, 20ms)) break;  // closed by the server
      }
      if (r->link().closed_by_peer(1s)) ++closed;
      std::size_t m = max_sent.load();
      while (sent > m && !max_sent.compare_exchange_weak(m, sent)) {
      }
    });
  }
  round_trips(kRoundTrips);
  for (auto& t : trickles) t.join();
  EXPECT_EQ(closed.load(), kN) << "a trickling peer was kept open";
  EXPECT_TRUE(eventually([&] { return count(logs, "ms_connection_ready_timeout") >= kN; }, 10s))
      << count(logs, "ms_connection_ready_timeout") << " ready timeouts logged, want " << kN;
  std::printf("hostile: trickling peers sent at most %zu bytes each before the ready timeout closed them\n",
              max_sent.load());
  w.check("slow senders x4", kN);
  expect_baseline();
}

// A frame whose preamble claims a segment over ms_max_segment_size (1 GiB,
// with a valid preamble crc) is refused before any of it is buffered.
TEST_F(Hostile, HugeSegmentClaimOverTheLimitIsRefused) {
  LogCapture logs;
  Watch w(*this);
  auto r = raw();
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->exchange_banners());
  std::string f = r->wire(proto::Frame::control(proto::Tag::hello, BufferList::copy_of(std::string(16, 'a'))));
  const std::uint32_t len = 1u << 30;
  std::memcpy(f.data() + 2, &len, 4);
  const std::uint32_t crc = BufferList::copy_of(f.data(), 28).crc32c(0);
  std::memcpy(f.data() + 28, &crc, 4);
  // Not checked: on RDMA the server can reject the preamble and disconnect
  // before our SEND's completion is seen; the log line proves it arrived.
  (void)r->send(f.substr(0, 32));
  round_trips(kRoundTrips);
  EXPECT_TRUE(r->link().closed_by_peer());
  EXPECT_TRUE(eventually([&] { return logs.contains("over the limit"); }, 10s));
  w.check("segment claim over the limit", 1);
  expect_baseline();
}

// Before the handshake: a MESSAGE preamble claiming a 200 MiB segment (under
// ms_max_segment_size, so the decoder waits for it) and 64 KiB of it. The
// frame is out of state, but the server only sees that once it is whole;
// until then ms_connection_ready_timeout bounds how long the bytes are held.
TEST_F(HostileHandshake, HugeSegmentClaimBeforeTheHandshakeHitsTheReadyTimeout) {
  LogCapture logs;
  constexpr int kN = 4;
  Watch w(*this);
  std::vector<std::unique_ptr<RawClient>> peers;
  ASSERT_NO_FATAL_FAILURE(open_claimers(kN, /*ready=*/false, peers));
  round_trips(kRoundTrips);
  for (auto& p : peers) EXPECT_TRUE(p->link().closed_by_peer()) << "a pre-handshake claim was kept open";
  EXPECT_TRUE(eventually([&] { return count(logs, "ms_connection_ready_timeout") >= kN; }, 10s))
      << count(logs, "ms_connection_ready_timeout") << " ready timeouts logged, want " << kN;
  w.check("200 MiB segment claims before the handshake x4", kN);
  expect_baseline();
}

// READY sessions whose MESSAGE preamble claims a 200 MiB front segment (legal:
// under ms_max_segment_size) and then deliver only 64 KiB. The server holds
// them (a slow peer is not an error) without committing memory for what was
// claimed: RSS grows by what arrived, not by what was announced.
TEST_F(Hostile, HugeSegmentClaimsAreHeldWithoutReservingTheClaim) {
  constexpr int kN = 4;
  Watch w(*this);
  std::vector<std::unique_ptr<RawClient>> peers;
  ASSERT_NO_FATAL_FAILURE(open_claimers(kN, /*ready=*/true, peers));
  round_trips(kRoundTrips);
  const std::uint64_t faults = server->stats().faults;
  EXPECT_EQ(server->stats().connections, baseline_connections + kN) << "a held claim was closed";
  {
    LogCapture logs;
    peers.clear();  // the attackers give up: the server sees each one go
    // The fault counter moves before the fault's log line is written (TSan
    // once caught the count at 3 of 4): wait for both.
    EXPECT_TRUE(eventually([&] { return server->stats().faults >= faults + kN; }, 20s));
    EXPECT_TRUE(eventually([&] { return count(logs, "faulted") >= static_cast<std::size_t>(kN); }, 20s))
        << count(logs, "faulted") << " faults logged, want " << kN;
  }
  round_trips(kRoundTrips);
  w.check("200 MiB segment claims x4", kN);
  expect_baseline(kN);
}

// A flood of tiny (empty) MESSAGE frames on one READY session, dispatched
// more slowly than they arrive, while the bystander runs. Valid traffic:
// held and served (every message dispatched). Empty messages weigh nothing
// against ms_dispatch_throttle_bytes; what bounds the backlog is the policy's
// message budget (throttler_messages, Ceph's osd_client_message_cap): the
// connection stops reading (TCP) or returning credits (RDMA) at the cap.
TEST_F(Hostile, FloodOfTinyFramesIsHeldWithinTheMessageBudget) {
  constexpr std::uint64_t kFrames = 20000;
  constexpr std::uint64_t kBatch = 500;
  Watch w(*this);
  auto r = ready_raw();
  ASSERT_TRUE(r);
  const std::uint64_t received0 = server->stats().messages_received;
  slow_sink = true;
  std::atomic<bool> sent_all{false}, bystander_done{false};
  std::atomic<std::uint64_t> frames{0};
  // Floods until it has sent kFrames and the bystander has finished, so the
  // round trips run during the flood.
  std::thread flood([&] {
    std::string batch;
    for (std::uint64_t seq = 1; seq <= kFrames || (!bystander_done.load() && seq <= 5 * kFrames); ++seq) {
      batch += message_frame(seq, 0);
      if (seq % kBatch == 0) {
        if (!r->send(batch)) return;
        batch.clear();
        frames = seq;
      }
    }
    sent_all = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  round_trips(kRoundTrips);
  const auto bystander_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  // Frames the attacker got off (its sends completed) and the server has not
  // dispatched yet: what it made us hold.
  const std::uint64_t sent_then = frames.load();
  const std::uint64_t dispatched_then = server->stats().messages_received - received0;
  const std::uint64_t backlog = sent_then > dispatched_then ? sent_then - dispatched_then : 0;
  bystander_done = true;
  flood.join();
  ASSERT_TRUE(sent_all.load()) << "the server closed a valid flood";
  // Information, not a check: the bystander shares the message budget with
  // the flood and must get its turn (MessengerCore::add_waiter keeps waiters
  // in line); before that it took seconds per round trip here.
  std::printf("hostile: bystander's %d round trips during the flood took %lld ms\n", kRoundTrips,
              static_cast<long long>(bystander_ms));
  EXPECT_TRUE(eventually([&] { return server->stats().messages_received - received0 >= frames.load() + kRoundTrips; }, 60s))
      << server->stats().messages_received - received0 << " of " << frames.load() << " flood messages dispatched";
  slow_sink = false;
  // take() is unconditional for a message in hand; the connection pauses right
  // after the one that filled the budget, so each connection overshoots by one.
  // One more per connection is allowed for a wake-up that races that pause: on
  // RDMA the peak sits exactly at budget + 1 per connection in every run, and a
  // CI run under ASan failed this test once (no output captured) -- the bound
  // is about the flood being held at the budget, not about the last message.
  const std::uint64_t cap_bound = kMessageCap + 2 * (baseline_connections + 1);
  std::printf("hostile-bound tiny-frame flood [%.*s]: undispatched messages peak %llu <= %llu "
              "(policy throttler_messages %llu + 2 per connection)\n",
              static_cast<int>(kStack.size()), kStack.data(), static_cast<unsigned long long>(client_messages->peak()),
              static_cast<unsigned long long>(cap_bound), static_cast<unsigned long long>(kMessageCap));
  EXPECT_LE(client_messages->peak(), cap_bound);
  EXPECT_GE(client_messages->peak(), kMessageCap / 2) << "the dispatcher never fell behind: the bound was not exercised";
  {
    LogCapture logs;
    const std::uint64_t faults = server->stats().faults;
    r.reset();
    EXPECT_TRUE(eventually([&] { return server->stats().faults > faults; }, 20s));
    EXPECT_TRUE(eventually([&] { return count(logs, "faulted") >= 1; }, 10s));
  }
  std::printf("hostile: %llu empty MESSAGE frames flooded, all dispatched\n",
              static_cast<unsigned long long>(frames.load()));
#ifdef SIPHON_TEST_RDMA
  // RDMA: a paused connection returns no credits, so the attacker can be
  // ahead of dispatch by the budget, the SENDs it holds credits for (plus
  // update slots and the one being fed) and one batch in flight.
  const std::uint64_t frame_size = message_frame(1, 0).size();
  const std::uint64_t per_send = (16 * 1024 - rdma::SendHeader::kSize) / frame_size + 1;
  const std::uint64_t backlog_bound = cap_bound + (8 + rdma::kUpdateSlots + 2) * per_send + kBatch;
  std::printf("hostile-bound tiny-frame flood [rdma]: frames sent but not dispatched %llu <= %llu (budget + "
              "(credits + 4) SENDs of %llu frames + one batch)\n",
              static_cast<unsigned long long>(backlog), static_cast<unsigned long long>(backlog_bound),
              static_cast<unsigned long long>(per_send));
  EXPECT_LE(backlog, backlog_bound);
#else
  // TCP: the kernel's socket buffers hold the rest (not our memory; RSS is).
  std::printf("hostile: tiny-frame flood [tcp]: %llu frames sent but not dispatched (socket buffers)\n",
              static_cast<unsigned long long>(backlog));
#endif
  w.check("tiny-frame flood", 1);
  expect_baseline(1);
}

// A flood of KEEPALIVE2 frames from a peer that never reads the acks. The
// server must not queue one KEEPALIVE2_ACK per keepalive without bound.
TEST_F(Hostile, KeepaliveFloodFromAPeerThatNeverReads) {
  constexpr std::uint64_t kKeepalives = 200000;  // ~9 MB of keepalives
  constexpr std::uint64_t kBatch = 2000;
  Watch w(*this);
  auto r = ready_raw();
  ASSERT_TRUE(r);
#ifdef SIPHON_TEST_RDMA
  // Never returning credits is "never reading" on RDMA.
  static_cast<RdmaLink&>(r->link()).hold_credits = true;
#endif
  const std::uint64_t rss0 = rss_bytes();
  std::atomic<bool> sent_all{false}, bystander_done{false};
  std::uint64_t keepalives = 0;
  std::thread flood([&] {
    std::string batch;
    const std::string ka = r->wire(proto::Keepalive2{session::stamp_now()}.frame());
    for (std::uint64_t i = 1; i <= kKeepalives || !bystander_done.load(); ++i) {
      batch += ka;
      if (i % kBatch == 0) {
        if (!r->send(batch)) return;
        batch.clear();
        keepalives = i;
      }
    }
    sent_all = true;
  });
  round_trips(kRoundTrips);
  bystander_done = true;
  flood.join();
  EXPECT_TRUE(sent_all.load()) << "the server stopped reading keepalives";
  round_trips(kRoundTrips);
  w.finish();
  const std::uint64_t growth = w.rss_peak > rss0 ? w.rss_peak - rss0 : 0;
  // Without coalescing every keepalive queued an ack (~0.5 KiB of memory
  // each, 2 KiB+ before the exact-size control payloads): hundreds of MiB.
  // Now at most ms_send_queue_high_water bytes of acks wait in the queue.
  const std::size_t ack_wire = r->wire(proto::Keepalive2Ack{}.frame()).size();
  std::printf("hostile-bound keepalive flood [%.*s]: %llu keepalives (%llu bytes) never acked by reading: acks queued "
              "<= ms_send_queue_high_water %zu B = %zu acks; RSS growth %llu B\n",
              static_cast<int>(kStack.size()), kStack.data(), static_cast<unsigned long long>(keepalives),
              static_cast<unsigned long long>(keepalives * r->wire(proto::Keepalive2{}.frame()).size()), kHighWater,
              kHighWater / ack_wire + 1, static_cast<unsigned long long>(growth));
  {
    LogCapture logs;
    const std::uint64_t faults = server->stats().faults;
    r.reset();
    EXPECT_TRUE(eventually([&] { return server->stats().faults > faults; }, 20s));
    EXPECT_TRUE(eventually([&] { return count(logs, "faulted") >= 1; }, 10s));
  }
  w.check("keepalive flood, acks never read", 1);
  expect_baseline(1);
}

// SESSION_RECONNECT for sessions that never existed (random cookies, fresh
// addresses): each gets SESSION_RESET, logged, and nothing is created.
TEST_F(Hostile, ReconnectForSessionsThatDoNotExist) {
  LogCapture logs;
  log::set_level(log::Subsys::session, 5);
  constexpr int kN = 32;
  Watch w(*this);
  std::mt19937_64 rng(42);
  int resets = 0;
  std::thread storm([&] {
    for (int i = 0; i < kN; ++i) {
      auto r = raw();
      if (!r || !r->exchange_banners()) return;
      session::SessionIds ids;
      ids.client_cookie = rng() | 1;
      ids.server_cookie = rng() | 1;  // forged: "I have a session with you"
      ids.connect_seq = rng() % 100 + 1;
      ids.global_seq = rng() % 1000 + 1;
      session::ClientHandshake hs(raw_identity(0x77000 + static_cast<std::uint32_t>(i)), lossless_client_view(),
                                  target(), proto::kEntityTypeOsd, ids, raw_services());
      resets += r->reply_to_ident(hs) == proto::Tag::session_reset ? 1 : 0;
    }
  });
  round_trips(kRoundTrips);
  storm.join();
  log::set_level(log::Subsys::session, log::kDefaultLevel);
  EXPECT_EQ(resets, kN) << "a SESSION_RECONNECT for nothing was not answered with SESSION_RESET";
  EXPECT_GE(count(logs, "no session: reset"), static_cast<std::size_t>(kN));
  round_trips(kRoundTrips);
  w.check("SESSION_RECONNECT for no session x32", kN);
  expect_baseline();
  EXPECT_EQ(server->stats().reconnects, 0u);
}

// A reconnect storm with forged cookies against a session that exists: the
// attacker establishes one session, drops the socket, then sends
// SESSION_RECONNECTs for it with wrong client cookies, or the right client
// cookie with a forged server cookie and stale sequence numbers. None may
// resume the session: each is answered with SESSION_RESET / SESSION_RETRY /
// SESSION_RETRY_GLOBAL, logged, and its connection goes away.
TEST_F(Hostile, ReconnectStormWithForgedCookies) {
  constexpr int kN = 32;
  const std::uint32_t nonce = ++next_nonce;
  session::SessionIds real;
  {
    auto r = raw();
    ASSERT_TRUE(r);
    ASSERT_TRUE(r->exchange_banners());
    session::ClientHandshake hs(raw_identity(nonce), lossless_client_view(), target(), proto::kEntityTypeOsd, {},
                                raw_services());
    ASSERT_EQ(r->handshake(hs).outcome, session::Step::Outcome::ready);
    real = hs.ids();
  }
  // The dropped socket leaves the session in standby (lossless server policy).
  ASSERT_TRUE(eventually([&] { return server->stats().faults >= 1; }, 20s));
  LogCapture logs;
  log::set_level(log::Subsys::session, 5);
  const std::uint64_t reconnects0 = server->stats().reconnects;
  const std::uint64_t connections0 = server->stats().connections;
  Watch w(*this);
  std::mt19937_64 rng(7);
  std::map<proto::Tag, int> answers;
  std::thread storm([&] {
    for (int i = 0; i < kN; ++i) {
      auto r = raw();
      if (!r || !r->exchange_banners()) return;
      session::SessionIds ids = real;
      ids.connect_seq = real.connect_seq + 1;
      if (i % 2 == 0) {
        ids.client_cookie = rng() | 1;  // not the session's cookie
      } else {
        ids.server_cookie = rng() | 1;  // forged server cookie ...
        ids.global_seq = 0;             // ... and stale sequence numbers
        ids.connect_seq = 0;
      }
      session::ClientHandshake hs(raw_identity(nonce), lossless_client_view(), target(), proto::kEntityTypeOsd,
                                  ids, raw_services());
      const auto tag = r->reply_to_ident(hs);
      ++answers[tag.value_or(proto::Tag::wait)];
      if (!tag) answers[proto::Tag::wait] += 1000;  // no answer at all
    }
  });
  round_trips(kRoundTrips);
  storm.join();
  log::set_level(log::Subsys::session, log::kDefaultLevel);
  int total = 0;
  for (const auto& [tag, n] : answers) {
    std::printf("hostile: forged SESSION_RECONNECT answered with %s x%d\n", std::string(proto::to_string(tag)).c_str(), n);
    EXPECT_TRUE(tag == proto::Tag::session_reset || tag == proto::Tag::session_retry ||
                tag == proto::Tag::session_retry_global)
        << "forged reconnect answered with " << proto::to_string(tag);
    total += n;
  }
  EXPECT_EQ(total, kN);
  EXPECT_EQ(server->stats().reconnects, reconnects0) << "a forged SESSION_RECONNECT resumed a session";
  EXPECT_GE(count(logs, "SESSION_RECONNECT from"), static_cast<std::size_t>(kN));
  round_trips(kRoundTrips);
  w.check("forged-cookie reconnect storm x32", kN + 1);
  EXPECT_TRUE(eventually([&] { return server->stats().connections <= connections0; }, 20s))
      << server->stats().connections << " connections, " << connections0 << " before the storm";
}

#ifdef SIPHON_TEST_RDMA
// RDMA only (a TCP peer has no credits): a READY peer asks for 200 echoes of
// 8 KiB and never returns a credit. The server can send it only the credits
// it was granted; the rest waits in that connection's queue. It is held (a
// peer may be slow), everyone else keeps going, and no pool grows.
TEST_F(Hostile, PeerThatNeverReturnsCredits) {
  constexpr int kPings = 200;
  Watch w(*this);
  auto& rs = w.rdma_stack();
  auto r = ready_raw();
  ASSERT_TRUE(r);
  auto& link = static_cast<RdmaLink&>(r->link());
  link.hold_credits = true;
  const std::uint64_t stalls0 = rs.counters().credit_stalls.load();
  std::string batch;
  for (int i = 1; i <= kPings; ++i) batch += message_frame(static_cast<std::uint64_t>(i), 8192, kPing);
  ASSERT_TRUE(r->send(batch));
  round_trips(kRoundTrips);
  EXPECT_TRUE(eventually([&] { return rs.counters().credit_stalls.load() > stalls0; }, 20s))
      << "the server never ran out of credits for the hostile peer";
  EXPECT_EQ(server->stats().connections, baseline_connections + 1) << "the held peer was closed";
  {
    LogCapture logs;
    const std::uint64_t faults = server->stats().faults;
    r.reset();
    EXPECT_TRUE(eventually([&] { return server->stats().faults > faults; }, 20s));
    EXPECT_TRUE(eventually([&] { return count(logs, "faulted") >= 1; }, 10s));
  }
  round_trips(kRoundTrips);
  w.check("credits never returned, 200 x 8 KiB echoes queued", 1);
  expect_baseline(1);
}

// RDMA only: a READY peer asks the server to pull stream bytes by RDMA READ
// from memory it never registered -- a bogus rkey, then (on a second
// connection) its real rkey with an address outside its region. The READ
// fails with a remote access error and that connection is closed.
TEST_F(Hostile, PeerAdvertisesMemoryItNeverRegistered) {
  LogCapture logs;
  Watch w(*this);
  for (int lie = 0; lie < 2; ++lie) {
    auto r = ready_raw();
    ASSERT_TRUE(r);
    auto& link = static_cast<RdmaLink&>(r->link());
    rdma::ReadDescriptor d;
    d.length = 4096;
    d.addr = lie == 0 ? link.region_addr(0) : link.region_addr(0) + (1u << 20);
    d.rkey = lie == 0 ? link.rkey() + 0x100 : link.rkey();
    std::uint8_t bytes[rdma::ReadDescriptor::kSize + rdma::ReadDescriptor::kCrcSize];
    d.encode(bytes);
    rdma::ReadDescriptor::seal(bytes, 1);  // a well-formed lie: its CRC is right
    // A flushed completion still counts as sent: our QP errs when the
    // server's READ is refused by our responder.
    (void)link.send_raw(rdma::SendType::read_request, d.length, 1, bytes);
    round_trips(kRoundTrips / 2);
    EXPECT_TRUE(link.closed_by_peer()) << "lie " << lie << " went unnoticed";
  }
  EXPECT_TRUE(eventually([&] { return count(logs, "remote access error") >= 2; }, 10s))
      << count(logs, "remote access error") << " remote access errors logged, want 2";
  w.check("advertised rkey/address outside the registration x2", 2);
  expect_baseline(2);  // their sessions were READY: the faults leave them in standby
}
#endif

}  // namespace
}  // namespace siphon::test

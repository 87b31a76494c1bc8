// siphon-bench rados's runner over an in-memory object store whose
// completions arrive on another thread, as a RADOS client's do.
#include "tools/bench/rados_bench.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

namespace siphon::bench::rados {
namespace {

// Objects in a map; every operation completes on a worker thread.
class FakeStore final : public ObjectIO {
 public:
  FakeStore() : worker_([this] { loop(); }) {}
  ~FakeStore() override {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  void write(const std::string& oid, std::uint64_t off, const BufferList& data, bool alloc_hint,
             std::uint64_t object_size, Done done) override {
    if (std::this_thread::get_id() != worker_.get_id()) writes_off_worker_.fetch_add(1);
    // A reference to the runner's buffer, read on the worker, later -- with
    // hold_ after the op is reported done, as a client's queue could.
    post([this, oid, off, data = BufferList(data), alloc_hint, object_size, done = std::move(done)]() mutable {
      if (fail_writes_after_ >= 0 && writes_ >= fail_writes_after_) return done(-ENOSPC);
      ++writes_;
      pieces_.push_back(data.ptrs().size());
      if (data.ptrs().size() > 1) bodies_.insert(data.ptrs()[1].segment());
      if (alloc_hint) hinted_sizes_[oid] = object_size;
      if (hold_ == 0) {
        apply(oid, off, data);
        data = BufferList();  // let go before reporting, as the OSD client does
        return done(0);
      }
      done(0);
      held_.push_back({oid, off, data});
      while (held_.size() > hold_) {
        apply(held_.front().oid, held_.front().off, held_.front().data);
        held_.pop_front();
      }
    });
  }
  // Applies the writes still held (between runs).
  void flush_held() {
    for (const Held& h : held_) apply(h.oid, h.off, h.data);
    held_.clear();
  }
  void write_full(const std::string& oid, std::string_view data, Done done) {
    objects_[oid] = std::string(data);
    done(0);
  }
  void write_full(const std::string& oid, std::string data, Done done) override {
    post([this, oid, data = std::move(data), done = std::move(done)] { write_full(oid, std::string_view(data), done); });
  }
  void read(const std::string& oid, std::uint64_t off, std::uint64_t len, ReadDone done) override {
    post([this, oid, off, len, done = std::move(done)] {
      auto it = objects_.find(oid);
      if (it == objects_.end()) return done(-ENOENT, {});
      ++reads_;
      // In pieces, as a reply's segments arrive: 10 bytes (the op's stamp
      // spans two pieces), then up to 1000 each.
      const std::string_view all =
          std::string_view(it->second).substr(std::min<std::size_t>(off, it->second.size()), len);
      std::vector<std::string_view> pieces;
      for (std::size_t at = 0; at < all.size(); at += at == 0 ? 10 : 1000)
        pieces.push_back(all.substr(at, at == 0 ? 10 : 1000));
      done(0, pieces);
    });
  }
  void remove(const std::string& oid, Done done) override {
    post([this, oid, done = std::move(done)] { done(objects_.erase(oid) ? 0 : -ENOENT); });
  }

  // Only between runs (no operation in flight).
  std::map<std::string, std::string> objects_;
  std::map<std::string, std::uint64_t> hinted_sizes_;
  int fail_writes_after_ = -1;
  int writes_ = 0, reads_ = 0;
  std::size_t hold_ = 0;  // writes whose buffer is read only after this many more
  bool inline_ = false;   // every operation completes inside the call that started it
  std::atomic<int> writes_off_worker_{0};  // write() calls from a thread other than the store's
  std::vector<std::size_t> pieces_;          // per write: how many pieces its data came in
  std::set<const void*> bodies_;             // the segments of the second pieces

 private:
  struct Held {
    std::string oid;
    std::uint64_t off;
    BufferList data;
  };
  void apply(const std::string& oid, std::uint64_t off, const BufferList& data) {
    auto& o = objects_[oid];
    if (o.size() < off + data.length()) o.resize(off + data.length(), '\0');
    o.replace(off, data.length(), data.to_string());
  }
  std::deque<Held> held_;
  void post(std::function<void()> fn) {
    if (inline_) return fn();
    {
      std::lock_guard lk(mu_);
      q_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }
  void loop() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;
      auto fn = std::move(q_.front());
      q_.pop_front();
      lk.unlock();
      fn();
      lk.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  bool stop_ = false;
  std::thread worker_;
};

Options opts(Mode m) {
  Options o;
  o.mode = m;
  o.seconds = 0.3;
  o.concurrency = 4;
  o.op_size = 4096;
  o.hostname = "vm";
  o.pid = 3583;
  return o;
}

TEST(RadosBenchFormat, MetadataBytesAsRadosBenchWritesThem) {
  // rados-client.md §5.2: `rados get benchmark_last_metadata` after a run of
  // 3981 writes of 4096 bytes by pid 3583.
  const std::string want("\x00\x10\x00\x00\x00\x00\x00\x00\x8d\x0f\x00\x00\xff\x0d\x00\x00"
                         "\x00\x10\x00\x00\x00\x00\x00\x00",
                         24);
  EXPECT_EQ(encode_metadata({4096, 3981, 3583, 4096}), want);
  const auto m = decode_metadata(want);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->ops, 3981);
  EXPECT_EQ(m->pid, 3583);
  EXPECT_FALSE(decode_metadata(want.substr(0, 23)));
}

TEST(RadosBenchFormat, NamesAndContentsAsRadosBench) {
  EXPECT_EQ(object_prefix("vm", 3583), "benchmark_data_vm_3583");
  EXPECT_EQ(object_name("benchmark_data_vm_21000", 0), "benchmark_data_vm_21000_object0");
  EXPECT_EQ(object_prefix(std::string(40, 'h'), 1), "benchmark_data_" + std::string(29, 'h') + "_1");
  const std::string d = op_data(7, 64);
  EXPECT_EQ(d.substr(0, 31), std::string("I'm the                7th op!\0", 31));
  EXPECT_EQ(d.substr(31), std::string(33, 'z'));
  EXPECT_EQ(op_data(7, 10), std::string("I'm the  \0", 10)) << "cut as snprintf cuts";
}

TEST(RadosBenchRun, WriteThenSeqThenRandThenCleanup) {
  FakeStore s;
  std::ostringstream w;
  const Result wr = run(s, [] {
    auto o = opts(Mode::write);
    o.cleanup = false;
    return o;
  }(), w);
  ASSERT_EQ(wr.error, 0) << wr.error_message;
  ASSERT_GT(wr.ops, 0u);
  EXPECT_EQ(w.str().rfind("hints = 1\nMaintaining 4 concurrent writes of 4096 bytes to objects of size 4096 for up to "
                          "0.3 seconds or 0 objects\nObject prefix: benchmark_data_vm_3583\n"
                          "  sec Cur ops   started  finished  avg MB/s  cur MB/s last lat(s)  avg lat(s)\n"
                          "    0       0         0         0         0         0           -           0\n",
                          0),
            0u)
      << w.str();
  EXPECT_NE(w.str().find("Total writes made:      " + std::to_string(wr.ops) + "\n"), std::string::npos);
  EXPECT_EQ(wr.latency_ns.count(), wr.ops);
  // One object per op, the metadata, hints with the object size.
  EXPECT_EQ(s.objects_.size(), wr.ops + 1);
  EXPECT_EQ(s.objects_.at("benchmark_data_vm_3583_object0"), op_data(0, 4096));
  EXPECT_EQ(s.objects_.at("benchmark_data_vm_3583_object" + std::to_string(wr.ops - 1)), op_data(wr.ops - 1, 4096));
  EXPECT_EQ(s.hinted_sizes_.at("benchmark_data_vm_3583_object0"), 4096u);
  const auto meta = decode_metadata(s.objects_.at("benchmark_last_metadata"));
  ASSERT_TRUE(meta);
  EXPECT_EQ(static_cast<std::uint64_t>(meta->ops), wr.ops);

  // seq from another process (another pid): it reads the writer's objects.
  std::ostringstream r;
  auto so = opts(Mode::seq);
  so.pid = 1;
  so.seconds = 30;
  const Result sr = run(s, so, r);
  ASSERT_EQ(sr.error, 0) << sr.error_message;
  EXPECT_EQ(sr.ops, wr.ops) << "seq stops after every object was read";
  EXPECT_EQ(sr.verify_failures, 0u);
  EXPECT_NE(r.str().find("Total reads made:     " + std::to_string(wr.ops) + "\n"), std::string::npos) << r.str();

  auto ro = opts(Mode::rand);
  ro.seconds = 0.2;
  const Result rr = run(s, ro, r);
  ASSERT_EQ(rr.error, 0) << rr.error_message;
  EXPECT_GT(rr.ops, 0u);
  EXPECT_EQ(rr.verify_failures, 0u);

  std::ostringstream c;
  const Result cr = run(s, opts(Mode::cleanup), c);
  ASSERT_EQ(cr.error, 0) << cr.error_message;
  EXPECT_EQ(cr.removed, wr.ops);
  EXPECT_TRUE(s.objects_.empty());
  EXPECT_EQ(c.str().rfind("Removed " + std::to_string(wr.ops) + " objects\n", 0), 0u) << c.str();
}

// After the first ops, which the driving thread issues, each completion
// issues the next op from the thread it completed on (the client's), so the
// driving thread does not wake once per op. The driving thread issues at
// least the first op and at most -t: a completion that comes while it is
// still filling the slots issues the next op itself.
TEST(RadosBenchRun, CompletionsIssueTheNextOps) {
  FakeStore s;
  std::ostringstream w;
  auto o = opts(Mode::write);
  o.cleanup = false;
  const Result wr = run(s, o, w);
  ASSERT_EQ(wr.error, 0) << wr.error_message;
  EXPECT_GT(wr.ops, 10u * o.concurrency);
  EXPECT_GE(s.writes_off_worker_.load(), 1) << wr.ops << " ops";
  EXPECT_LE(s.writes_off_worker_.load(), static_cast<int>(o.concurrency)) << wr.ops << " ops";
  EXPECT_EQ(s.objects_.size(), wr.ops + 1);
  EXPECT_EQ(s.objects_.at("benchmark_data_vm_3583_object" + std::to_string(wr.ops - 1)), op_data(wr.ops - 1, 4096));
}

// A client that finishes every op inside the call that started it: the
// next op is issued by the loop that issued this one, not from inside the
// completion (50,000 nested calls would overflow the stack).
TEST(RadosBenchRun, OpsCompletedAtOnceDoNotRecurse) {
  FakeStore s;
  s.inline_ = true;
  std::ostringstream w;
  auto o = opts(Mode::write);
  o.cleanup = false;
  o.op_size = 64;
  o.seconds = 60;
  o.max_objects = 50000;
  const Result wr = run(s, o, w);
  ASSERT_EQ(wr.error, 0) << wr.error_message;
  EXPECT_EQ(wr.ops, 50000u);
  EXPECT_EQ(s.objects_.size(), 50001u);
  std::ostringstream r;
  auto so = opts(Mode::seq);
  so.seconds = 60;
  const Result sr = run(s, so, r);
  ASSERT_EQ(sr.error, 0) << sr.error_message;
  EXPECT_EQ(sr.ops, 50000u);
  EXPECT_EQ(sr.verify_failures, 0u);
}

TEST(RadosBenchRun, ObjectsLargerThanOpsTakeSeveralWrites) {
  FakeStore s;
  auto o = opts(Mode::write);
  o.object_size = 4 * 4096;
  o.max_objects = 3;
  o.seconds = 30;
  o.cleanup = false;
  std::ostringstream out;
  const Result r = run(s, o, out);
  ASSERT_EQ(r.error, 0) << r.error_message;
  EXPECT_EQ(r.ops, 12u) << "3 objects x 4 writes";
  ASSERT_EQ(s.objects_.size(), 4u);
  const std::string& obj = s.objects_.at("benchmark_data_vm_3583_object2");
  ASSERT_EQ(obj.size(), 4u * 4096);
  EXPECT_EQ(obj.substr(3 * 4096), op_data(11, 4096));
  std::ostringstream rd;
  auto so = opts(Mode::seq);
  so.seconds = 30;
  const Result sr = run(s, so, rd);
  EXPECT_EQ(sr.ops, 12u);
  EXPECT_EQ(sr.verify_failures, 0u);
  EXPECT_EQ(run(s, opts(Mode::cleanup), rd).removed, 3u);
}

// A client that still holds a write's buffer after reporting it done (a
// resend queued, a message not yet freed): the runner must not stamp the
// slot's next op into those bytes, and takes a fresh buffer instead.
TEST(RadosBenchRun, BuffersHeldByTheClientAreNeverRewritten) {
  FakeStore s;
  s.hold_ = 6;  // more than the 4 slots: every slot's buffer is still held when it comes round
  auto o = opts(Mode::write);
  o.cleanup = false;
  o.max_objects = 40;
  o.seconds = 30;
  std::ostringstream out;
  const Result r = run(s, o, out);
  ASSERT_EQ(r.error, 0) << r.error_message;
  ASSERT_EQ(r.ops, 40u);
  s.flush_held();
  for (std::uint64_t i = 0; i < r.ops; ++i)
    ASSERT_EQ(s.objects_.at("benchmark_data_vm_3583_object" + std::to_string(i)), op_data(i, 4096)) << "op " << i;
  EXPECT_GT(r.fresh_buffers, 0u);

  // A client that lets go at once: the slots' buffers are reused, not copied.
  FakeStore quick;
  const Result q = run(quick, o, out);
  ASSERT_EQ(q.error, 0);
  EXPECT_LT(q.fresh_buffers, q.ops / 2) << "reuse is the rule when nobody holds the buffer";
}

// Above 4 KiB a slot owns only its head (the stamp's page): the rest of
// every payload is one body, shared by all slots and never written, so a
// large -b costs no per-slot copy. The objects are still exactly rados
// bench's, with heads held by the client (fresh heads) or not.
TEST(RadosBenchRun, LargeWritesShareOneBodyAndKeepTheirBytes) {
  for (const std::size_t hold : {std::size_t{0}, std::size_t{6}}) {
    FakeStore s;
    s.hold_ = hold;
    auto o = opts(Mode::write);
    o.cleanup = false;
    o.op_size = 256 * 1024;
    o.max_objects = 24;
    o.seconds = 30;
    std::ostringstream out;
    const Result r = run(s, o, out);
    ASSERT_EQ(r.error, 0) << r.error_message;
    ASSERT_EQ(r.ops, 24u);
    s.flush_held();
    for (std::uint64_t i = 0; i < r.ops; ++i)
      ASSERT_EQ(s.objects_.at("benchmark_data_vm_3583_object" + std::to_string(i)), op_data(i, 256 * 1024))
          << "op " << i << ", hold " << hold;
    ASSERT_EQ(s.pieces_.size(), 24u);
    for (const std::size_t n : s.pieces_) EXPECT_EQ(n, 2u);
    EXPECT_EQ(s.bodies_.size(), 1u) << "one body for every slot and op";
    if (hold != 0) {
      EXPECT_GT(r.fresh_buffers, 0u);
    }
  }
  // At 4 KiB and below a payload is the head alone.
  FakeStore small;
  auto o = opts(Mode::write);
  o.cleanup = false;
  o.max_objects = 8;
  o.seconds = 30;
  std::ostringstream out;
  ASSERT_EQ(run(small, o, out).error, 0);
  for (const std::size_t n : small.pieces_) EXPECT_EQ(n, 1u);
}

TEST(RadosBenchRun, CorruptDataIsReported) {
  FakeStore s;
  auto o = opts(Mode::write);
  o.cleanup = false;
  std::ostringstream out;
  ASSERT_EQ(run(s, o, out).error, 0);
  s.objects_.at("benchmark_data_vm_3583_object0")[100] = 'y';
  // In the stamp, in the second piece the fake store hands out.
  s.objects_.at("benchmark_data_vm_3583_object1")[12] = '7';
  auto so = opts(Mode::seq);
  so.seconds = 30;
  const Result r = run(s, so, out);
  EXPECT_EQ(r.verify_failures, 2u);
  EXPECT_NE(out.str().find("benchmark_data_vm_3583_object0 is not correct!\n"), std::string::npos);
  EXPECT_NE(out.str().find("benchmark_data_vm_3583_object1 is not correct!\n"), std::string::npos);
}

TEST(RadosBenchRun, ErrorsStopTheRunAndNameTheCause) {
  FakeStore s;
  std::ostringstream out;
  const Result none = run(s, opts(Mode::seq), out);
  EXPECT_EQ(none.error, -ENOENT);
  EXPECT_EQ(none.error_message, "Must write data before running a read benchmark!");

  s.fail_writes_after_ = 5;
  auto o = opts(Mode::write);
  o.seconds = 30;
  const Result r = run(s, o, out);
  EXPECT_EQ(r.error, -ENOSPC);
  EXPECT_EQ(r.ops, 5u) << "no failed write counts as made";
  EXPECT_NE(r.error_message.find("writing benchmark_data_vm_3583_object"), std::string::npos) << r.error_message;
  EXPECT_EQ(s.objects_.count("benchmark_last_metadata"), 0u) << "no metadata for a failed run";

  s.objects_["benchmark_last_metadata"] = "short";
  const Result bad = run(s, opts(Mode::seq), out);
  EXPECT_EQ(bad.error, -EINVAL);
}

// --format json: "hints = 1", then one document with rados bench's keys
// (string values) and Siphon's after them; the lines outside it go to the
// error stream, so the document always parses -- after an error too.
TEST(RadosBenchOutput, JsonIsRadosBenchsDocument) {
  FakeStore s;
  auto o = opts(Mode::write);
  o.json = true;
  o.seconds = 1.2;  // a status line after second 1
  std::ostringstream out, err;
  const Result wr = run(s, o, out, err);
  ASSERT_EQ(wr.error, 0) << wr.error_message;
  const std::string text = out.str();
  ASSERT_EQ(text.rfind("hints = 1\n{", 0), 0u) << text;
  const auto j = nlohmann::json::parse(text.substr(10));
  for (const char* k : {"concurrent_ios", "object_size", "op_size", "seconds_to_run", "max_objects", "object_prefix",
                        "datas", "total_time_run", "total_writes_made", "write_size", "bandwidth", "stddev_bandwidth",
                        "max_bandwidth", "min_bandwidth", "average_iops", "stddev_iops", "max_iops", "min_iops",
                        "average_latency", "stddev_latency", "max_latency", "min_latency", "latency_p50",
                        "latency_p99.99", "cpu_us_per_op"})
    EXPECT_TRUE(j.contains(k)) << k << " in " << text;
  EXPECT_EQ(j["concurrent_ios"], "4");
  EXPECT_EQ(j["object_prefix"], "benchmark_data_vm_3583");
  EXPECT_EQ(j["total_writes_made"], std::to_string(wr.ops));
  ASSERT_GE(j["datas"].size(), 2u);
  EXPECT_EQ(j["datas"][0]["sec"], "0");
  EXPECT_EQ(j["datas"][1]["sec"], "1");
  EXPECT_EQ(j["datas"][0]["last_lat"], "0.000000") << "rados bench's 0 where the table has '-'";
  ASSERT_EQ(wr.ops_per_second.size(), j["datas"].size() - 1) << "one sample per status line after second 0";
  EXPECT_EQ(std::to_string(static_cast<std::uint64_t>(wr.ops_per_second[0])), j["datas"][1]["finished"]);
  EXPECT_FALSE(j.contains("error"));
  EXPECT_EQ(text.find("Removed"), std::string::npos);
  EXPECT_NE(err.str().find("Removed " + std::to_string(wr.ops) + " objects\n"), std::string::npos) << err.str();

  // seq over a damaged object: the line goes to the error stream.
  o.cleanup = false;
  o.seconds = 0.3;
  ASSERT_EQ(run(s, o, out, err).error, 0);
  s.objects_.at("benchmark_data_vm_3583_object0")[100] = 'y';
  auto so = opts(Mode::seq);
  so.json = true;
  so.seconds = 30;
  std::ostringstream sout, serr;
  const Result sr = run(s, so, sout, serr);
  const auto sj = nlohmann::json::parse(sout.str().substr(10));
  EXPECT_EQ(sj["total_reads_made"], std::to_string(sr.ops));
  EXPECT_EQ(sj["read_size"], "4096");
  EXPECT_EQ(sj["verify_failures"], "1");
  EXPECT_FALSE(sj.contains("stddev_latency")) << "rados bench's read keys";
  EXPECT_EQ(serr.str(), "benchmark_data_vm_3583_object0 is not correct!\n");

  // A failed run still closes the document, naming the error.
  s.fail_writes_after_ = s.writes_ + 3;
  auto fo = opts(Mode::write);
  fo.json = true;
  fo.seconds = 30;
  std::ostringstream fout, ferr;
  const Result fr = run(s, fo, fout, ferr);
  ASSERT_EQ(fr.error, -ENOSPC);
  const auto fj = nlohmann::json::parse(fout.str().substr(10));
  EXPECT_EQ(fj["error"], std::to_string(-ENOSPC));
  EXPECT_NE(fj["error_message"].get<std::string>().find("No space left on device"), std::string::npos);
}

// --show-time: rados bench's local time before each line it writes (the
// summary is one block, stamped once); "hints = 1" is not stamped.
TEST(RadosBenchOutput, ShowTimeStampsEachLine) {
  FakeStore s;
  auto o = opts(Mode::write);
  o.show_time = true;
  std::ostringstream out;
  ASSERT_EQ(run(s, o, out).error, 0);
  const std::regex stamp(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d{4} )");
  std::istringstream lines(out.str());
  std::string line;
  std::vector<std::string> stamped, plain;
  while (std::getline(lines, line)) (std::regex_search(line, stamp) ? stamped : plain).push_back(line);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain.front(), "hints = 1");
  EXPECT_GE(stamped.size(), 5u) << out.str();
  EXPECT_NE(stamped[0].find(" Maintaining 4 concurrent writes"), std::string::npos) << stamped[0];
  EXPECT_NE(stamped[1].find(" Object prefix: benchmark_data_vm_3583"), std::string::npos);
  EXPECT_NE(stamped[2].find("   sec Cur ops"), std::string::npos);
  EXPECT_TRUE(std::any_of(stamped.begin(), stamped.end(),
                          [](const std::string& l) { return l.find(" Total time run:") != std::string::npos; }))
      << out.str();
  for (const std::string& p : plain) {
    if (p.rfind("Total writes made:", 0) == 0) return;  // the summary's second line: not stamped
  }
  ADD_FAILURE() << "the summary's lines after its first are stamped: " << out.str();
}

}  // namespace
}  // namespace siphon::bench::rados

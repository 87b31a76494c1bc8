// siphon-objd's parts without a network: the message encodings (round trip,
// truncation and garbage are errors, never crashes), object names, both
// stores (the directory store on io_uring and, with io_uring refused by a
// seccomp filter, on plain system calls), and the request handler's error
// replies.
#include <gtest/gtest.h>
#include <liburing.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "msgr/base/error.h"
#include "msgr/proto/encoding.h"
#include "refuse_syscall.h"
#include "tools/objd/proto.h"
#include "tools/objd/server.h"
#include "tools/objd/store.h"

namespace siphon::objd {
namespace {

namespace fs = std::filesystem;

BufferList bytes(std::string_view s) { return BufferList::copy_of(s); }

TEST(ObjdProto, OpRoundTrip) {
  MObjdOp a(OpCode::put, "obj-1");
  a.crc = 0xdeadbeef;
  a.encode_payload(0);
  MObjdOp b;
  b.front() = a.front();
  b.decode_payload();
  EXPECT_EQ(b.op, OpCode::put);
  EXPECT_EQ(b.name, "obj-1");
  EXPECT_EQ(b.crc, 0xdeadbeefu);
  // Ceph's layout: struct_v 1, struct_compat 1, struct_len, then the fields.
  const std::string f = a.front().to_string();
  ASSERT_GE(f.size(), 6u);
  EXPECT_EQ(f[0], 1);
  EXPECT_EQ(f[1], 1);
  EXPECT_EQ(static_cast<std::size_t>(static_cast<unsigned char>(f[2])), f.size() - 6);
}

TEST(ObjdProto, ReplyRoundTrip) {
  MObjdReply a;
  a.op = OpCode::get;
  a.name = "x";
  a.result = -ENOENT;
  a.size = 1ull << 40;
  a.crc = 7;
  a.error = "get x: no such object";
  a.encode_payload(0);
  MObjdReply b;
  b.front() = a.front();
  b.decode_payload();
  EXPECT_EQ(b.op, OpCode::get);
  EXPECT_EQ(b.name, "x");
  EXPECT_EQ(b.result, -ENOENT);
  EXPECT_EQ(b.size, 1ull << 40);
  EXPECT_EQ(b.crc, 7u);
  EXPECT_EQ(b.error, "get x: no such object");
}

TEST(ObjdProto, ANewerEncodingWithExtraFieldsStillDecodes) {
  // struct_v 2 (compat 1) with a trailing field an old decoder does not know.
  proto::Encoder e;
  e.versioned(2, 1, [](proto::Encoder& x) {
    x.u8(3);
    x.string("obj");
    x.u32(0);
    x.u64(12345);  // the future field
  });
  MObjdOp m;
  e.append_to(m.front());
  m.decode_payload();
  EXPECT_EQ(m.op, OpCode::stat);
  EXPECT_EQ(m.name, "obj");
}

TEST(ObjdProto, MalformedPayloadsThrowNamingTheField) {
  MObjdOp good(OpCode::put, "some-object");
  good.encode_payload(0);
  const std::string f = good.front().to_string();
  // Every truncation is an error (an exception the messenger turns into a
  // connection fault), never a crash or a partial object.
  for (std::size_t n = 0; n < f.size(); ++n) {
    MObjdOp m;
    m.front() = bytes(f.substr(0, n));
    EXPECT_THROW(m.decode_payload(), std::runtime_error) << "truncated to " << n;
  }
  // An incompatible encoding (struct_compat 9) is refused.
  std::string incompatible = f;
  incompatible[1] = 9;
  MObjdOp m;
  m.front() = bytes(incompatible);
  try {
    m.decode_payload();
    FAIL() << "struct_compat 9 accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("objd_op"), std::string::npos) << e.what();
  }
  // A name length far beyond the payload.
  std::string huge = f;
  huge[7] = static_cast<char>(0xff);
  huge[8] = static_cast<char>(0xff);
  MObjdOp h;
  h.front() = bytes(huge);
  EXPECT_THROW(h.decode_payload(), std::runtime_error);
}

TEST(ObjdNames, Rules) {
  EXPECT_EQ(check_object_name("rbd_data.1234.0000000000000001"), "");
  EXPECT_EQ(check_object_name("a b%c.d"), "");
  EXPECT_NE(check_object_name(""), "");
  EXPECT_NE(check_object_name("a/b"), "");
  EXPECT_NE(check_object_name("."), "");
  EXPECT_NE(check_object_name(".."), "");
  EXPECT_NE(check_object_name(std::string("a\0b", 3)), "");
  EXPECT_NE(check_object_name("tab\there"), "");
  EXPECT_NE(check_object_name("\xc3\xa9"), "") << "printable ASCII only";
  EXPECT_EQ(check_object_name(std::string(kMaxNameLength, 'x')), "");
  EXPECT_NE(check_object_name(std::string(kMaxNameLength + 1, 'x')).find("limit"), std::string::npos);
  EXPECT_EQ(object_file_name(".hidden"), "%2ehidden");
  EXPECT_EQ(object_file_name("50%"), "50%25");
  EXPECT_EQ(object_file_name("a.b"), "a.b");
}

// The same behaviour from both stores.
void exercise(ObjectStore& s) {
  std::string why;
  BufferList out;
  std::uint64_t size = 0;
  EXPECT_EQ(s.get("missing", 1 << 20, out, why), -ENOENT);
  EXPECT_NE(why.find("missing"), std::string::npos) << why;
  EXPECT_EQ(s.stat("missing", size, why), -ENOENT);
  EXPECT_EQ(s.remove("missing", why), -ENOENT);

  ASSERT_EQ(s.put("obj", bytes("hello"), why), 0) << why;
  ASSERT_EQ(s.get("obj", 1 << 20, out, why), 0) << why;
  EXPECT_EQ(out.to_string(), "hello");
  ASSERT_EQ(s.stat("obj", size, why), 0) << why;
  EXPECT_EQ(size, 5u);
  // Replace, with a value made of several segments.
  BufferList multi;
  multi.append(std::string(3000, 'a'));
  multi.append(BufferPtr("bcd", 3));
  multi.append(std::string(70000, 'e'));
  ASSERT_EQ(s.put("obj", multi, why), 0) << why;
  out.clear();
  ASSERT_EQ(s.get("obj", 1 << 20, out, why), 0) << why;
  EXPECT_EQ(out.to_string(), multi.to_string());
  EXPECT_EQ(s.get("obj", 100, out, why), -EFBIG);
  EXPECT_NE(why.find("73003"), std::string::npos) << why;
  // Empty objects, and names that need escaping in a directory.
  for (const std::string name : {".dot", "50%", "%2edot", "sp ace"}) {
    ASSERT_EQ(s.put(name, bytes(name + "!"), why), 0) << name << ": " << why;
  }
  for (const std::string name : {".dot", "50%", "%2edot", "sp ace"}) {
    out.clear();
    ASSERT_EQ(s.get(name, 1 << 20, out, why), 0) << name << ": " << why;
    EXPECT_EQ(out.to_string(), name + "!") << "distinct names stay distinct";
  }
  ASSERT_EQ(s.put("empty", BufferList(), why), 0) << why;
  out.clear();
  ASSERT_EQ(s.get("empty", 1 << 20, out, why), 0) << why;
  EXPECT_EQ(out.length(), 0u);
  ASSERT_EQ(s.remove("obj", why), 0) << why;
  EXPECT_EQ(s.stat("obj", size, why), -ENOENT);
}

TEST(ObjdStore, Memory) {
  auto s = make_memory_store(1 << 20);
  exercise(*s);
  std::string why;
  EXPECT_EQ(s->put("big", BufferList::copy_of(std::string(2 << 20, 'x')), why), -ENOSPC);
  EXPECT_NE(why.find("objd_memory_limit"), std::string::npos) << why;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("siphon-objd-test-" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

// Why io_uring cannot be used in this process ("" when it can).
std::string io_uring_refusal() {
  io_uring ring{};
  const int rc = io_uring_queue_init(4, &ring, 0);
  if (rc < 0) return std::strerror(-rc);
  io_uring_queue_exit(&ring);
  return {};
}

TEST(ObjdStore, DirectoryThroughIoUring) {
  if (const std::string r = io_uring_refusal(); !r.empty())
    GTEST_SKIP() << "io_uring is refused on this machine (" << r
                 << "); ObjdStore.ADirectoryFallsBackToSystemCallsWhenIoUringIsRefused covers the store here";
  TempDir t;
  std::string why;
  auto s = make_directory_store((t.path / "data").string(), why);
  ASSERT_TRUE(s) << why;
  EXPECT_NE(s->describe().find("io_uring"), std::string::npos);
  exercise(*s);
  // Objects are files; no temporary file is left behind.
  ASSERT_EQ(s->put("persist", bytes("on disk"), why), 0) << why;
  std::ifstream f(t.path / "data" / "persist");
  std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "on disk");
  for (const auto& e : fs::directory_iterator(t.path / "data"))
    EXPECT_NE(e.path().filename().string().rfind(".tmp", 0), 0u) << e.path();
  // A second store on the same directory sees the objects (a restart).
  auto again = make_directory_store((t.path / "data").string(), why);
  ASSERT_TRUE(again) << why;
  BufferList out;
  ASSERT_EQ(again->get("persist", 1 << 20, out, why), 0) << why;
  EXPECT_EQ(out.to_string(), "on disk");
}

// Makes io_uring_setup fail with EPERM in the calling thread from now on, as
// a container runtime's default seccomp profile does. Returns "" or why not.
std::string refuse_io_uring() { return test::refuse_syscall(__NR_io_uring_setup, EPERM); }

// In a child process (a death test): refuse io_uring, check the refusal is
// real, then run the directory store through everything the io_uring test
// does. Exits 0 only when all of it passed.
[[noreturn]] void directory_store_with_io_uring_refused(const fs::path& dir) {
  if (const std::string why = refuse_io_uring(); !why.empty()) {
    std::fprintf(stderr, "cannot install the seccomp filter: %s\n", why.c_str());
    std::_Exit(3);
  }
  if (io_uring_refusal() != std::strerror(EPERM)) {
    std::fprintf(stderr, "the seccomp filter did not refuse io_uring_setup\n");
    std::_Exit(4);
  }
  std::string why;
  auto s = make_directory_store(dir.string(), why);
  if (!s) {
    std::fprintf(stderr, "no store: %s\n", why.c_str());
    std::_Exit(5);
  }
  EXPECT_EQ(s->describe(), "directory " + dir.string() + " (system calls)");
  exercise(*s);
  EXPECT_EQ(s->put("persist", bytes("on disk"), why), 0) << why;
  std::ifstream f(dir / "persist");
  const std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "on disk");
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_NE(e.path().filename().string().rfind(".tmp", 0), 0u) << e.path();
  std::fprintf(stderr, "store: %s\n", s->describe().c_str());
  std::fflush(stderr);
  std::_Exit(::testing::Test::HasFailure() ? 1 : 0);
}

TEST(ObjdStore, ADirectoryFallsBackToSystemCallsWhenIoUringIsRefused) {
  TempDir t;
  const fs::path dir = t.path / "data";
  // The child's stderr must hold the one log line naming the refusal and the
  // fallback, and the store's description.
  EXPECT_EXIT(directory_store_with_io_uring_refused(dir), ::testing::ExitedWithCode(0),
              "objd_data_dir .*data: io_uring is refused \\(Operation not permitted: a seccomp profile or the "
              "sysctl kernel.io_uring_disabled\\); using plain system "
              "calls instead(.|\n)*store: directory .*data \\(system calls\\)");
  // What the child wrote is on disk, readable by a store on io_uring (or on
  // system calls, where this machine refuses io_uring too).
  std::string why;
  auto again = make_directory_store(dir.string(), why);
  ASSERT_TRUE(again) << why;
  BufferList out;
  ASSERT_EQ(again->get("persist", 1 << 20, out, why), 0) << why;
  EXPECT_EQ(out.to_string(), "on disk");
}

TEST(ObjdStore, AnUnusableDirectoryIsAClearError) {
  TempDir t;
  fs::create_directories(t.path);
  std::ofstream(t.path / "file") << "x";
  std::string why;
  EXPECT_FALSE(make_directory_store((t.path / "file" / "sub").string(), why));
  EXPECT_NE(why.find("objd_data_dir"), std::string::npos) << why;
  EXPECT_NE(why.find("file/sub"), std::string::npos) << why;
}

TEST(ObjdServer, ErrorRepliesForBadRequests) {
  auto store = make_memory_store(1 << 20);
  ObjectServer server(*store, 1000);
  auto req = [](OpCode op, std::string name, std::string data = "") {
    auto m = make_message<MObjdOp>(op, std::move(name));
    m->set_data(BufferList::copy_of(data));
    m->crc = data_crc(m->data());
    m->set_tid(42);
    return m;
  };
  auto r = server.handle(*req(OpCode::put, "a/b", "x"));
  EXPECT_EQ(r->result, -EINVAL);
  EXPECT_NE(r->error.find("'/'"), std::string::npos) << r->error;
  EXPECT_EQ(r->get_tid(), 42u) << "the reply carries the request's tid";
  r = server.handle(*req(OpCode::get, "nothing"));
  EXPECT_EQ(r->result, -ENOENT);
  EXPECT_NE(r->error.find("no such object"), std::string::npos) << r->error;
  r = server.handle(*req(OpCode::put, "big", std::string(1001, 'x')));
  EXPECT_EQ(r->result, -EFBIG);
  EXPECT_NE(r->error.find("objd_max_object_size"), std::string::npos) << r->error;
  auto bad_crc = req(OpCode::put, "crc", "payload");
  bad_crc->crc ^= 1;
  r = server.handle(*bad_crc);
  EXPECT_EQ(r->result, -EBADMSG);
  auto unknown = req(OpCode::put, "x");
  unknown->op = static_cast<OpCode>(77);
  r = server.handle(*unknown);
  EXPECT_EQ(r->result, -EOPNOTSUPP);
  EXPECT_NE(r->error.find("77"), std::string::npos) << r->error;
  // A good exchange: put, stat, get (with the crc), delete.
  EXPECT_EQ(server.handle(*req(OpCode::put, "ok", "data!"))->result, 0);
  r = server.handle(*req(OpCode::stat, "ok"));
  EXPECT_EQ(r->result, 0);
  EXPECT_EQ(r->size, 5u);
  r = server.handle(*req(OpCode::get, "ok"));
  EXPECT_EQ(r->result, 0);
  EXPECT_EQ(r->data().to_string(), "data!");
  EXPECT_EQ(r->crc, data_crc(r->data()));
  EXPECT_EQ(server.handle(*req(OpCode::remove, "ok"))->result, 0);
  EXPECT_EQ(server.handle(*req(OpCode::remove, "ok"))->result, -ENOENT);
  EXPECT_EQ(server.counters().errors.load(), 6u);
  // Messages of other types are dropped and counted, never fatal.
  EXPECT_TRUE(server.ms_dispatch(make_message<Message>(0x7fff)));
  EXPECT_TRUE(server.ms_dispatch(make_message<Message>(kMsgObjdOp)))
      << "our type number but not decoded (no registry): dropped";
  EXPECT_EQ(server.counters().dropped.load(), 2u);
}

// The daemon's own `objd` logger, registered through the perf API for the
// server's lifetime, moves with the requests it serves.
TEST(ObjdServer, ObjdPerfLoggerCountsRequests) {
  auto value = [](int idx) -> std::optional<std::uint64_t> {
    std::optional<std::uint64_t> v;
    perf::process_collection().visit({}, [&](const perf::Logger& l, const perf::CounterInfo&, const perf::Value&) {
      if (l.name() == "objd" && l.first() <= idx && idx < l.last() && !v) v = l.get(idx).u64;
    });
    return v;
  };
  {
    auto store = make_memory_store(1 << 20);
    ObjectServer server(*store, 1000);
    auto put = make_message<MObjdOp>(OpCode::put, "p");
    put->set_data(BufferList::copy_of("12345"));
    put->crc = data_crc(put->data());
    EXPECT_TRUE(server.ms_dispatch(put));
    auto get = make_message<MObjdOp>(OpCode::get, "missing");
    EXPECT_TRUE(server.ms_dispatch(get));
    EXPECT_EQ(value(l_objd_op), 2u);
    EXPECT_EQ(value(l_objd_op_put), 1u);
    EXPECT_EQ(value(l_objd_op_get), 1u);
    EXPECT_EQ(value(l_objd_op_in_bytes), 5u);
    EXPECT_EQ(value(l_objd_op_errors), 1u) << "the get of a missing object";
    EXPECT_NE(perf::process_collection().perf_schema().find("\"op_latency\""), std::string::npos);
  }
  EXPECT_FALSE(value(l_objd_op).has_value()) << "the logger goes with the server";
}

}  // namespace
}  // namespace siphon::objd

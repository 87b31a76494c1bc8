#include "tools/objd/store.h"

#include "msgr/base/log.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <liburing.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

namespace siphon::objd {
namespace {

std::string errno_text(int negative_errno) { return std::strerror(-negative_errno); }

class MemoryStore final : public ObjectStore {
 public:
  explicit MemoryStore(std::uint64_t capacity) : capacity_(capacity) {}
  std::string describe() const override { return fmt::format("memory (limit {} bytes)", capacity_); }

  int put(const std::string& name, const BufferList& data, std::string& why) override {
    const auto it = objects_.find(name);
    const std::uint64_t old = it != objects_.end() ? it->second.length() : 0;
    if (used_ - old + data.length() > capacity_) {
      why = fmt::format("put {}: the memory store is full ({} of {} bytes used; objd_memory_limit)", name, used_,
                        capacity_);
      return -ENOSPC;
    }
    // A private copy: the received buffers may belong to the transport's
    // pools (RDMA receive buffers) and must go back to them.
    BufferList copy;
    if (data.length() > 0) {
      std::byte* dst = copy.append_uninitialized(data.length());
      std::size_t at = 0;
      for (const auto& p : data.ptrs()) {
        std::memcpy(dst + at, p.data(), p.length());
        at += p.length();
      }
    }
    used_ = used_ - old + data.length();
    objects_[name] = std::move(copy);
    return 0;
  }
  int get(const std::string& name, std::uint64_t max_size, BufferList& out, std::string& why) override {
    const auto it = objects_.find(name);
    if (it == objects_.end()) {
      why = fmt::format("get {}: no such object", name);
      return -ENOENT;
    }
    if (it->second.length() > max_size) {
      why = fmt::format("get {}: the object is {} bytes, more than a reply may carry ({})", name,
                        it->second.length(), max_size);
      return -EFBIG;
    }
    out = it->second;  // shared, not copied: stored buffers are never modified
    return 0;
  }
  int stat(const std::string& name, std::uint64_t& size, std::string& why) override {
    const auto it = objects_.find(name);
    if (it == objects_.end()) {
      why = fmt::format("stat {}: no such object", name);
      return -ENOENT;
    }
    size = it->second.length();
    return 0;
  }
  int remove(const std::string& name, std::string& why) override {
    const auto it = objects_.find(name);
    if (it == objects_.end()) {
      why = fmt::format("delete {}: no such object", name);
      return -ENOENT;
    }
    used_ -= it->second.length();
    objects_.erase(it);
    return 0;
  }

 private:
  std::uint64_t capacity_;
  std::uint64_t used_ = 0;
  std::map<std::string, BufferList> objects_;
};

// The directory store's file operations, each returning its result or a
// negative errno. Two engines: io_uring (one ring, one operation in flight
// at a time: the store is used from one thread), and the plain system calls
// the store falls back to when the kernel or a seccomp profile refuses
// io_uring_setup.
class FileIo {
 public:
  virtual ~FileIo() = default;
  virtual int openat(int dir, const char* path, int flags, mode_t mode) = 0;
  virtual int writev(int fd, const iovec* iov, unsigned count, std::uint64_t offset) = 0;
  virtual int read(int fd, void* buf, unsigned len, std::uint64_t offset) = 0;
  virtual int fdatasync(int fd) = 0;
  virtual int close(int fd) = 0;
  virtual int renameat(int dir, const char* from, const char* to) = 0;
  virtual int unlinkat(int dir, const char* path) = 0;
  virtual int statx(int dir, const char* path, int flags, unsigned mask, struct statx* st) = 0;
};

class UringIo final : public FileIo {
 public:
  int init(unsigned entries) {
    const int rc = io_uring_queue_init(entries, &ring_, 0);
    ready_ = rc == 0;
    return rc;
  }
  ~UringIo() override {
    if (ready_) io_uring_queue_exit(&ring_);
  }
  int openat(int dir, const char* path, int flags, mode_t mode) override {
    return run([&](io_uring_sqe* s) { io_uring_prep_openat(s, dir, path, flags, mode); });
  }
  int writev(int fd, const iovec* iov, unsigned count, std::uint64_t offset) override {
    return run([&](io_uring_sqe* s) { io_uring_prep_writev(s, fd, iov, count, offset); });
  }
  int read(int fd, void* buf, unsigned len, std::uint64_t offset) override {
    return run([&](io_uring_sqe* s) { io_uring_prep_read(s, fd, buf, len, offset); });
  }
  int fdatasync(int fd) override {
    return run([&](io_uring_sqe* s) { io_uring_prep_fsync(s, fd, IORING_FSYNC_DATASYNC); });
  }
  int close(int fd) override {
    return run([&](io_uring_sqe* s) { io_uring_prep_close(s, fd); });
  }
  int renameat(int dir, const char* from, const char* to) override {
    return run([&](io_uring_sqe* s) { io_uring_prep_renameat(s, dir, from, dir, to, 0); });
  }
  int unlinkat(int dir, const char* path) override {
    return run([&](io_uring_sqe* s) { io_uring_prep_unlinkat(s, dir, path, 0); });
  }
  int statx(int dir, const char* path, int flags, unsigned mask, struct statx* st) override {
    return run([&](io_uring_sqe* s) { io_uring_prep_statx(s, dir, path, flags, mask, st); });
  }

 private:
  template <typename Prep>
  int run(Prep&& prep) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return -EBUSY;  // cannot happen with one op in flight
    prep(sqe);
    int rc = io_uring_submit(&ring_);
    if (rc < 0) return rc;
    io_uring_cqe* cqe = nullptr;
    do {
      rc = io_uring_wait_cqe(&ring_, &cqe);
    } while (rc == -EINTR);
    if (rc < 0) return rc;
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    return res;
  }

  io_uring ring_{};
  bool ready_ = false;
};

// The fallback: the same operations as plain system calls, each retried
// when a signal interrupts it (close excepted: Linux releases the
// descriptor even when close() reports an error).
class SyscallIo final : public FileIo {
 public:
  int openat(int dir, const char* path, int flags, mode_t mode) override {
    return retry([&] { return ::openat(dir, path, flags, mode); });
  }
  int writev(int fd, const iovec* iov, unsigned count, std::uint64_t offset) override {
    return retry([&] { return ::pwritev(fd, iov, static_cast<int>(count), static_cast<off_t>(offset)); });
  }
  int read(int fd, void* buf, unsigned len, std::uint64_t offset) override {
    return retry([&] { return ::pread(fd, buf, len, static_cast<off_t>(offset)); });
  }
  int fdatasync(int fd) override {
    return retry([&] { return ::fdatasync(fd); });
  }
  int close(int fd) override { return ::close(fd) == 0 ? 0 : -errno; }
  int renameat(int dir, const char* from, const char* to) override {
    return retry([&] { return ::renameat(dir, from, dir, to); });
  }
  int unlinkat(int dir, const char* path) override {
    return retry([&] { return ::unlinkat(dir, path, 0); });
  }
  int statx(int dir, const char* path, int flags, unsigned mask, struct statx* st) override {
    return retry([&] { return ::statx(dir, path, flags, mask, st); });
  }

 private:
  template <typename F>
  static int retry(F&& call) {
    for (;;) {
      const auto rc = call();
      if (rc >= 0) return static_cast<int>(rc);
      if (errno != EINTR) return -errno;
    }
  }
};

class DirectoryStore final : public ObjectStore {
 public:
  DirectoryStore(std::string dir, int dir_fd) : dir_(std::move(dir)), dir_fd_(dir_fd) {}
  ~DirectoryStore() override {
    if (dir_fd_ >= 0) ::close(dir_fd_);
  }
  // io_uring when the kernel allows it; otherwise plain system calls, with
  // one log line naming the refusal (a container's seccomp profile, the
  // sysctl kernel.io_uring_disabled, a kernel without io_uring).
  void init() {
    auto ring = std::make_unique<UringIo>();
    const int rc = ring->init(8);
    if (rc == 0) {
      io_ = std::move(ring);
      engine_ = "io_uring";
      return;
    }
    io_ = std::make_unique<SyscallIo>();
    engine_ = "system calls";
    const char* cause = rc == -EPERM    ? "a seccomp profile or the sysctl kernel.io_uring_disabled"
                        : rc == -ENOSYS ? "a kernel without io_uring"
                                        : "the kernel could not set up a ring";
    SIPHON_LOG(tools, 0, "objd_data_dir {}: io_uring is refused ({}: {}); using plain system calls instead, with the "
               "same behaviour", dir_, errno_text(rc), cause);
  }
  std::string describe() const override { return fmt::format("directory {} ({})", dir_, engine_); }

  int put(const std::string& name, const BufferList& data, std::string& why) override {
    const std::string file = object_file_name(name);
    const std::string tmp = fmt::format(".tmp.{}.{}", ++tmp_seq_, file);
    int fd = io_->openat(dir_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return fail(why, "put", name, "cannot create a temporary file", fd);
    int rc = write_all(fd, data);
    if (rc == 0) rc = io_->fdatasync(fd);
    const int crc = io_->close(fd);
    if (rc == 0 && crc < 0) rc = crc;
    if (rc == 0) rc = io_->renameat(dir_fd_, tmp.c_str(), file.c_str());
    if (rc < 0) {
      io_->unlinkat(dir_fd_, tmp.c_str());
      return fail(why, "put", name, "cannot write the object", rc);
    }
    return 0;
  }

  int get(const std::string& name, std::uint64_t max_size, BufferList& out, std::string& why) override {
    const std::string file = object_file_name(name);
    const int fd = io_->openat(dir_fd_, file.c_str(), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return fail(why, "get", name, "cannot open the object", fd);
    struct statx st {};
    int rc = io_->statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &st);
    if (rc == 0 && st.stx_size > max_size) {
      why = fmt::format("get {}: the object is {} bytes, more than a reply may carry ({})", name, st.stx_size,
                        max_size);
      rc = -EFBIG;
      io_->close(fd);
      return rc;
    }
    BufferList bl;
    if (rc == 0 && st.stx_size > 0) {
      std::byte* dst = bl.append_uninitialized(st.stx_size);
      std::uint64_t at = 0;
      while (at < st.stx_size) {
        const int n = io_->read(fd, dst + at, static_cast<unsigned>(std::min<std::uint64_t>(st.stx_size - at, 1u << 30)),
                                at);
        if (n < 0) {
          rc = n;
          break;
        }
        if (n == 0) {  // the file shrank under us (another writer): report, do not return garbage
          rc = -EIO;
          break;
        }
        at += static_cast<std::uint64_t>(n);
      }
    }
    io_->close(fd);
    if (rc < 0) return fail(why, "get", name, "cannot read the object", rc);
    out = std::move(bl);
    return 0;
  }

  int stat(const std::string& name, std::uint64_t& size, std::string& why) override {
    const std::string file = object_file_name(name);
    struct statx st {};
    const int rc = io_->statx(dir_fd_, file.c_str(), AT_SYMLINK_NOFOLLOW, STATX_SIZE | STATX_TYPE, &st);
    if (rc < 0) return fail(why, "stat", name, "cannot stat the object", rc);
    if (!S_ISREG(st.stx_mode)) return fail(why, "stat", name, "not a regular file", -EIO);
    size = st.stx_size;
    return 0;
  }

  int remove(const std::string& name, std::string& why) override {
    const std::string file = object_file_name(name);
    const int rc = io_->unlinkat(dir_fd_, file.c_str());
    if (rc < 0) return fail(why, "delete", name, "cannot delete the object", rc);
    return 0;
  }

 private:
  int fail(std::string& why, std::string_view op, const std::string& name, std::string_view what, int rc) {
    if (rc == -ENOENT)
      why = fmt::format("{} {}: no such object", op, name);
    else
      why = fmt::format("{} {}: {} in {}: {}", op, name, what, dir_, errno_text(rc));
    return rc;
  }

  int write_all(int fd, const BufferList& data) {
    std::vector<iovec> iov;
    for (const auto& p : data.ptrs())
      if (p.length() > 0) iov.push_back({const_cast<std::byte*>(p.data()), p.length()});
    std::size_t first = 0;
    std::uint64_t offset = 0;
    while (first < iov.size()) {
      const auto count = static_cast<unsigned>(std::min<std::size_t>(iov.size() - first, IOV_MAX));
      const int n = io_->writev(fd, &iov[first], count, offset);
      if (n < 0) return n;
      if (n == 0) return -EIO;
      offset += static_cast<std::uint64_t>(n);
      // Skip what was written (a short write resumes mid-vector).
      auto left = static_cast<std::size_t>(n);
      while (left > 0 && first < iov.size()) {
        if (left >= iov[first].iov_len) {
          left -= iov[first].iov_len;
          ++first;
        } else {
          iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
          iov[first].iov_len -= left;
          left = 0;
        }
      }
    }
    return 0;
  }

  std::string dir_;
  int dir_fd_;
  std::unique_ptr<FileIo> io_;
  const char* engine_ = "";
  std::uint64_t tmp_seq_ = 0;
};

}  // namespace

std::string object_file_name(const std::string& name) {
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '%' || (i == 0 && c == '.'))
      out += fmt::format("%{:02x}", static_cast<unsigned char>(c));
    else
      out += c;
  }
  return out;
}

std::unique_ptr<ObjectStore> make_memory_store(std::uint64_t capacity) {
  return std::make_unique<MemoryStore>(capacity);
}

std::unique_ptr<ObjectStore> make_directory_store(const std::string& dir, std::string& why) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    why = fmt::format("objd_data_dir {}: cannot create it: {}", dir, ec.message());
    return nullptr;
  }
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    why = fmt::format("objd_data_dir {}: cannot open it: {}", dir, std::strerror(errno));
    return nullptr;
  }
  if (::faccessat(fd, ".", W_OK, 0) != 0) {
    why = fmt::format("objd_data_dir {}: not writable by this user: {}", dir, std::strerror(errno));
    ::close(fd);
    return nullptr;
  }
  auto store = std::make_unique<DirectoryStore>(dir, fd);
  store->init();
  return store;
}

}  // namespace siphon::objd

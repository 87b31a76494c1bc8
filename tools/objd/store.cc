#include "tools/objd/store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <liburing.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
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

// One ring, one operation in flight at a time (the store is used from one
// thread): submit, wait for the completion, return its result.
class Ring {
 public:
  int init(unsigned entries) { return io_uring_queue_init(entries, &ring_, 0); }
  ~Ring() {
    if (ready_) io_uring_queue_exit(&ring_);
  }
  void set_ready() { ready_ = true; }

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

 private:
  io_uring ring_{};
  bool ready_ = false;
};

class DirectoryStore final : public ObjectStore {
 public:
  DirectoryStore(std::string dir, int dir_fd) : dir_(std::move(dir)), dir_fd_(dir_fd) {}
  ~DirectoryStore() override {
    if (dir_fd_ >= 0) ::close(dir_fd_);
  }
  int init(std::string& why) {
    const int rc = ring_.init(8);
    if (rc < 0) {
      why = fmt::format("objd_data_dir {}: io_uring is not available ({}); siphon-objd needs Linux 5.6 or newer "
                        "with io_uring enabled (sysctl kernel.io_uring_disabled = 0), or leave objd_data_dir "
                        "empty to keep objects in memory",
                        dir_, errno_text(rc));
      return rc;
    }
    ring_.set_ready();
    return 0;
  }
  std::string describe() const override { return fmt::format("directory {} (io_uring)", dir_); }

  int put(const std::string& name, const BufferList& data, std::string& why) override {
    const std::string file = object_file_name(name);
    const std::string tmp = fmt::format(".tmp.{}.{}", ++tmp_seq_, file);
    int fd = ring_.run([&](io_uring_sqe* s) {
      io_uring_prep_openat(s, dir_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    });
    if (fd < 0) return fail(why, "put", name, "cannot create a temporary file", fd);
    int rc = write_all(fd, data);
    if (rc == 0) rc = ring_.run([&](io_uring_sqe* s) { io_uring_prep_fsync(s, fd, IORING_FSYNC_DATASYNC); });
    const int crc = ring_.run([&](io_uring_sqe* s) { io_uring_prep_close(s, fd); });
    if (rc == 0 && crc < 0) rc = crc;
    if (rc == 0)
      rc = ring_.run([&](io_uring_sqe* s) {
        io_uring_prep_renameat(s, dir_fd_, tmp.c_str(), dir_fd_, file.c_str(), 0);
      });
    if (rc < 0) {
      ring_.run([&](io_uring_sqe* s) { io_uring_prep_unlinkat(s, dir_fd_, tmp.c_str(), 0); });
      return fail(why, "put", name, "cannot write the object", rc);
    }
    return 0;
  }

  int get(const std::string& name, std::uint64_t max_size, BufferList& out, std::string& why) override {
    const std::string file = object_file_name(name);
    const int fd = ring_.run([&](io_uring_sqe* s) {
      io_uring_prep_openat(s, dir_fd_, file.c_str(), O_RDONLY | O_CLOEXEC, 0);
    });
    if (fd < 0) return fail(why, "get", name, "cannot open the object", fd);
    struct statx st {};
    int rc = ring_.run([&](io_uring_sqe* s) {
      io_uring_prep_statx(s, fd, "", AT_EMPTY_PATH, STATX_SIZE, &st);
    });
    if (rc == 0 && st.stx_size > max_size) {
      why = fmt::format("get {}: the object is {} bytes, more than a reply may carry ({})", name, st.stx_size,
                        max_size);
      rc = -EFBIG;
      ring_.run([&](io_uring_sqe* s) { io_uring_prep_close(s, fd); });
      return rc;
    }
    BufferList bl;
    if (rc == 0 && st.stx_size > 0) {
      std::byte* dst = bl.append_uninitialized(st.stx_size);
      std::uint64_t at = 0;
      while (at < st.stx_size) {
        const int n = ring_.run([&](io_uring_sqe* s) {
          io_uring_prep_read(s, fd, dst + at, static_cast<unsigned>(std::min<std::uint64_t>(st.stx_size - at, 1u << 30)),
                             at);
        });
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
    ring_.run([&](io_uring_sqe* s) { io_uring_prep_close(s, fd); });
    if (rc < 0) return fail(why, "get", name, "cannot read the object", rc);
    out = std::move(bl);
    return 0;
  }

  int stat(const std::string& name, std::uint64_t& size, std::string& why) override {
    const std::string file = object_file_name(name);
    struct statx st {};
    const int rc = ring_.run([&](io_uring_sqe* s) {
      io_uring_prep_statx(s, dir_fd_, file.c_str(), AT_SYMLINK_NOFOLLOW, STATX_SIZE | STATX_TYPE, &st);
    });
    if (rc < 0) return fail(why, "stat", name, "cannot stat the object", rc);
    if (!S_ISREG(st.stx_mode)) return fail(why, "stat", name, "not a regular file", -EIO);
    size = st.stx_size;
    return 0;
  }

  int remove(const std::string& name, std::string& why) override {
    const std::string file = object_file_name(name);
    const int rc = ring_.run([&](io_uring_sqe* s) { io_uring_prep_unlinkat(s, dir_fd_, file.c_str(), 0); });
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
      const int n = ring_.run([&](io_uring_sqe* s) { io_uring_prep_writev(s, fd, &iov[first], count, offset); });
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
  Ring ring_;
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
  if (store->init(why) < 0) return nullptr;
  return store;
}

}  // namespace siphon::objd

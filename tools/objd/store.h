// siphon-objd's object stores: in memory, or one file per object in a
// directory with every file operation (open, write, fsync, rename, read,
// statx, unlink, close) submitted through io_uring (liburing), or made as
// plain system calls when the kernel or a seccomp profile refuses io_uring.
//
// A store is used from one thread (the daemon's dispatch thread). Every
// operation returns 0 or a negative errno and, on error, sets `why` to a
// sentence naming the object and the cause; nothing a client sends can make
// a store throw or abort.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "msgr/base/buffer.h"

namespace siphon::objd {

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  // "memory (limit 1 GiB)", "directory /srv/objd (io_uring)",
  // "directory /srv/objd (system calls)".
  virtual std::string describe() const = 0;
  // Creates or replaces `name` with `data` (atomically in a directory: a
  // reader sees the old or the new object, never a mix).
  virtual int put(const std::string& name, const BufferList& data, std::string& why) = 0;
  // Reads the whole object; -EFBIG when it is larger than `max_size`.
  virtual int get(const std::string& name, std::uint64_t max_size, BufferList& out, std::string& why) = 0;
  virtual int stat(const std::string& name, std::uint64_t& size, std::string& why) = 0;
  virtual int remove(const std::string& name, std::string& why) = 0;
};

// Objects in memory, at most `capacity` bytes of object data in all
// (-ENOSPC beyond it).
std::unique_ptr<ObjectStore> make_memory_store(std::uint64_t capacity);

// Objects as files in `dir` (created if missing; must be writable). Returns
// nullptr with `why` set when the directory cannot be used (the sentence
// says why and how to fix it). When io_uring_setup is refused (EPERM from a
// seccomp profile or kernel.io_uring_disabled, ENOSYS from a kernel without
// it) the store uses plain system calls instead and logs one line saying so.
std::unique_ptr<ObjectStore> make_directory_store(const std::string& dir, std::string& why);

// The file name of an object in a directory store: the name with '%' and a
// leading '.' percent-encoded (so no object is a hidden or temporary file).
std::string object_file_name(const std::string& name);

}  // namespace siphon::objd

// AdminSocket: a daemon's admin socket, spoken to by the stock
// `ceph --admin-daemon PATH CMD` / `ceph daemon NAME CMD` and by Ceph's
// ceph-exporter (docs/observability.md §2; the facts are in
// ../shared/reference/observability.md §1, §2, §6, §7).
//
// Wire (identical to Ceph 16.2.15's): a UNIX stream socket, one command per
// connection. The client sends a JSON object ({"prefix": "perf dump", ...,
// "format": "json"}) ended by '\0' or '\n'; a leading '\0' selects the legacy
// 4-byte code (0 -> "2", 1 -> perf dump, 2 -> perf schema). The reply is a
// u32 big-endian payload length and the payload, then the server closes.
// There is no status on the wire: an error is the payload
// "ERROR: (<errno>) <strerror>\n<message>\n".
//
// Unlike Ceph's, one client never holds up another: every connection is
// served asynchronously on the socket's own I/O thread, a request is bounded
// in size (Options::max_request) and in time (Options::request_timeout), and
// commands run on a separate command thread, so a slow command delays other
// commands but never the reading, timing out or dropping of clients.
//
// Commands are registered with Ceph's descriptor syntax, which is also what
// `get_command_descriptions` returns to the CLI:
//
//   sock.register_command("perf dump name=logger,type=CephString,req=false "
//                         "name=counter,type=CephString,req=false",
//                         "dump perfcounters value", handler);
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

namespace siphon::admin {

// One argument of a command's signature (Ceph's "name=var,type=CephString,...").
struct ArgDesc {
  std::string name;
  std::string type;     // CephString, CephInt, CephBool, CephChoices, CephFloat, ...
  bool required = true;
  bool many = false;    // n=N: one or more values (a JSON array)
  std::string strings;  // CephChoices: "a|b|c"
};

// A parsed signature: the literal words (the prefix) and the arguments.
struct Signature {
  std::string prefix;  // the literal words joined by one space
  std::vector<std::string> words;
  std::vector<ArgDesc> args;
  // Parses Ceph's descriptor text; false (and `error`) if it is malformed.
  static bool parse(std::string_view text, Signature& out, std::string& error);
};

// A validated request, handed to a command's handler.
struct Request {
  std::string prefix;
  nlohmann::json cmd;  // the whole JSON object the client sent
  // The argument `name` as a string ("" if absent); a CephString n=N list is
  // joined with single spaces, as Ceph's config set does.
  std::string str(std::string_view name) const;
  bool has(std::string_view name) const;
};

// What a handler returns. An error (err < 0, a negative errno) becomes
// "ERROR: (<-err>) <strerror>\n<errmsg>\n" followed by any output.
struct Reply {
  int err = 0;
  std::string errmsg;
  // The output: a JSON value, or JSON text kept as written (text_json, e.g.
  // the perf library's exact number formatting), or raw bytes (raw).
  nlohmann::ordered_json value;
  std::string text_json;
  std::string raw;
  bool is_raw = false;

  static Reply json(nlohmann::ordered_json v) {
    Reply r;
    r.value = std::move(v);
    return r;
  }
  static Reply json_text(std::string t) {
    Reply r;
    r.text_json = std::move(t);
    return r;
  }
  static Reply bytes(std::string b) {
    Reply r;
    r.raw = std::move(b);
    r.is_raw = true;
    return r;
  }
  static Reply error(int err, std::string msg) {
    Reply r;
    r.err = err;
    r.errmsg = std::move(msg);
    return r;
  }
};

using Handler = std::function<Reply(const Request&)>;

// "ERROR: (22) Invalid argument\n<msg>\n": Ceph's error payload.
std::string error_payload(int err, std::string_view msg);
// Formats `r` for `format` (json, json-pretty; anything else is json-pretty
// as in Ceph, xml included: Siphon has no XML formatter).
std::string format_reply(const Reply& r, std::string_view format);
// JSON text without whitespace outside strings (Ceph's compact "json").
std::string compact_json(std::string_view text);

class AdminSocket {
 public:
  struct Options {
    // Longest request accepted before its terminator (Ceph: 1023 bytes).
    std::size_t max_request = 64 * 1024;
    // A client must send its whole request within this time, and read the
    // whole reply within it; otherwise it is dropped.
    std::chrono::milliseconds request_timeout{5000};
    // Clients connected at once; more are closed at accept.
    std::size_t max_clients = 64;
  };

  AdminSocket();
  explicit AdminSocket(Options opts);
  ~AdminSocket();  // stop()
  AdminSocket(const AdminSocket&) = delete;
  AdminSocket& operator=(const AdminSocket&) = delete;

  // Adds a command; false if the signature is malformed or its prefix is
  // taken (`error` says which). May be called at any time, from any thread.
  bool register_command(std::string_view signature, std::string help, Handler handler, std::string& error);
  // The same, throwing std::logic_error on a bad signature (a programming
  // error in the caller's literal).
  void register_command(std::string_view signature, std::string help, Handler handler);
  void unregister_command(std::string_view prefix);

  // Binds `path` (mode 0600), replacing a stale socket file that nobody
  // answers on, and starts serving. On failure returns false with `error`
  // naming the path, the cause and the fix; nothing is left running.
  bool start(const std::string& path, std::string& error);
  // Stops serving, closes every client and removes the socket file. Idempotent.
  void stop();
  const std::string& path() const noexcept;

  // Runs one request exactly as a client's (the bytes before the
  // terminator) and returns the payload: for tests and in-process callers.
  std::string execute(std::string_view request);

  // Requests served, and clients dropped for size or time (for tests).
  struct Stats {
    std::uint64_t served = 0;
    std::uint64_t dropped_oversize = 0;
    std::uint64_t dropped_timeout = 0;
    std::uint64_t refused_busy = 0;
  };
  Stats stats() const;

  struct Impl;  // admin_impl.h (named here so the server's helpers can)

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace siphon::admin

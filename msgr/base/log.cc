#include "msgr/base/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include "msgr/base/buffer.h"

namespace siphon::log {
namespace {

constexpr std::array<std::string_view, static_cast<std::size_t>(Subsys::count)> kNames = {
    "ms", "proto", "session", "transport", "rdma", "compat", "tools"};

std::atomic<Sink> g_sink{nullptr};

void stderr_sink(Subsys, int, std::string_view line) noexcept {
  // One write per line keeps lines from different threads whole.
  write_all(STDERR_FILENO, line.data(), line.size());
}

}  // namespace

namespace detail {
// Zero-initialised here; InitLevels below sets the defaults before main().
std::array<std::atomic<int>, static_cast<std::size_t>(Subsys::count)> levels{};
namespace {
const bool kLevelsInitialised = [] {
  for (auto& l : levels) l.store(kDefaultLevel, std::memory_order_relaxed);
  return true;
}();
}  // namespace

void vemit(Subsys s, int level, fmt::string_view f, fmt::format_args args) noexcept {
  try {
    fmt::memory_buffer buf;
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        now.time_since_epoch()).count() % 1000000;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    fmt::format_to(std::back_inserter(buf), "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z {} {:>2} {}: ",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                   tm.tm_sec, us, static_cast<long>(::syscall(SYS_gettid)), level, name(s));
    fmt::vformat_to(std::back_inserter(buf), f, args);
    buf.push_back('\n');
    Sink sink = g_sink.load(std::memory_order_acquire);
    (sink != nullptr ? sink : &stderr_sink)(s, level, std::string_view(buf.data(), buf.size()));
  } catch (...) {
    // Logging must never take the process down (bad format arguments,
    // allocation failure): drop the line.
  }
}
}  // namespace detail

std::string_view name(Subsys s) noexcept {
  const auto i = static_cast<std::size_t>(s);
  return i < kNames.size() ? kNames[i] : "?";
}

std::optional<Subsys> from_name(std::string_view n) noexcept {
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == n) return static_cast<Subsys>(i);
  return std::nullopt;
}

void set_level(Subsys s, int level) noexcept {
  detail::levels[static_cast<std::size_t>(s)].store(level, std::memory_order_relaxed);
}

int level(Subsys s) noexcept {
  return detail::levels[static_cast<std::size_t>(s)].load(std::memory_order_relaxed);
}

void set_sink(Sink sink) noexcept { g_sink.store(sink, std::memory_order_release); }

}  // namespace siphon::log

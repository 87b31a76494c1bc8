// Logging on fmt with per-subsystem levels, in the manner of Ceph's
// debug_<subsys> options: a message at level L is written when L is at most
// the subsystem's level. Levels: 0 errors, 1 notable events (faults,
// resets; the default), 5 debug, 10 verbose, 20 trace (per frame/operation).
//
// Disabled messages cost one relaxed atomic load and a compare; their
// arguments are not evaluated. SIPHON_TRACE compiles to nothing when NDEBUG is
// defined (release builds).
#pragma once

#include <array>
#include <atomic>
#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace siphon::log {

enum class Subsys : unsigned char { ms, proto, session, transport, rdma, compat, tools, count };
inline constexpr int kTrace = 20;
inline constexpr int kDefaultLevel = 1;

std::string_view name(Subsys s) noexcept;
std::optional<Subsys> from_name(std::string_view name) noexcept;

namespace detail {
extern std::array<std::atomic<int>, static_cast<std::size_t>(Subsys::count)> levels;
void vemit(Subsys s, int level, fmt::string_view fmt, fmt::format_args args) noexcept;
}  // namespace detail

inline bool enabled(Subsys s, int level) noexcept {
  return level <= detail::levels[static_cast<std::size_t>(s)].load(std::memory_order_relaxed);
}
void set_level(Subsys s, int level) noexcept;
int level(Subsys s) noexcept;

// Where formatted lines go (default: stderr, one write(2) per line). The sink
// may be called from any thread, concurrently.
using Sink = void (*)(Subsys s, int level, std::string_view line) noexcept;
void set_sink(Sink sink) noexcept;  // nullptr restores the default

template <typename... Args>
void emit(Subsys s, int level, fmt::format_string<Args...> f, Args&&... args) noexcept {
  detail::vemit(s, level, f, fmt::make_format_args(args...));
}

}  // namespace siphon::log

#define SIPHON_LOG(subsys, lvl, ...)                                            \
  do {                                                                          \
    if (::siphon::log::enabled(::siphon::log::Subsys::subsys, (lvl)))           \
      ::siphon::log::emit(::siphon::log::Subsys::subsys, (lvl), __VA_ARGS__);   \
  } while (0)

#ifdef NDEBUG
#define SIPHON_TRACE(subsys, ...)                                               \
  do {                                                                          \
    if constexpr (false)                                                        \
      ::siphon::log::emit(::siphon::log::Subsys::subsys, ::siphon::log::kTrace, \
                          __VA_ARGS__);                                         \
  } while (0)
#else
#define SIPHON_TRACE(subsys, ...) SIPHON_LOG(subsys, ::siphon::log::kTrace, __VA_ARGS__)
#endif

// SIPHON_PERF_COUNTERS (CMake option, ON by default): OFF compiles the
// messenger's counter updates out, for the overhead benchmark
// (docs/performance.md §Perf counters). The library itself (perf_counters.h)
// is always built; only the hot-path call sites test kCompiledIn, so with
// OFF the loggers exist, register and dump, but never move.
#pragma once

namespace siphon::perf {

#if defined(SIPHON_PERF_COUNTERS) && SIPHON_PERF_COUNTERS == 0
inline constexpr bool kCompiledIn = false;
#else
inline constexpr bool kCompiledIn = true;
#endif

}  // namespace siphon::perf

/* Counts a process's clock_gettime calls by clock (issue 17: what the perf
 * counters' time counters cost is mostly their clock reads, ~30 ns each on
 * this project's VM, which callgrind's instruction count underrates).
 *
 *   cc -O2 -shared -fPIC tools/bench/clock_reads.c -o /tmp/clock_reads.so -ldl
 *   LD_PRELOAD=/tmp/clock_reads.so siphon-bench loopback --ms-type async+posix \
 *       --size 64 --count 20000 --quiet --json /dev/null
 *
 * prints at exit, on stderr: "clock_gettime: MONOTONIC N, other M". Run it on
 * a build with counters and one with -DSIPHON_PERF_COUNTERS=OFF: the
 * difference over the messages sent is the counters' reads per message.
 * Calls made inside libc (not through its exported symbol) are not seen. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static atomic_ulong monotonic_reads, other_reads;

int clock_gettime(clockid_t clock, struct timespec *ts) {
  static int (*real)(clockid_t, struct timespec *);
  if (real == NULL) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
  atomic_fetch_add_explicit(clock == CLOCK_MONOTONIC ? &monotonic_reads : &other_reads, 1, memory_order_relaxed);
  return real(clock, ts);
}

__attribute__((destructor)) static void report(void) {
  fprintf(stderr, "clock_gettime: MONOTONIC %lu, other %lu\n", (unsigned long)atomic_load(&monotonic_reads),
          (unsigned long)atomic_load(&other_reads));
}

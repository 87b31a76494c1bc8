// Makes a system call fail the way a container runtime's seccomp profile
// does, for tests of what Siphon does when the kernel refuses something
// (io_uring_setup for siphon-objd's store, setsockopt(SO_RCVLOWAT) for the
// TCP stack). The filter applies to the calling thread and every thread it
// starts afterwards, for the rest of the process: install it in a death
// test's child (EXPECT_EXIT), before anything starts threads.
#pragma once

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace siphon::test {

// Calls of system call `nr` whose arguments match every (index, value) pair
// of `args` (the low 32 bits of the argument) fail with `err`; every other
// call runs. Returns "" or why the filter could not be installed.
inline std::string refuse_syscall(long nr, int err,
                                  std::vector<std::pair<unsigned, std::uint32_t>> args = {}) {
#if defined(__x86_64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  (void)nr;
  (void)err;
  (void)args;
  return "no seccomp filter is written for this architecture";
#endif
#if defined(__x86_64__) || defined(__aarch64__)
  // Each test that fails jumps to the ALLOW at the end: the jump offset is
  // the number of instructions between it and that ALLOW.
  std::vector<sock_filter> prog;
  std::vector<std::size_t> to_allow;  // jumps whose false branch must reach ALLOW
  const auto test = [&](std::uint32_t offset, std::uint32_t value) {
    prog.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset));
    to_allow.push_back(prog.size());
    prog.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, 0, 0));
  };
  test(offsetof(seccomp_data, arch), kArch);
  test(offsetof(seccomp_data, nr), static_cast<std::uint32_t>(nr));
  for (const auto& [index, value] : args) {
    if (index >= 6) return "a system call has 6 arguments";
    // The low word of a 64-bit argument (both architectures are little-endian).
    test(static_cast<std::uint32_t>(offsetof(seccomp_data, args) + 8 * index), value);
  }
  prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<std::uint32_t>(err) & SECCOMP_RET_DATA)));
  const std::size_t allow = prog.size();
  prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  for (const std::size_t j : to_allow) prog[j].jf = static_cast<std::uint8_t>(allow - j - 1);
  sock_fprog fprog{static_cast<unsigned short>(prog.size()), prog.data()};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return std::string("PR_SET_NO_NEW_PRIVS: ") + std::strerror(errno);
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0)
    return std::string("PR_SET_SECCOMP: ") + std::strerror(errno);
  return {};
#endif
}

}  // namespace siphon::test

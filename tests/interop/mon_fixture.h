// A throwaway Ceph monitor for one test: tests/interop/ceph-mon-fixture
// started in a fresh temporary directory and stopped by pid when the object
// goes away (also when the test fails). A mon that cannot be started is a
// test failure, never a skip.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace siphon::testing {

// Runs `cmd` through the shell; returns (exit status, stdout).
inline std::pair<int, std::string> run_shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, out};
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

class MonFixture {
 public:
  // Starts the mon; `conf_lines` go into its [global] section. `cephx`: the
  // mon requires cephx; keyring() holds mon. and client.admin.
  explicit MonFixture(std::vector<std::string> conf_lines = {}, bool cephx = false) {
    char tmpl[] = "/tmp/siphon-interop-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (d == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = d;
    std::string cmd = quote(script()) + " start " + quote(dir_);
    for (const auto& l : conf_lines) cmd += " --conf " + quote(l);
    if (cephx) cmd += " --cephx";
    cmd += " 2>&1";
    auto [rc, out] = run_shell(cmd);
    started_ = rc == 0;
    if (!started_) {
      error_ = "ceph-mon-fixture start failed (exit " + std::to_string(rc) + "):\n" + out;
      return;
    }
    const auto pos = out.find("port=");
    port_ = pos == std::string::npos ? 0 : std::atoi(out.c_str() + pos + 5);
  }
  ~MonFixture() {
    if (!dir_.empty()) {
      run_shell(quote(script()) + " stop " + quote(dir_) + " 2>&1");
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  MonFixture(const MonFixture&) = delete;
  MonFixture& operator=(const MonFixture&) = delete;

  bool ok() const { return started_; }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  std::string dir() const { return dir_; }
  std::string conf() const { return dir_ + "/ceph.conf"; }
  std::string keyring() const { return dir_ + "/keyring"; }
  std::string mon_host() const { return "v2:127.0.0.1:" + std::to_string(port_); }

  // Stops and starts the mon again on the same port.
  bool restart() {
    auto [rc, out] = run_shell(quote(script()) + " restart " + quote(dir_) + " 2>&1");
    if (rc != 0) error_ = out;
    return rc == 0;
  }
  bool stop() {
    auto [rc, out] = run_shell(quote(script()) + " stop " + quote(dir_) + " 2>&1");
    return rc == 0;
  }
  // `ceph -c <conf> ARGS` (stdout), exit status in *rc.
  std::string ceph(const std::string& args, int* rc = nullptr) const {
    auto [r, out] = run_shell("ceph -c " + quote(conf()) + " --connect-timeout 10 " + args + " 2>/dev/null");
    if (rc != nullptr) *rc = r;
    return out;
  }

  static std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  }

 private:
  static std::string script() { return std::string(SIPHON_INTEROP_DIR) + "/ceph-mon-fixture"; }
  std::string dir_;
  std::string error_;
  bool started_ = false;
  int port_ = 0;
};

}  // namespace siphon::testing

// Starts a mon fixture named `var` or fails the test (never skips).
#define SIPHON_START_MON(var, ...)                       \
  ::siphon::testing::MonFixture var{__VA_ARGS__};        \
  ASSERT_TRUE(var.ok()) << var.error()

// Diagnostics produced while reading configuration: each names where the
// problem is (file, line, column; or the environment / command line) and
// what to do about it. Parsing never throws on bad input; it reports here.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace siphon::compat {

enum class Severity : unsigned char { note, warning, error };

std::string_view to_string(Severity s) noexcept;

/// Where a value or a problem comes from. `line == 0` means "no position"
/// (the whole file, the environment or the command line).
struct Location {
  std::string file;     // a path, "CEPH_ARGS" or "command line"
  unsigned line = 0;    // 1-based
  unsigned column = 0;  // 1-based, in characters (UTF-8 code points)

  /// "prod.conf:12:5", "prod.conf:12", "prod.conf", "CEPH_ARGS".
  std::string to_string() const;
};

struct Diagnostic {
  Severity severity = Severity::error;
  Location where;
  std::string message;

  /// "prod.conf:12:5: error: <message>" (the compiler convention).
  std::string to_string() const;
};

/// An ordered list of diagnostics. Not thread-safe.
class Diagnostics {
 public:
  void add(Severity s, Location where, std::string message);
  void error(Location where, std::string message) { add(Severity::error, std::move(where), std::move(message)); }
  void warning(Location where, std::string message) { add(Severity::warning, std::move(where), std::move(message)); }
  void note(Location where, std::string message) { add(Severity::note, std::move(where), std::move(message)); }
  void append(const Diagnostics& other);

  bool has_errors() const noexcept { return errors_ > 0; }
  std::size_t error_count() const noexcept { return errors_; }
  std::size_t warning_count() const noexcept { return warnings_; }
  bool empty() const noexcept { return list_.empty(); }
  const std::vector<Diagnostic>& all() const noexcept { return list_; }

  /// Every diagnostic of at least `min` severity, one per line.
  std::string to_string(Severity min = Severity::note) const;

 private:
  std::vector<Diagnostic> list_;
  std::size_t errors_ = 0;
  std::size_t warnings_ = 0;
};

}  // namespace siphon::compat

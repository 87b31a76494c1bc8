#include "compat/diagnostics.h"

#include <fmt/format.h>

namespace siphon::compat {

std::string_view to_string(Severity s) noexcept {
  switch (s) {
    case Severity::note: return "note";
    case Severity::warning: return "warning";
    case Severity::error: return "error";
  }
  return "?";
}

std::string Location::to_string() const {
  if (line == 0) return file;
  if (column == 0) return fmt::format("{}:{}", file, line);
  return fmt::format("{}:{}:{}", file, line, column);
}

std::string Diagnostic::to_string() const {
  const std::string where_text = where.to_string();
  if (where_text.empty()) return fmt::format("{}: {}", compat::to_string(severity), message);
  return fmt::format("{}: {}: {}", where_text, compat::to_string(severity), message);
}

void Diagnostics::add(Severity s, Location where, std::string message) {
  if (s == Severity::error) ++errors_;
  if (s == Severity::warning) ++warnings_;
  list_.push_back(Diagnostic{s, std::move(where), std::move(message)});
}

void Diagnostics::append(const Diagnostics& other) {
  for (const auto& d : other.all()) add(d.severity, d.where, d.message);
}

std::string Diagnostics::to_string(Severity min) const {
  std::string out;
  for (const auto& d : list_) {
    if (d.severity < min) continue;
    out += d.to_string();
    out += '\n';
  }
  return out;
}

}  // namespace siphon::compat

// Helpers for the compat tests.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "compat/diagnostics.h"

namespace siphon::compat::test {

inline std::string corpus(std::string_view rel) { return std::string(SIPHON_COMPAT_CORPUS) + "/" + std::string(rel); }

inline std::string read_corpus(std::string_view rel) {
  std::ifstream in(corpus(rel), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The first diagnostic of `severity` whose message contains `text`, or null.
inline const Diagnostic* find_diag(const Diagnostics& d, Severity severity, std::string_view text) {
  for (const auto& x : d.all())
    if (x.severity == severity && x.message.find(text) != std::string::npos) return &x;
  return nullptr;
}

/// Asserts a diagnostic of `severity` at line:column whose message contains `text`.
inline ::testing::AssertionResult has_diag(const Diagnostics& d, Severity severity, unsigned line,
                                           unsigned column, std::string_view text) {
  for (const auto& x : d.all())
    if (x.severity == severity && x.where.line == line && (column == 0 || x.where.column == column) &&
        x.message.find(text) != std::string::npos)
      return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no " << to_string(severity) << " at " << line << ":" << column
                                       << " containing '" << text << "' in:\n" << d.to_string();
}

}  // namespace siphon::compat::test

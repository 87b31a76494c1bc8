// ceph.conf parsing with Ceph's rules (src/common/ConfUtils.cc, checked
// against Ceph 16.2's ceph-conf). docs/configuration.md §"File syntax" has
// the full list; in short:
//
//   [global]                      section headers start in column 1
//   ms type = async+rdma   # c    names: surrounding space trimmed, each run
//   ms_crc_data = "true" ; c      of whitespace is one '_'; '#' and ';'
//   log file = /var/log/x \       start comments (also after a value);
//       continued                 "..." and '...' quote; \c escapes c; a
//                                 trailing backslash joins the next line.
//
// A key repeated in a section (also across repeated headers) keeps its last
// value. Beyond Ceph, Siphon tolerates a UTF-8 byte-order mark, a missing
// final newline and keys before the first header (put in [global]), each
// with a warning. Every problem is a Diagnostic with file, line and column;
// nothing here throws on bad input.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compat/diagnostics.h"

namespace siphon::compat {

/// One `key = value` line.
struct ConfEntry {
  std::string section;    // the header it is under ("global" before any header)
  std::string key;        // normalised (see ConfFile::normalize_key)
  std::string raw_key;    // as written
  std::string value;      // quotes removed, escapes resolved, trimmed
  Location where;         // position of the key
  unsigned value_column = 0;
};

struct SectionHeader {
  std::string name;  // between the brackets, escapes resolved, not trimmed (as Ceph)
  Location where;
};

class ConfFile {
 public:
  ConfFile() = default;

  /// Parses `text` (the file's bytes); `path` names it in diagnostics. On a
  /// syntax error the rest of the file is still read to report more errors,
  /// but `ok()` is false (Ceph rejects such a file as a whole).
  static ConfFile parse(std::string_view text, std::string path, Diagnostics& diags);

  /// Reads and parses a file. Returns nullopt without a diagnostic when the
  /// file cannot be opened (`*os_error` = errno, so a search list can try the
  /// next); a file that opens but cannot be read, is a directory or is too
  /// large returns nullopt with an error diagnostic and `*os_error` = 0.
  static std::optional<ConfFile> read(const std::string& path, Diagnostics& diags,
                                      int* os_error = nullptr);

  const std::string& path() const noexcept { return path_; }
  bool ok() const noexcept { return ok_; }

  /// The value in force for `key` (normalised first) in `section`: the last
  /// line that sets it. nullptr when the section does not set it.
  const ConfEntry* find(std::string_view section, std::string_view key) const;
  /// The first of `sections` (highest priority first) that sets `key`.
  const ConfEntry* lookup(std::span<const std::string> sections, std::string_view key) const;

  /// Every line that sets a key, in file order (including overridden ones).
  const std::vector<ConfEntry>& entries() const noexcept { return entries_; }
  /// Every section header, in file order (a repeated header appears twice).
  const std::vector<SectionHeader>& headers() const noexcept { return headers_; }
  /// Distinct section names, sorted (as `ceph-conf -L` lists them).
  std::vector<std::string> section_names() const;

  /// Ceph's key normal form: leading and trailing whitespace removed and each
  /// run of whitespace replaced by one '_'. "ms  type" -> "ms_type", but
  /// "ms _type" -> "ms__type" and dashes stay dashes (as in Ceph's files).
  static std::string normalize_key(std::string_view key);

 private:
  friend class ConfParser;
  std::string path_;
  bool ok_ = true;
  std::vector<ConfEntry> entries_;
  std::vector<SectionHeader> headers_;
  // section -> normalised key -> index into entries_ of the line in force.
  std::map<std::string, std::map<std::string, std::size_t, std::less<>>, std::less<>> index_;
};

}  // namespace siphon::compat

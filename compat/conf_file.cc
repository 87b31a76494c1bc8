#include "compat/conf_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

namespace siphon::compat {
namespace {

// Ceph refuses files over 1 GiB; a ceph.conf is a few kilobytes, and a
// smaller cap keeps a mistaken path (a disk image) from eating memory.
constexpr std::size_t kMaxFileSize = 64u << 20;

bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_blank(char c) noexcept { return c == ' ' || c == '\t'; }
bool is_comment_start(char c) noexcept { return c == '#' || c == ';'; }

std::string trim(std::string_view s) {
  std::size_t b = 0;
  std::size_t e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// Returns the offset of the first byte that is not valid UTF-8 (overlong
// forms, surrogates and code points past U+10FFFF are invalid), or npos.
std::size_t first_invalid_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = 0;
    std::uint32_t cp = 0;
    std::uint32_t min = 0;
    if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return i;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return i;
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n + 1;
  }
  return std::string_view::npos;
}

}  // namespace

// A hand-written scanner for Ceph's ceph.conf grammar. It works on the raw
// bytes, tracks line and column, and reports each problem where it is.
class ConfParser {
 public:
  ConfParser(std::string_view text, ConfFile& out, Diagnostics& diags)
      : s_(text), out_(out), diags_(diags) {}

  void run() {
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") {
      diags_.warning(Location{out_.path_, 1, 1},
                     "UTF-8 byte-order mark ignored (Ceph 16's ceph-conf aborts on it)");
      i_ = line_start_ = 3;
    }
    if (const auto bad = first_invalid_utf8(s_); bad != std::string_view::npos) {
      locate(bad);
      fail(here(), fmt::format("invalid UTF-8 (byte 0x{:02x}); Ceph rejects the whole file",
                               static_cast<unsigned char>(s_[bad])));
      return;
    }
    if (const auto nul = s_.find('\0'); nul != std::string_view::npos) {
      locate(nul);
      fail(here(), "NUL byte in the file; is this a ceph.conf?");
      return;
    }
    while (!eof()) parse_line();
    if (!s_.empty() && s_.back() != '\n' && s_.back() != '\r')
      diags_.warning(Location{out_.path_, line_, 0},
                     "no newline at the end of the file (Ceph rejects such a file)");
    else if (ends_in_continuation_)
      diags_.warning(Location{out_.path_, line_ - 1, 0},
                     "the file ends with a continuation backslash, so its last line has no end "
                     "(Ceph rejects such a file)");
  }

 private:
  // --- cursor ---------------------------------------------------------
  bool eof() const noexcept { return i_ >= s_.size(); }
  char peek(std::size_t k = 0) const noexcept { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  std::size_t eol_len(std::size_t at) const noexcept {
    if (at >= s_.size()) return 0;
    if (s_[at] == '\r') return at + 1 < s_.size() && s_[at + 1] == '\n' ? 2 : 1;
    return s_[at] == '\n' ? 1 : 0;
  }
  bool at_eol() const noexcept { return eol_len(i_) > 0; }
  bool continuation_here() const noexcept { return peek() == '\\' && eol_len(i_ + 1) > 0; }
  void next() noexcept { ++i_; }
  void newline() noexcept {
    i_ += eol_len(i_);
    ++line_;
    line_start_ = i_;
  }
  void skip_continuation() noexcept {
    ++i_;  // the backslash
    newline();
    if (eof()) ends_in_continuation_ = true;
  }
  // `\x` (x not a line end): appends x to `out`. False, nothing read, otherwise.
  bool take_escape(std::string& out) {
    if (peek() != '\\' || i_ + 1 >= s_.size() || eol_len(i_ + 1) != 0) return false;
    next();
    out += peek();
    next();
    return true;
  }
  // As take_escape, and skips a line continuation ('\' ending a line).
  bool take_continuation_or_escape(std::string& out) {
    if (!continuation_here()) return take_escape(out);
    skip_continuation();
    return true;
  }
  void skip_to_eol() noexcept {
    while (!eof() && !at_eol()) next();
  }
  void skip_line() noexcept {
    skip_to_eol();
    if (!eof()) newline();
  }
  void skip_blanks() noexcept {
    while (!eof() && is_blank(peek())) next();
  }
  void skip_blanks_and_continuations() noexcept {
    for (;;) {
      skip_blanks();
      if (!continuation_here()) return;
      skip_continuation();
    }
  }
  // Column of byte `at` on the current line: 1 + code points before it.
  unsigned column_of(std::size_t at) const noexcept {
    unsigned col = 1;
    for (std::size_t k = line_start_; k < at && k < s_.size(); ++k)
      if ((static_cast<unsigned char>(s_[k]) & 0xC0) != 0x80) ++col;
    return col;
  }
  Location here() const { return Location{out_.path_, line_, column_of(i_)}; }
  // Moves the line bookkeeping to byte `at` (used before the scan starts).
  void locate(std::size_t at) noexcept {
    for (std::size_t k = i_; k < at;) {
      const std::size_t n = eol_len(k);
      if (n > 0) {
        k += n;
        ++line_;
        line_start_ = k;
      } else {
        ++k;
      }
    }
    i_ = at;
  }
  void fail(Location where, std::string message) {
    out_.ok_ = false;
    diags_.error(std::move(where), std::move(message));
  }

  // --- grammar ----------------------------------------------------------
  void parse_line() {
    if (at_eol()) {
      newline();
      return;
    }
    if (peek() == '[') {
      parse_header();
      return;
    }
    // Blanks before a '[' make it an indented header (an error, as in Ceph);
    // a line holding only a continuation backslash does not.
    bool indented = false;
    for (;;) {
      const std::size_t before = i_;
      skip_blanks();
      indented = indented || i_ != before;
      if (!continuation_here()) break;
      skip_continuation();
    }
    if (eof()) return;
    if (at_eol()) {
      newline();
      return;
    }
    const char c = peek();
    if (is_comment_start(c)) {
      skip_line();
      return;
    }
    if (c == '[') {
      if (!indented) {
        parse_header();
        return;
      }
      fail(here(), "a section header must start in the first column (Ceph rejects an indented '[')");
      skip_line();
      return;
    }
    parse_key_value();
  }

  void parse_header() {
    const Location open = here();
    next();  // '['
    std::string name;
    for (;;) {
      if (eof() || at_eol()) {
        fail(here(), "missing ']' to close the section header");
        skip_line();
        return;
      }
      const char c = peek();
      if (c == ']') {
        next();
        break;
      }
      if (take_continuation_or_escape(name)) continue;
      if (is_comment_start(c)) {
        fail(here(), fmt::format("'{0}' in a section name starts a comment (Ceph rejects it); "
                                 "write \\{0} for a literal '{0}'", c));
        skip_line();
        return;
      }
      name += c;
      next();
    }
    if (name.empty()) {
      fail(open, "empty section name '[]'");
      skip_line();
      return;
    }
    if (!finish_line("section header")) return;
    section_ = name;
    in_section_ = true;
    out_.headers_.push_back(SectionHeader{name, open});
  }

  // After a header or a quoted value: blanks, an optional comment, then the
  // end of the line. Returns false (after reporting) on anything else.
  bool finish_line(std::string_view what) {
    skip_blanks_and_continuations();
    if (!eof() && is_comment_start(peek())) skip_to_eol();
    if (eof()) return true;
    if (at_eol()) {
      newline();
      return true;
    }
    fail(here(), fmt::format("unexpected text after the {}; only a comment ('#' or ';') may follow",
                             what));
    skip_line();
    return false;
  }

  void parse_key_value() {
    const Location key_loc = here();
    const std::size_t key_start = i_;
    std::size_t key_end = i_;
    for (;;) {
      if (eof() || at_eol()) {
        fail(here(), fmt::format("expected '=' after '{}'",
                                 std::string_view(s_).substr(key_start, key_end - key_start)));
        skip_line();
        return;
      }
      const char c = peek();
      if (c == '=') break;
      if (c == '[') {
        fail(here(), "'[' is not allowed in an option name");
        skip_line();
        return;
      }
      if (is_comment_start(c)) {
        fail(here(), fmt::format("expected '=' after '{}' before the comment",
                                 std::string_view(s_).substr(key_start, key_end - key_start)));
        skip_line();
        return;
      }
      if (continuation_here()) {
        skip_continuation();
        continue;
      }
      if (c == '\\' && i_ + 1 < s_.size() && eol_len(i_ + 1) == 0) next();  // escaped char, kept raw
      next();
      if (!is_blank(c)) key_end = i_;
    }
    const std::string raw_key(s_.substr(key_start, key_end - key_start));
    if (raw_key.empty()) {
      fail(key_loc, "missing option name before '='");
      skip_line();
      return;
    }
    next();  // '='
    skip_blanks_and_continuations();
    const unsigned value_column = column_of(i_);
    std::optional<std::string> value;
    if (!eof() && (peek() == '"' || peek() == '\'')) {
      value = parse_quoted(peek());
    } else {
      value = parse_unquoted();
    }
    if (!value) return;
    add_entry(raw_key, std::move(*value), key_loc, value_column);
  }

  std::optional<std::string> parse_quoted(char quote) {
    const Location open = here();
    next();
    std::string v;
    for (;;) {
      if (eof() || at_eol()) {
        fail(open, fmt::format("missing closing {} for this quoted value (a quoted value ends on its line)",
                               quote));
        skip_line();
        return std::nullopt;
      }
      const char c = peek();
      if (c == quote) {
        next();
        break;
      }
      if (take_escape(v)) continue;
      if (is_comment_start(c)) {
        fail(here(), fmt::format("'{0}' inside a quoted value starts a comment in Ceph's grammar; "
                                 "write \\{0} for a literal '{0}'", c));
        skip_line();
        return std::nullopt;
      }
      v += c;
      next();
    }
    if (!finish_line("closing quote")) return std::nullopt;
    return trim(v);
  }

  std::string parse_unquoted() {
    std::string v;
    while (!eof() && !at_eol()) {
      const char c = peek();
      if (is_comment_start(c)) {
        skip_to_eol();
        break;
      }
      if (take_continuation_or_escape(v)) continue;
      v += c;
      next();
    }
    if (!eof()) newline();
    return trim(v);
  }

  void add_entry(const std::string& raw_key, std::string value, const Location& where,
                 unsigned value_column) {
    if (!in_section_ && !warned_outside_) {
      warned_outside_ = true;
      diags_.warning(where, "option set before any section header; Siphon puts it in [global] "
                            "(Ceph accepts this only when it is the file's only line)");
    }
    ConfEntry e;
    e.section = in_section_ ? section_ : "global";
    e.key = ConfFile::normalize_key(raw_key);
    e.raw_key = raw_key;
    e.value = std::move(value);
    e.where = where;
    e.value_column = value_column;
    auto& keys = out_.index_[e.section];
    const std::size_t idx = out_.entries_.size();
    if (auto it = keys.find(e.key); it != keys.end()) {
      const ConfEntry& prev = out_.entries_[it->second];
      diags_.warning(where, fmt::format("'{}' is set again in [{}] (before: line {}); the last value wins",
                                        e.key, e.section, prev.where.line));
      it->second = idx;
    } else {
      keys.emplace(e.key, idx);
    }
    out_.entries_.push_back(std::move(e));
  }

  std::string_view s_;
  ConfFile& out_;
  Diagnostics& diags_;
  std::size_t i_ = 0;
  std::size_t line_start_ = 0;
  unsigned line_ = 1;
  std::string section_;
  bool in_section_ = false;
  bool warned_outside_ = false;
  bool ends_in_continuation_ = false;
};

ConfFile ConfFile::parse(std::string_view text, std::string path, Diagnostics& diags) {
  ConfFile f;
  f.path_ = std::move(path);
  ConfParser(text, f, diags).run();
  return f;
}

std::optional<ConfFile> ConfFile::read(const std::string& path, Diagnostics& diags, int* os_error) {
  struct Closer {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };
  if (os_error != nullptr) *os_error = 0;
  std::unique_ptr<std::FILE, Closer> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    if (os_error != nullptr) *os_error = errno;
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(::fileno(file.get()), &st) == 0 && S_ISDIR(st.st_mode)) {
    diags.error(Location{path, 0, 0}, "is a directory, not a configuration file");
    return std::nullopt;
  }
  std::string text;
  char buf[16384];
  for (;;) {
    const std::size_t n = std::fread(buf, 1, sizeof(buf), file.get());
    text.append(buf, n);
    if (text.size() > kMaxFileSize) {
      diags.error(Location{path, 0, 0},
                  fmt::format("larger than {} MiB; is this a configuration file?", kMaxFileSize >> 20));
      return std::nullopt;
    }
    if (n < sizeof(buf)) break;
  }
  if (std::ferror(file.get())) {
    diags.error(Location{path, 0, 0}, fmt::format("read error: {}", std::strerror(errno)));
    return std::nullopt;
  }
  return parse(text, path, diags);
}

const ConfEntry* ConfFile::find(std::string_view section, std::string_view key) const {
  const auto s = index_.find(section);
  if (s == index_.end()) return nullptr;
  const auto k = s->second.find(normalize_key(key));
  return k == s->second.end() ? nullptr : &entries_[k->second];
}

const ConfEntry* ConfFile::lookup(std::span<const std::string> sections, std::string_view key) const {
  for (const auto& s : sections)
    if (const ConfEntry* e = find(s, key)) return e;
  return nullptr;
}

std::vector<std::string> ConfFile::section_names() const {
  std::vector<std::string> names;
  names.reserve(index_.size() + headers_.size());
  for (const auto& [name, keys] : index_) names.push_back(name);
  for (const auto& h : headers_) names.push_back(h.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string ConfFile::normalize_key(std::string_view key) {
  std::string out;
  std::size_t b = 0;
  std::size_t e = key.size();
  while (b < e && is_space(key[b])) ++b;
  while (e > b && is_space(key[e - 1])) --e;
  bool in_space = false;
  for (std::size_t i = b; i < e; ++i) {
    if (is_space(key[i])) {
      if (!in_space) out += '_';
      in_space = true;
    } else {
      out += key[i];
      in_space = false;
    }
  }
  return out;
}

}  // namespace siphon::compat

// ceph.conf syntax: each rule, as Ceph 16.2's ceph-conf applies it (the same
// files are compared with ceph-conf by the ctest siphon_conf_vs_ceph_conf).
#include "compat/conf_file.h"

#include <gtest/gtest.h>

#include <array>
#include <cerrno>

#include "test_util.h"

namespace siphon::compat {
namespace {

using test::has_diag;

std::string value_of(const ConfFile& f, std::string_view section, std::string_view key) {
  const ConfEntry* e = f.find(section, key);
  return e != nullptr ? e->value : "<unset>";
}

ConfFile parse_ok(std::string_view text, Diagnostics& d) {
  ConfFile f = ConfFile::parse(text, "t.conf", d);
  EXPECT_TRUE(f.ok()) << d.to_string();
  EXPECT_FALSE(d.has_errors()) << d.to_string();
  return f;
}

TEST(ConfFile, BasicCorpusFollowsCephsRules) {
  Diagnostics d;
  const ConfFile f = ConfFile::parse(test::read_corpus("basic.conf"), "basic.conf", d);
  ASSERT_TRUE(f.ok()) << d.to_string();
  EXPECT_EQ(value_of(f, "global", "mon_host"), "10.0.0.1, 10.0.0.2");       // "mon host" is mon_host
  EXPECT_EQ(value_of(f, "global", "ms_type"), "async+posix");              // ; comment after a value
  EXPECT_EQ(value_of(f, "global", "ms_async_op_threads"), "2");            // tabs around everything
  EXPECT_EQ(value_of(f, "global", "ms_crc_data"), "true");                 // "ms  crc   data"
  EXPECT_EQ(value_of(f, "global", "ms_bind_port_min"), "6900");            // no spaces around '='
  EXPECT_EQ(value_of(f, "global", "auth_client_required"), "cephx, none");  // double quotes
  EXPECT_EQ(value_of(f, "global", "auth_service_required"), "cephx, none");  // single quotes
  EXPECT_EQ(value_of(f, "global", "public_network"), "10.0.0.0/24     , 10.1.0.0/24");  // continuation
  EXPECT_EQ(value_of(f, "global", "escaped"), "a#b;c\\d");
  EXPECT_EQ(value_of(f, "global", "quoted_escape"), "say \"hi\"");
  EXPECT_EQ(value_of(f, "global", "empty_value"), "");
  EXPECT_EQ(value_of(f, "global", "empty_quoted"), "");
  EXPECT_EQ(value_of(f, "global", "spaced_quoted"), "inner  spaces");      // quoted values are trimmed too
  EXPECT_EQ(value_of(f, "global", "value_with_equals"), "a = b");
  EXPECT_EQ(value_of(f, "global", "ms-dashed"), "dashes are not underscores in a file");
  EXPECT_EQ(value_of(f, "global", "ms_dashed"), "<unset>");
  EXPECT_EQ(value_of(f, "global", "ms__type"), "a space next to an underscore is a second underscore");
  EXPECT_EQ(value_of(f, "global", "repeated"), "third");  // last wins, across repeated [global]
  EXPECT_EQ(value_of(f, "osd", "ms_type"), "async+rdma");
  EXPECT_EQ(value_of(f, "osd.1", "ms_type"), "async+posix");
  EXPECT_EQ(value_of(f, "client.rgw.gw1", "ms_type"), "async");
  // Two warnings for 'repeated', naming the earlier line.
  EXPECT_TRUE(has_diag(d, Severity::warning, 26, 1, "'repeated' is set again in [global] (before: line 25)"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 43, 1, "(before: line 26)"));
  EXPECT_EQ(f.section_names(), (std::vector<std::string>{"client.rgw.gw1", "global", "mon", "osd", "osd.1"}));
}

TEST(ConfFile, LookupFollowsTheSectionList) {
  Diagnostics d;
  const ConfFile f = ConfFile::parse(test::read_corpus("basic.conf"), "basic.conf", d);
  const std::array<std::string, 3> osd1{"osd.1", "osd", "global"};
  const std::array<std::string, 3> osd2{"osd.2", "osd", "global"};
  const std::array<std::string, 3> mon{"mon.a", "mon", "global"};
  EXPECT_EQ(f.lookup(osd1, "ms_type")->value, "async+posix");
  EXPECT_EQ(f.lookup(osd2, "ms_type")->value, "async+rdma");
  EXPECT_EQ(f.lookup(mon, "ms_type")->value, "async+posix");
  EXPECT_EQ(f.lookup(mon, "ms bind port min")->value, "3300");  // the key is normalised too
  EXPECT_EQ(f.lookup(mon, "no_such_key"), nullptr);
  const ConfEntry* e = f.lookup(osd2, "ms_async_rdma_device_name");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->section, "osd");
  EXPECT_EQ(e->where.line, 30u);
  EXPECT_EQ(e->where.column, 1u);
  EXPECT_EQ(e->value_column, 29u);
}

TEST(ConfFile, KeyNormalisation) {
  EXPECT_EQ(ConfFile::normalize_key("ms type"), "ms_type");
  EXPECT_EQ(ConfFile::normalize_key("  ms \t type  "), "ms_type");
  EXPECT_EQ(ConfFile::normalize_key("ms _type"), "ms__type");
  EXPECT_EQ(ConfFile::normalize_key("ms-type"), "ms-type");
  EXPECT_EQ(ConfFile::normalize_key("MS_TYPE"), "MS_TYPE");
  EXPECT_EQ(ConfFile::normalize_key(""), "");
}

TEST(ConfFile, CommentsAnywhereButInsideAValue) {
  Diagnostics d;
  const ConfFile f = parse_ok("# top\n; top\n[global] # after a header\n  ; indented\n"
                              "a = x#y\nb = x;y\nc = \"x\" # after quotes\nd = x \\# y\n", d);
  EXPECT_EQ(value_of(f, "global", "a"), "x");
  EXPECT_EQ(value_of(f, "global", "b"), "x");
  EXPECT_EQ(value_of(f, "global", "c"), "x");
  EXPECT_EQ(value_of(f, "global", "d"), "x # y");
}

TEST(ConfFile, QuotesAndEscapes) {
  Diagnostics d;
  const ConfFile f = parse_ok("[global]\nb = a\"b\"c\nc = \"\\\"q\\\"\"\nd = a\\ \ne = \\ \\ x\n"
                              "f = \"a\\#b\"\n", d);
  EXPECT_EQ(value_of(f, "global", "b"), "a\"b\"c");  // quotes inside a value are literal
  EXPECT_EQ(value_of(f, "global", "c"), "\"q\"");
  EXPECT_EQ(value_of(f, "global", "d"), "a");        // an escaped trailing space is still trimmed
  EXPECT_EQ(value_of(f, "global", "e"), "x");
  EXPECT_EQ(value_of(f, "global", "f"), "a#b");
}

TEST(ConfFile, ContinuationLines) {
  Diagnostics d;
  const ConfFile f = parse_ok("[glo\\\nbal]\na = one \\\n  two\nb = x \\\n# now a comment\nc = \\\n  z\n"
                              "\\\nd = after a lone backslash line\ne = \"q\" \\\n\n", d);
  EXPECT_EQ(value_of(f, "global", "a"), "one   two");  // the next line's indentation is kept
  EXPECT_EQ(value_of(f, "global", "b"), "x");
  EXPECT_EQ(value_of(f, "global", "c"), "z");
  EXPECT_EQ(value_of(f, "global", "d"), "after a lone backslash line");
  EXPECT_EQ(value_of(f, "global", "e"), "q");
  const ConfEntry* c = f.find("global", "c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->where.line, 7u);
}

TEST(ConfFile, AContinuationLineBeforeAHeader) {
  Diagnostics d;
  const ConfFile f = ConfFile::parse(test::read_corpus("continuation-edge.conf"), "c.conf", d);
  ASSERT_TRUE(f.ok()) << d.to_string();
  EXPECT_EQ(value_of(f, "global", "a"), "1");
  EXPECT_EQ(value_of(f, "osd", "a"), "2");
  EXPECT_EQ(value_of(f, "osd", "b"), "3");
}

TEST(ConfFile, SectionNamesAreNotTrimmedAndMayEscape) {
  Diagnostics d;
  const ConfFile f = parse_ok("[ global ]\na = 1\n[os\\]d]\nb = 2\n", d);
  EXPECT_EQ(value_of(f, " global ", "a"), "1");
  EXPECT_EQ(value_of(f, "global", "a"), "<unset>");
  EXPECT_EQ(value_of(f, "os]d", "b"), "2");
}

TEST(ConfFile, LineEndings) {
  for (const char* name : {"crlf.conf", "cr.conf"}) {
    Diagnostics d;
    const ConfFile f = ConfFile::parse(test::read_corpus(name), name, d);
    ASSERT_TRUE(f.ok()) << name << d.to_string();
    EXPECT_EQ(value_of(f, "global", "ms_type"), "async+rdma") << name;
    EXPECT_EQ(value_of(f, "global", "foo"), "bar") << name;
    EXPECT_TRUE(d.empty()) << d.to_string();
  }
  Diagnostics d;
  const ConfFile f = ConfFile::parse(test::read_corpus("crlf.conf"), "crlf.conf", d);
  EXPECT_EQ(value_of(f, "osd", "foo"), "baz");
  EXPECT_EQ(f.find("osd", "foo")->where.line, 6u);
}

TEST(ConfFile, SiphonToleratesWhatCephRejectsWithAWarning) {
  {
    Diagnostics d;
    const ConfFile f = ConfFile::parse(test::read_corpus("siphon-only/bom.conf"), "bom.conf", d);
    EXPECT_TRUE(f.ok());
    EXPECT_EQ(value_of(f, "global", "ms_type"), "async+rdma");
    EXPECT_TRUE(has_diag(d, Severity::warning, 1, 1, "byte-order mark"));
    EXPECT_EQ(f.headers().at(0).where.column, 1u);  // columns count from after the mark
  }
  {
    Diagnostics d;
    const ConfFile f = ConfFile::parse(test::read_corpus("siphon-only/no-final-newline.conf"), "n.conf", d);
    EXPECT_TRUE(f.ok());
    EXPECT_EQ(value_of(f, "global", "ms_type"), "async+rdma");
    EXPECT_TRUE(has_diag(d, Severity::warning, 2, 0, "no newline at the end"));
  }
  {
    Diagnostics d;
    const ConfFile f = ConfFile::parse(test::read_corpus("siphon-only/final-continuation.conf"), "f.conf", d);
    EXPECT_TRUE(f.ok());
    EXPECT_EQ(value_of(f, "global", "ms_type"), "async+rdma");
    EXPECT_TRUE(has_diag(d, Severity::warning, 2, 0, "ends with a continuation backslash"));
  }
  {
    Diagnostics d;
    const ConfFile f = ConfFile::parse(test::read_corpus("siphon-only/keys-before-section.conf"), "k.conf", d);
    EXPECT_TRUE(f.ok());
    EXPECT_EQ(value_of(f, "global", "ms_type"), "async+rdma");
    EXPECT_EQ(value_of(f, "global", "ms_crc_data"), "false");
    EXPECT_EQ(value_of(f, "osd", "ms_type"), "async");
    EXPECT_TRUE(has_diag(d, Severity::warning, 1, 1, "before any section header"));
    EXPECT_EQ(d.warning_count(), 1u);  // once per file
  }
  {
    Diagnostics d;
    const ConfFile f = ConfFile::parse(test::read_corpus("siphon-only/utf8-value.conf"), "u.conf", d);
    EXPECT_TRUE(f.ok());
    EXPECT_EQ(value_of(f, "global", "ms_async_rdma_device_name"), "caf\xc3\xa9");
  }
  {
    Diagnostics d;  // A single key outside any section: Ceph puts it in [global] too.
    const ConfFile f = ConfFile::parse(test::read_corpus("topkey.conf"), "topkey.conf", d);
    EXPECT_EQ(value_of(f, "global", "ms_type"), "async+rdma");
  }
}

struct Malformed {
  const char* file;
  unsigned line;
  unsigned column;
  const char* message;
};

class MalformedFile : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedFile, IsAnErrorAtLineAndColumn) {
  const Malformed& m = GetParam();
  Diagnostics d;
  const std::string name = std::string("malformed/") + m.file;
  const ConfFile f = ConfFile::parse(test::read_corpus(name), name, d);
  EXPECT_FALSE(f.ok());
  EXPECT_TRUE(has_diag(d, Severity::error, m.line, m.column, m.message));
  ASSERT_FALSE(d.all().empty());
  EXPECT_EQ(d.all().front().where.file, name);
  // The rendering names the file, line and column.
  const std::string text = d.to_string();
  EXPECT_NE(text.find(name + ":" + std::to_string(m.line) + ":" + std::to_string(m.column) + ": error: "),
            std::string::npos) << text;
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, MalformedFile,
    ::testing::Values(Malformed{"unterminated-quote.conf", 2, 11, "missing closing \""},
                      Malformed{"missing-bracket.conf", 1, 8, "missing ']'"},
                      Malformed{"indented-header.conf", 3, 3, "must start in the first column"},
                      Malformed{"no-equals.conf", 2, 14, "expected '=' after 'ms_type async'"},
                      Malformed{"bracket-in-key.conf", 2, 3, "'[' is not allowed in an option name"},
                      Malformed{"junk-after-quote.conf", 2, 19, "unexpected text after the closing quote"},
                      Malformed{"junk-after-header.conf", 1, 10, "unexpected text after the section header"},
                      Malformed{"comment-in-quotes.conf", 2, 22, "inside a quoted value starts a comment"},
                      Malformed{"empty-section.conf", 1, 1, "empty section name"},
                      Malformed{"invalid-utf8.conf", 2, 16, "invalid UTF-8 (byte 0xff)"},
                      Malformed{"empty-key.conf", 2, 1, "missing option name before '='"},
                      Malformed{"indented-continued-header.conf", 4, 1, "must start in the first column"}),
    [](const auto& param_info) {
      std::string n = param_info.param.file;
      n = n.substr(0, n.find('.'));
      for (auto& c : n)
        if (c == '-') c = '_';
      return n;
    });

TEST(ConfFile, ReportsEveryErrorAndKeepsTheRest) {
  Diagnostics d;
  const ConfFile f = ConfFile::parse("[global]\na = \"x\nb = 2\n[bad\nc = 3\n  [x]\nd = 4\n", "m.conf", d);
  EXPECT_FALSE(f.ok());
  EXPECT_EQ(d.error_count(), 3u) << d.to_string();
  EXPECT_EQ(value_of(f, "global", "b"), "2");
  EXPECT_EQ(value_of(f, "global", "d"), "4");
}

TEST(ConfFile, ColumnsCountCharactersNotBytes) {
  Diagnostics d;
  ConfFile::parse("[global]\nk = \"\xc3\xa9\xc3\xa9 # x\"\n", "c.conf", d);
  EXPECT_TRUE(has_diag(d, Severity::error, 2, 9, "starts a comment"));
}

TEST(ConfFile, ReadsFilesAndReportsWhyNot) {
  Diagnostics d;
  int err = 0;
  EXPECT_FALSE(ConfFile::read(test::corpus("does-not-exist.conf"), d, &err).has_value());
  EXPECT_EQ(err, ENOENT);
  EXPECT_TRUE(d.empty());
  EXPECT_FALSE(ConfFile::read(test::corpus("malformed"), d, &err).has_value());
  EXPECT_EQ(err, 0);
  EXPECT_NE(test::find_diag(d, Severity::error, "is a directory"), nullptr);
  Diagnostics d2;
  const auto f = ConfFile::read(test::corpus("basic.conf"), d2, &err);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->path(), test::corpus("basic.conf"));
  EXPECT_EQ(value_of(*f, "osd", "ms_type"), "async+rdma");
}

TEST(ConfFile, EmptyAndCommentOnlyFilesAreValid) {
  for (const char* text : {"", "\n", "# only a comment\n", "\n\n; x\n\n"}) {
    Diagnostics d;
    const ConfFile f = ConfFile::parse(text, "e.conf", d);
    EXPECT_TRUE(f.ok()) << text;
    EXPECT_TRUE(f.entries().empty());
    EXPECT_FALSE(d.has_errors());
  }
}

}  // namespace
}  // namespace siphon::compat

// Config: precedence and sources, sections, $ expansion, diagnostics, the
// command line and environment, and the [ms] snippet from issue 8.
#include "compat/config.h"
#include "compat/keyring.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "test_util.h"

namespace siphon::compat {
namespace {

using test::find_diag;
using test::has_diag;

ConfigRequest request(std::string_view name = "client.admin") {
  ConfigRequest req;
  std::string error;
  req.name = *EntityName::parse(name, error);
  req.pid = "4242";
  req.hostname = "node1";
  req.home = "/home/ceph";
  return req;
}

Config load(std::string_view text, std::string_view name, Diagnostics& d, std::string path = "test.conf") {
  return Config::load_text(text, std::move(path), request(name), d);
}

TEST(Config, DefaultsWithoutAFile) {
  Diagnostics d;
  const Config cfg = load("", "client.admin", d);
  EXPECT_FALSE(d.has_errors()) << d.to_string();
  EXPECT_EQ(cfg.get<Opt::ms_type>(), "async+posix");
  EXPECT_EQ(cfg.get<Opt::ms_async_op_threads>(), 3u);
  EXPECT_EQ(cfg.get<Opt::ms_async_rdma_buffer_size>(), 131072u);
  EXPECT_EQ(cfg.get<Opt::ms_dispatch_throttle_bytes>(), 100u << 20);
  EXPECT_DOUBLE_EQ(cfg.get<Opt::ms_initial_backoff>(), 0.2);
  EXPECT_TRUE(cfg.get<Opt::ms_crc_data>());
  EXPECT_FALSE(cfg.get<Opt::public_addr>().is_set());
  EXPECT_TRUE(cfg.get<Opt::fsid>().is_zero());
  EXPECT_EQ(cfg.source(Opt::ms_type).kind, ValueSource::Kind::default_value);
  EXPECT_EQ(cfg.source(Opt::ms_type).to_string(), "default");
  EXPECT_EQ(cfg.value_string(Opt::ms_max_backoff), "15.000000");
  EXPECT_EQ(cfg.ms_types().public_type.stack, MsType::Stack::posix);
  EXPECT_EQ(cfg.debug_ms().log, 0);
}

TEST(Config, SectionPrecedenceGlobalTypeId) {
  const std::string text = test::read_corpus("basic.conf");
  {
    Diagnostics d;
    const Config cfg = load(text, "osd.1", d, "basic.conf");
    EXPECT_FALSE(d.has_errors()) << d.to_string();
    EXPECT_EQ(cfg.get<Opt::ms_type>(), "async+posix");  // [osd.1] beats [osd]
    EXPECT_EQ(cfg.get<Opt::ms_async_rdma_device_name>(), "mlx5_1");
    EXPECT_EQ(cfg.get<Opt::ms_bind_port_min>(), 6900);  // from [global]
    EXPECT_EQ(cfg.get<Opt::ms_async_op_threads>(), 2u);
    EXPECT_EQ(cfg.source(Opt::ms_type).to_string(), "basic.conf:33 [osd.1]");
    EXPECT_EQ(cfg.source(Opt::ms_bind_port_min).to_string(), "basic.conf:12 [global]");
    EXPECT_EQ(cfg.sections(), (std::vector<std::string>{"osd.1", "osd", "global"}));
  }
  {
    Diagnostics d;
    const Config cfg = load(text, "osd.7", d, "basic.conf");
    EXPECT_EQ(cfg.get<Opt::ms_type>(), "async+rdma");  // [osd]
    EXPECT_EQ(cfg.ms_types().cluster_type.stack, MsType::Stack::rdma);
    EXPECT_EQ(cfg.source(Opt::ms_type).section, "osd");
  }
  {
    Diagnostics d;
    const Config cfg = load(text, "mon.a", d, "basic.conf");
    EXPECT_EQ(cfg.get<Opt::ms_type>(), "async+posix");  // [global]
    EXPECT_EQ(cfg.get<Opt::ms_bind_port_min>(), 3300);   // [mon]
  }
  {
    Diagnostics d;
    ConfigRequest req = request("mon.a");
    req.extra_sections = {"osd.1"};  // like ceph-conf -s osd.1
    const Config cfg = Config::load_text(text, "basic.conf", req, d);
    EXPECT_EQ(cfg.get<Opt::ms_async_rdma_device_name>(), "mlx5_1");
    EXPECT_EQ(cfg.sections(), (std::vector<std::string>{"osd.1", "mon.a", "mon", "global"}));
  }
}

TEST(Config, PrecedenceDefaultFileEnvArgv) {
  const std::string text = "[global]\nms_async_op_threads = 4\nms_tcp_nodelay = false\nms_type = async+rdma\n";
  ConfigRequest req = request();
  req.env_overrides = {{Opt::ms_async_op_threads, "5", "--ms_async_op_threads"},
                       {Opt::ms_tcp_nodelay, "true", "--ms_tcp_nodelay"}};
  req.cli_overrides = {{Opt::ms_async_op_threads, "6", "--ms_async_op_threads"}};
  Diagnostics d;
  const Config cfg = Config::load_text(text, "p.conf", req, d);
  EXPECT_FALSE(d.has_errors()) << d.to_string();
  EXPECT_EQ(cfg.get<Opt::ms_async_op_threads>(), 6u);
  EXPECT_EQ(cfg.source(Opt::ms_async_op_threads).to_string(), "command line");
  EXPECT_TRUE(cfg.get<Opt::ms_tcp_nodelay>());
  EXPECT_EQ(cfg.source(Opt::ms_tcp_nodelay).to_string(), "CEPH_ARGS");
  EXPECT_EQ(cfg.get<Opt::ms_type>(), "async+rdma");
  EXPECT_EQ(cfg.source(Opt::ms_type).to_string(), "p.conf:4 [global]");
  EXPECT_EQ(cfg.source(Opt::ms_crc_data).to_string(), "default");
}

TEST(Config, ClusterNameFromTheFile) {
  struct Case {
    const char* path;
    const char* cluster;
    const char* want;
  };
  for (const Case& c : {Case{"prod.conf", "", "prod"}, Case{"/etc/ceph/my.cluster.conf", "", "my.cluster"},
                        Case{"ceph.conf.bak", "", "ceph"}, Case{"noext", "", "ceph"}, Case{"x.CONF", "", "ceph"},
                        Case{"prod.conf", "other", "other"}}) {
    ConfigRequest req = request();
    req.cluster = c.cluster;
    Diagnostics d;
    const Config cfg = Config::load_text("[global]\nms_async_rdma_device_name = $cluster\n", c.path, req, d);
    EXPECT_EQ(cfg.cluster(), c.want) << c.path;
    EXPECT_EQ(cfg.get<Opt::ms_async_rdma_device_name>(), c.want) << c.path;
  }
}

TEST(Config, ExpandsMetavariablesAndOptions) {
  Diagnostics d;
  const Config cfg = Config::load_text(
      "[global]\nms_async_rdma_device_name = $cluster-$type-$id-$name-$host-$pid-$num\n"
      "ms_stack_plugin_dir = $home/lib/${cluster}/$ms_async_rdma_type/$ms_async_op_threads\n"
      "mon_host = $public_network\npublic_network = 10.0.0.0/24\n",
      "prod.conf", request("osd.3"), d);
  EXPECT_FALSE(d.has_errors()) << d.to_string();
  EXPECT_EQ(cfg.get<Opt::ms_async_rdma_device_name>(), "prod-osd-3-osd.3-node1-4242-3");
  EXPECT_EQ(cfg.get<Opt::ms_stack_plugin_dir>(), "/home/ceph/lib/prod/ib/3");
  EXPECT_EQ(cfg.get<Opt::mon_host>(), "10.0.0.0/24");
  EXPECT_EQ(cfg.lookup("ms_stack_plugin_dir"), "/home/ceph/lib/prod/ib/3");
  EXPECT_EQ(cfg.expand("$name on $host"), "osd.3 on node1");
  EXPECT_EQ(cfg.expand("$nope ${nope} $Up $ $$"), "$nope ${nope} $Up $ $$");
  EXPECT_EQ(cfg.expand("x${cluster"), "x$");          // Ceph drops the rest
  EXPECT_EQ(cfg.expand("x${cluster y"), "x$ y");
}

TEST(Config, HostOptionFeedsHost) {
  Diagnostics d;
  const Config cfg = load("[global]\nhost = gw1\nms_async_rdma_device_name = dev-$host\n", "client.admin", d);
  EXPECT_EQ(cfg.get<Opt::ms_async_rdma_device_name>(), "dev-gw1");
}

TEST(Config, ExpansionLoopsAreLeftUnexpandedWithAWarning) {
  Diagnostics d;
  const Config cfg = load("[global]\nms_async_rdma_device_name = $ms_async_rdma_local_gid!\n"
                          "ms_async_rdma_local_gid = $ms_async_rdma_device_name?\n"
                          "ms_stack_plugin_dir = $ms_stack_plugin_dir\n", "client.admin", d);
  // As Ceph: the loop closes with "$name" in place of the whole value.
  EXPECT_EQ(cfg.get<Opt::ms_async_rdma_device_name>(), "$ms_async_rdma_device_name!");
  EXPECT_EQ(cfg.get<Opt::ms_stack_plugin_dir>(), "$ms_stack_plugin_dir");
  EXPECT_EQ(cfg.lookup("ms_async_rdma_device_name"), "$ms_async_rdma_local_gid?!");
  EXPECT_TRUE(has_diag(d, Severity::warning, 2, 1, "variable expansion loop"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 4, 1, "'$ms_stack_plugin_dir' left unexpanded"));
  // ms_async_rdma_local_gid's expanded text is not a GID: an error, default kept.
  EXPECT_TRUE(has_diag(d, Severity::error, 3, 27, "ms_async_rdma_local_gid = $ms_async_rdma_device_name?"));
  EXPECT_EQ(cfg.get<Opt::ms_async_rdma_local_gid>(), "");
}

TEST(Config, UnknownNamesAreWarningsWithSuggestions) {
  Diagnostics d;
  const Config cfg = load("[global]\nms_tpye = async+rdma\nosd_pool_default_size = 3\nkeyring = /k\n"
                          "ms-async-op-threads = 2\n[osd]\nms_async_rdma_devce_name = mlx5_0\n",
                          "osd.0", d);
  EXPECT_FALSE(d.has_errors()) << d.to_string();
  EXPECT_TRUE(has_diag(d, Severity::warning, 2, 1, "unknown option 'ms_tpye'; did you mean 'ms_type'?"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 5, 1, "dashes are not underscores"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 7, 1, "did you mean 'ms_async_rdma_device_name'?"));
  EXPECT_EQ(d.warning_count(), 3u) << d.to_string();  // Ceph's own options are accepted silently
  EXPECT_EQ(cfg.get<Opt::ms_type>(), "async+posix");
}

TEST(Config, InvalidValuesAreErrorsAtTheirPosition) {
  Diagnostics d;
  const Config cfg = load("[global]\nms_crc_data = no\nms_async_op_threads = 99\n"
                          "ms_async_rdma_buffer_size = 128_K\nms_type = async+rdmaa\n"
                          "public_addr = localhost:6789\n", "client.admin", d);
  EXPECT_TRUE(has_diag(d, Severity::error, 2, 15, "ms_crc_data = no: 'no' is not a boolean for Ceph"));
  EXPECT_TRUE(has_diag(d, Severity::error, 3, 23, "ms_async_op_threads = 99: '99' is above the maximum 24 "
                                                  "(accepted: a non-negative integer"));
  EXPECT_TRUE(has_diag(d, Severity::error, 4, 29, "a file must say 128K"));
  EXPECT_TRUE(has_diag(d, Severity::error, 5, 11, "did you mean 'async+rdma'?"));
  EXPECT_TRUE(has_diag(d, Severity::error, 6, 15, "host names are not resolved"));
  EXPECT_EQ(d.error_count(), 5u) << d.to_string();
  // Each option keeps the value below the bad one (here the default), as Ceph does.
  EXPECT_TRUE(cfg.get<Opt::ms_crc_data>());
  EXPECT_EQ(cfg.get<Opt::ms_async_op_threads>(), 3u);
  EXPECT_EQ(cfg.get<Opt::ms_type>(), "async+posix");
  EXPECT_EQ(cfg.source(Opt::ms_crc_data).kind, ValueSource::Kind::default_value);
  EXPECT_NE(d.to_string().find("test.conf:2:15: error: ms_crc_data = no"), std::string::npos);
}

TEST(Config, InvalidOverridesNameTheirOrigin) {
  ConfigRequest req = request();
  req.env_overrides = {{Opt::ms_bind_port_min, "abc", "--ms_bind_port_min"}};
  req.cli_overrides = {{Opt::ms_async_rdma_type, "mlx5_0", "--ms_async_rdma_type"}};
  Diagnostics d;
  const Config cfg = Config::load_text("[global]\nms_bind_port_min = 7000\n", "o.conf", req, d);
  EXPECT_EQ(cfg.get<Opt::ms_bind_port_min>(), 7000);  // the file's value stands
  const Diagnostic* env = find_diag(d, Severity::error, "--ms_bind_port_min: 'abc' is not an integer");
  ASSERT_NE(env, nullptr) << d.to_string();
  EXPECT_EQ(env->where.file, "CEPH_ARGS");
  const Diagnostic* cli = find_diag(d, Severity::error, "use ms_async_rdma_device_name = mlx5_0");
  ASSERT_NE(cli, nullptr) << d.to_string();
  EXPECT_EQ(cli->where.file, "command line");
  EXPECT_EQ(cfg.get<Opt::ms_async_rdma_type>(), "ib");
}

// The snippet from issue 8, as written: [ms] is not a section any entity reads.
TEST(Config, MsSnippetAsWrittenIsIgnoredWithAWarning) {
  const std::string text = test::read_corpus("ms-snippet.conf");
  Diagnostics d;
  const Config cfg = Config::load_text(text, "ms-snippet.conf", request("osd.0"), d);
  EXPECT_FALSE(d.has_errors()) << d.to_string();
  EXPECT_TRUE(has_diag(d, Severity::warning, 1, 1, "section [ms] is read by no Ceph daemon or client"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 1, 1, "its 3 settings are ignored; put messenger options in "
                                                   "[global] or a daemon's section"));
  EXPECT_EQ(cfg.get<Opt::ms_type>(), "async+posix");
  EXPECT_EQ(cfg.get<Opt::ms_async_rdma_type>(), "ib");
  EXPECT_EQ(cfg.lookup("ms_type"), std::nullopt);  // ceph-conf --lookup agrees (lookups.tsv)

  // siphon-conf --check validates every section, so the bad value shows up.
  ConfigRequest req = request("osd.0");
  req.check_all_sections = true;
  Diagnostics checked;
  Config::load_text(text, "ms-snippet.conf", req, checked);
  EXPECT_TRUE(has_diag(checked, Severity::error, 3, 22,
                       "ms_async_rdma_type = mlx5_0 (in [ms]): 'mlx5_0' looks like a device name, not a "
                       "link type: use ms_async_rdma_device_name = mlx5_0"));
  EXPECT_EQ(checked.error_count(), 1u) << checked.to_string();
}

// The same settings where a daemon reads them.
TEST(Config, MsSnippetInGlobalParsesToExpectedValues) {
  std::string text = test::read_corpus("ms-snippet.conf");
  text.replace(0, 4, "[global]");
  Diagnostics d;
  const Config cfg = Config::load_text(text, "snippet.conf", request("osd.0"), d);
  EXPECT_EQ(cfg.get<Opt::ms_type>(), "async+rdma");
  const MsTypes types = cfg.ms_types();
  EXPECT_EQ(types.public_type, (MsType{MsType::Stack::rdma, "rdma"}));
  EXPECT_EQ(types.cluster_type, (MsType{MsType::Stack::rdma, "rdma"}));
  EXPECT_EQ(cfg.get<Opt::ms_async_rdma_local_gid>(), "fe80::5054:ff:fe12:3456");
  std::string error;
  const auto gid = parse_gid(cfg.get<Opt::ms_async_rdma_local_gid>(), error);
  ASSERT_TRUE(gid.has_value());
  EXPECT_EQ((*gid)[0], 0xfe);
  EXPECT_EQ((*gid)[15], 0x56);
  // The device name where a link type belongs: an error with the remedy.
  EXPECT_TRUE(has_diag(d, Severity::error, 3, 22, "use ms_async_rdma_device_name = mlx5_0"));
  EXPECT_EQ(d.error_count(), 1u) << d.to_string();
  EXPECT_EQ(cfg.get<Opt::ms_async_rdma_type>(), "ib");
}

TEST(Config, SectionNameWarnings) {
  Diagnostics d;
  load("[ global ]\na = 1\n[osd1]\nb = 2\n[client.rgw.x]\n[auth]\n[osd.]\n[custom]\n", "client.admin", d);
  EXPECT_TRUE(has_diag(d, Severity::warning, 1, 1, "Ceph does not trim spaces in section names; write [global]"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 3, 1, "old-style section name [osd1]"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 3, 1, "write [osd.1]"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 8, 1, "section [custom] is read by no Ceph daemon"));
  ConfigRequest req = request();
  req.extra_sections = {"custom"};
  Diagnostics d2;
  Config::load_text("[custom]\nms_type = async\n", "c.conf", req, d2);
  EXPECT_TRUE(d2.empty()) << d2.to_string();
}

TEST(Config, DieOptionsWarnAndCrossChecks) {
  Diagnostics d;
  load("[global]\nms_die_on_bad_msg = true\nms_bind_port_min = 7000\nms_bind_port_max = 6900\n"
       "ms_async_rdma_receive_buffers = 17\nms_initial_backoff = 20\n",
       "client.admin", d);
  EXPECT_TRUE(has_diag(d, Severity::warning, 2, 1, "never aborts"));
  EXPECT_TRUE(has_diag(d, Severity::error, 4, 1, "ms_bind_port_min (7000) is above ms_bind_port_max (6900)"));
  EXPECT_TRUE(has_diag(d, Severity::error, 5, 1, "cannot hold one connection's ms_async_rdma_credits (16) + 2"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 6, 1, "ms_initial_backoff (20.000000) is above ms_max_backoff"));
  EXPECT_FALSE(find_diag(d, Severity::error, "nothing to bind"));
  Diagnostics d2;
  load("[global]\nms_bind_ipv4 = false\nms_bind_ipv6 = false\nms_async_rdma_support_srq = true\n"
       "ms_async_rdma_credits = 4095\n", "client.admin", d2);
  EXPECT_TRUE(has_diag(d2, Severity::error, 3, 1, "nothing to bind"));
  EXPECT_TRUE(has_diag(d2, Severity::error, 5, 1, "receives that are not posted"));
  // Without an SRQ the receive queue length is not used: no such error.
  Diagnostics d2b;
  load("[global]\nms_async_rdma_credits = 4095\n", "client.admin", d2b);
  EXPECT_FALSE(find_diag(d2b, Severity::error, "receives that are not posted")) << d2b.to_string();
  Diagnostics d3;
  load("[global]\nms_async_rdma_path_mtu = 1500\n", "client.admin", d3);
  EXPECT_TRUE(has_diag(d3, Severity::error, 2, 1,
                       "ms_async_rdma_path_mtu = 1500 is invalid: use 256, 512, 1024, 2048, 4096"));
  Diagnostics d4;
  load("[global]\nms_async_rdma_path_mtu = 1024\n", "client.admin", d4);
  EXPECT_FALSE(d4.has_errors()) << d4.to_string();
}

TEST(Config, FromArgsFollowsCephsCommandLine) {
  Diagnostics d;
  std::vector<std::string> rest;
  const std::vector<std::string> args{"-n", "osd.3", "--ms-async-op-threads=7", "--ms_crc_data", "false",
                                      "--no-ms-tcp-nodelay", "--ms_bind_ipv6", "--cluster", "prod",
                                      "-c", "a.conf,b.conf", "positional", "--unknown-flag", "--",
                                      "--ms_type", "x"};
  const ConfigRequest req = ConfigRequest::from_args(args, "--ms_async_op_threads 5 -n mon.a --ms_type async+rdma",
                                                     nullptr, d, &rest);
  EXPECT_FALSE(d.has_errors()) << d.to_string();
  EXPECT_EQ(req.name.to_string(), "osd.3");  // the command line wins over CEPH_ARGS
  EXPECT_EQ(req.cluster, "prod");
  EXPECT_EQ(req.conf_search, (std::vector<std::string>{"a.conf", "b.conf"}));
  EXPECT_TRUE(req.conf_required);
  ASSERT_EQ(req.env_overrides.size(), 2u);
  EXPECT_EQ(req.env_overrides[0].option, Opt::ms_async_op_threads);
  EXPECT_EQ(req.env_overrides[1].value, "async+rdma");
  ASSERT_EQ(req.cli_overrides.size(), 4u);
  EXPECT_EQ(req.cli_overrides[0].value, "7");
  EXPECT_EQ(req.cli_overrides[1].value, "false");  // "--flag false" takes the next word
  EXPECT_EQ(req.cli_overrides[2].option, Opt::ms_tcp_nodelay);
  EXPECT_EQ(req.cli_overrides[2].value, "false");
  EXPECT_EQ(req.cli_overrides[3].value, "true");
  EXPECT_EQ(rest, (std::vector<std::string>{"positional", "--unknown-flag", "--", "--ms_type", "x"}));

  Diagnostics d2;
  const Config cfg = Config::load_text("[global]\nms_async_op_threads = 2\n", "f.conf", req, d2);
  EXPECT_EQ(cfg.get<Opt::ms_async_op_threads>(), 7u);
  EXPECT_FALSE(cfg.get<Opt::ms_crc_data>());
  EXPECT_EQ(cfg.get<Opt::ms_type>(), "async+rdma");
  EXPECT_EQ(cfg.source(Opt::ms_type).kind, ValueSource::Kind::env);
}

TEST(Config, NameAndIdInOrder) {
  Diagnostics d;
  const std::vector<std::string> a{"--id", "x", "-n", "osd.1"};
  EXPECT_EQ(ConfigRequest::from_args(a, nullptr, nullptr, d).name.to_string(), "osd.1");
  const std::vector<std::string> b{"-n", "osd.1", "--id", "x"};
  EXPECT_EQ(ConfigRequest::from_args(b, nullptr, nullptr, d).name.to_string(), "osd.x");
  const std::vector<std::string> c{"--id", "bob"};
  EXPECT_EQ(ConfigRequest::from_args(c, "-n osd.1", nullptr, d).name.to_string(), "osd.bob");
  EXPECT_FALSE(d.has_errors());
}

TEST(Config, FromArgsErrors) {
  Diagnostics d;
  const std::vector<std::string> args{"-n", "foo", "--ms_crc_data=yes", "--no-ms_crc_data=1", "--ms_type"};
  ConfigRequest::from_args(args, nullptr, nullptr, d);
  EXPECT_NE(find_diag(d, Severity::error, "'foo' is not an entity name"), nullptr) << d.to_string();
  EXPECT_NE(find_diag(d, Severity::error, "expected true, false, 1 or 0 after '=', got 'yes'"), nullptr);
  EXPECT_NE(find_diag(d, Severity::error, "--no-ms_crc_data=1 takes no value"), nullptr);
  EXPECT_NE(find_diag(d, Severity::error, "--ms_type needs a value"), nullptr);
  EXPECT_EQ(d.error_count(), 4u) << d.to_string();
  std::string error;
  EXPECT_EQ(EntityName::parse("client.rgw.host1", error)->id, "rgw.host1");
  EXPECT_EQ(EntityName::parse("osd.", error)->id, "");
  EXPECT_FALSE(EntityName::parse("osd", error).has_value());
  EXPECT_FALSE(EntityName::parse("rgw.x", error).has_value());
}

TEST(Config, FileSearch) {
  Diagnostics d;
  const std::vector<std::string> none;
  ConfigRequest req = ConfigRequest::from_args(none, nullptr, nullptr, d);
  EXPECT_FALSE(req.conf_required);
  EXPECT_EQ(req.conf_search, ConfigRequest::default_search_list());
  req = ConfigRequest::from_args(none, nullptr, "x.conf;y.conf", d);
  EXPECT_EQ(req.conf_search, (std::vector<std::string>{"x.conf", "y.conf"}));
  EXPECT_TRUE(req.conf_required);

  req.conf_search = {test::corpus("missing.conf"), test::corpus("$cluster.conf")};
  req.cluster = "prod";
  req.pid = "1";
  Diagnostics found;
  const Config cfg = Config::load(req, found);
  ASSERT_NE(cfg.file(), nullptr) << found.to_string();
  EXPECT_EQ(cfg.file()->path(), test::corpus("prod.conf"));
  EXPECT_EQ(cfg.lookup("data"), "/var/lib/prod/client/prod-admin");

  req.conf_search = {test::corpus("missing.conf")};
  Diagnostics missing;
  EXPECT_EQ(Config::load(req, missing).file(), nullptr);
  EXPECT_NE(find_diag(missing, Severity::error, "unable to open a configuration file"), nullptr);
  req.conf_required = false;
  Diagnostics optional;
  Config::load(req, optional);
  EXPECT_FALSE(optional.has_errors());
  EXPECT_NE(find_diag(optional, Severity::warning, "using the built-in defaults"), nullptr);
}

std::vector<std::string> g_logged;
void capture(log::Subsys, int, std::string_view line) noexcept { g_logged.emplace_back(line); }

TEST(Config, LoadOrThrowListsEveryError) {
  ConfigRequest req = request();
  req.conf_search = {test::corpus("malformed/junk-after-quote.conf")};
  req.conf_required = true;
  try {
    Config::load_or_throw(req);
    FAIL() << "expected SetupError";
  } catch (const SetupError& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::config_error));
    EXPECT_NE(std::string(e.what()).find("junk-after-quote.conf:2:19: error: unexpected text"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("siphon-conf --check"), std::string::npos);
  }
  req.conf_search = {test::corpus("basic.conf")};
  g_logged.clear();
  log::set_sink(&capture);
  const Config cfg = Config::load_or_throw(req);  // warnings only: logged, no throw
  log::set_sink(nullptr);
  EXPECT_EQ(cfg.get<Opt::ms_async_op_threads>(), 2u);
  ASSERT_FALSE(g_logged.empty());
  EXPECT_NE(g_logged.front().find(" compat: "), std::string::npos);
  EXPECT_NE(g_logged.front().find("basic.conf:26:1: warning: 'repeated' is set again"), std::string::npos)
      << g_logged.front();
}

TEST(Config, ApplyLogLevels) {
  Diagnostics d;
  const Config cfg = load("[global]\ndebug ms = 7/20\n", "client.admin", d);
  EXPECT_EQ(cfg.debug_ms().log, 7);
  EXPECT_EQ(cfg.debug_ms().gather, 20);
  std::array<int, static_cast<std::size_t>(log::Subsys::count)> before{};
  for (std::size_t i = 0; i < before.size(); ++i) before[i] = log::level(static_cast<log::Subsys>(i));
  log::set_level(log::Subsys::compat, 3);
  log::set_level(log::Subsys::tools, 3);
  apply_log_levels(cfg);
  // Ceph's debug_ms covers the whole messenger, its stacks included ...
  for (const auto s : {log::Subsys::ms, log::Subsys::proto, log::Subsys::session, log::Subsys::transport,
                       log::Subsys::rdma})
    EXPECT_EQ(log::level(s), 7) << log::name(s);
  // ... and not the configuration parser or the tools.
  EXPECT_EQ(log::level(log::Subsys::compat), 3);
  EXPECT_EQ(log::level(log::Subsys::tools), 3);

  // A subsystem's own option overrides debug_ms for that subsystem only.
  Diagnostics d2;
  const Config fine = load("[global]\ndebug_ms = 0/0\ndebug_ms_rdma = 10\ndebug_ms_session = 4/7\n"
                           "debug_siphon_tools = 6\n", "client.admin", d2);
  EXPECT_FALSE(d2.has_errors()) << d2.to_string();
  EXPECT_EQ(fine.value_string(Opt::debug_ms_rdma), "10/10") << "Ceph's normalisation, as for debug_ms";
  apply_log_levels(fine);
  EXPECT_EQ(log::level(log::Subsys::ms), 0);
  EXPECT_EQ(log::level(log::Subsys::proto), 0);
  EXPECT_EQ(log::level(log::Subsys::transport), 0);
  EXPECT_EQ(log::level(log::Subsys::rdma), 10);
  EXPECT_EQ(log::level(log::Subsys::session), 4);
  EXPECT_EQ(log::level(log::Subsys::tools), 6);
  EXPECT_EQ(log::level(log::Subsys::compat), 3) << "unset: left alone";
  Diagnostics bad;
  load("[global]\ndebug_ms_transport = loud\n", "client.admin", bad);
  EXPECT_TRUE(has_diag(bad, Severity::error, 2, 0, "debug_ms_transport = loud"));
  for (std::size_t i = 0; i < before.size(); ++i) log::set_level(static_cast<log::Subsys>(i), before[i]);
}

// Options Siphon does not implement: a value other than the default draws a
// one-line warning that names the option and what Siphon does instead; the
// default draws nothing.
TEST(Config, UnimplementedOptionsWarnWhenSet) {
  Diagnostics d;
  load("[global]\nms_crc_data = false\nms_crc_header = false\nms_tcp_prefetch_max_size = 64K\n"
       "ms_inject_internal_delays = 0.5\nms_async_rdma_cm = false\nms_inject_delay_type = osd\n"
       "ms_cluster_mode = secure crc\nms_client_mode = crc secure\n",
       "client.admin", d);
  EXPECT_FALSE(d.has_errors()) << d.to_string();
  EXPECT_TRUE(has_diag(d, Severity::warning, 2, 1, "ms_crc_data = false has no effect. Not implemented: Siphon always "
                                                  "computes and checks the CRC32C"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 3, 1, "ms_crc_header = false has no effect"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 4, 1, "ms_tcp_prefetch_max_size = 65536 has no effect. Not "
                                                  "implemented: Siphon reads into buffers of ms_tcp_read_chunk"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 5, 1, "ms_inject_internal_delays = 0.500000 has no effect"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 6, 1, "ms_async_rdma_cm = false has no effect: Siphon always sets up"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 7, 1, "ms_inject_delay_type = osd: Siphon does not filter by entity "
                                                  "type"));
  EXPECT_FALSE(find_diag(d, Severity::warning, "ms_cluster_mode")) << "secure mode exists: nothing to say";
  EXPECT_FALSE(find_diag(d, Severity::warning, "ms_client_mode"));
  // The defaults (and values equal to them) are silent.
  Diagnostics quiet;
  load("[global]\nms_crc_data = true\nms_tcp_prefetch_max_size = 4096\nms_async_rdma_cm = true\n",
       "client.admin", quiet);
  EXPECT_EQ(quiet.all().size(), 0u) << quiet.to_string();
}

// Secure mode exists: a list of secure alone is accepted, as in Ceph, and
// becomes the modes offered in that order; a word that is no mode is an
// error naming the accepted ones.
TEST(Config, ModeListsAreCephs) {
  for (const char* o : {"ms_client_mode", "ms_cluster_mode", "ms_service_mode", "ms_mon_client_mode",
                        "ms_mon_cluster_mode", "ms_mon_service_mode"}) {
    Diagnostics d;
    load(fmt::format("[global]\n{} = secure\n", o), "client.admin", d);
    EXPECT_FALSE(d.has_errors()) << o << ": " << d.to_string();
    Diagnostics bad;
    load(fmt::format("[global]\n{} = secure fast\n", o), "client.admin", bad);
    EXPECT_TRUE(bad.has_errors()) << o;
  }
  EXPECT_EQ(mode_list("secure crc"), (std::vector<std::uint32_t>{proto::kConModeSecure, proto::kConModeCrc}));
  EXPECT_EQ(mode_list("crc, secure crc"), (std::vector<std::uint32_t>{proto::kConModeCrc, proto::kConModeSecure}));
}

// A daemon's auth_*_required lists are its accepting side
// (compat::server_auth, keyring_test.cc): loading them draws nothing, with
// or without none, for a daemon as for a client.
TEST(Config, AuthListsWithoutNone) {
  const std::string text = "[global]\nauth_cluster_required = cephx\nauth_service_required = cephx\n"
                           "auth_client_required = cephx\n";
  Diagnostics osd;
  load(text, "osd.1", osd);
  EXPECT_TRUE(osd.all().empty()) << osd.to_string();
  Diagnostics client;
  load(text, "client.admin", client);
  EXPECT_FALSE(client.has_errors()) << client.to_string();
  EXPECT_TRUE(client.all().empty()) << client.to_string();
  // A daemon does not pick its address from public_network / cluster_network.
  Diagnostics nets;
  load("[global]\npublic_network = 10.0.0.0/24\ncluster_network = 10.1.0.0/24\n", "osd.1", nets);
  EXPECT_TRUE(has_diag(nets, Severity::warning, 2, 1, "public_network = 10.0.0.0/24: Siphon does not pick an "
                                                      "address from it; set public_addr"));
  EXPECT_TRUE(has_diag(nets, Severity::warning, 3, 1, "set cluster_addr"));
  Diagnostics client_nets;
  load("[global]\npublic_network = 10.0.0.0/24\n", "client.admin", client_nets);
  EXPECT_EQ(client_nets.all().size(), 0u) << client_nets.to_string();
  Diagnostics with_none;
  load("[global]\nauth_cluster_required = cephx, none\nauth_service_required = none\n"
       "auth_client_required = cephx none\n", "mon.a", with_none);
  EXPECT_EQ(with_none.all().size(), 0u) << with_none.to_string();
}

// TCP-only options set for an RDMA stack say that they do nothing there.
TEST(Config, TcpOnlyOptionsWarnOnRdma) {
  Diagnostics d;
  load("[global]\nms_type = async+rdma\nms_inject_socket_failures = 50\nms_bind_before_connect = true\n"
       "ms_inject_corruption_probability = 0.01\n",
       "client.admin", d);
  EXPECT_TRUE(has_diag(d, Severity::warning, 3, 1, "ms_inject_socket_failures = 50 has no effect on the RDMA "
                                                  "stack (ms_type async+rdma)"));
  EXPECT_TRUE(find_diag(d, Severity::warning, "ms_async_rdma_soft_inject_"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 4, 1, "ms_bind_before_connect = true has no effect on the RDMA"));
  EXPECT_TRUE(has_diag(d, Severity::warning, 5, 1, "ms_inject_corruption_probability = 0.010000 has no effect on the RDMA"));
  Diagnostics tcp;
  load("[global]\nms_inject_socket_failures = 50\nms_bind_before_connect = true\n", "client.admin", tcp);
  EXPECT_EQ(tcp.all().size(), 0u) << tcp.to_string();
}

TEST(Config, SendQueueWaterMarksAreChecked) {
  Diagnostics d;
  load("[global]\nms_send_queue_high_water = 1M\nms_send_queue_low_water = 2M\n", "client.admin", d);
  EXPECT_TRUE(has_diag(d, Severity::error, 3, 1, "ms_send_queue_low_water (2097152) is above "
                                                "ms_send_queue_high_water (1048576)"));
}

}  // namespace
}  // namespace siphon::compat

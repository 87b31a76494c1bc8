// The option schema: every default valid, the options the messenger needs
// present with Ceph's defaults, extensions marked, names and suggestions.
#include "compat/options.h"

#include <gtest/gtest.h>

#include <set>

#include "compat/names.h"
#include "compat/schema_markdown.h"

namespace siphon::compat {
namespace {

static_assert(std::is_same_v<option_type_t<Opt::ms_async_op_threads>, std::uint64_t>);
static_assert(std::is_same_v<option_type_t<Opt::ms_async_rdma_buffer_size>, std::uint64_t>);
static_assert(std::is_same_v<option_type_t<Opt::ms_bind_port_min>, std::int64_t>);
static_assert(std::is_same_v<option_type_t<Opt::ms_crc_data>, bool>);
static_assert(std::is_same_v<option_type_t<Opt::ms_initial_backoff>, double>);
static_assert(std::is_same_v<option_type_t<Opt::ms_type>, std::string>);
static_assert(std::is_same_v<option_type_t<Opt::public_addr>, EntityAddr>);
static_assert(std::is_same_v<option_type_t<Opt::fsid>, Uuid>);

TEST(Schema, EveryDefaultParsesAndHonoursItsLimits) {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < kOptionCount; ++i) {
    const auto o = static_cast<Opt>(i);
    const OptionSchema& s = schema(o);
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate " << s.name;
    EXPECT_EQ(s.type, kOptionTypes[i]);
    std::string error;
    const auto v = parse_option_value(o, s.default_text, error);
    ASSERT_TRUE(v.has_value()) << s.name << " default '" << s.default_text << "': " << error;
    EXPECT_EQ(v->index(), default_value(o).index()) << s.name;
    EXPECT_EQ(value_to_string(o, *v), value_to_string(o, default_value(o))) << s.name;
    // The printed form parses back to the same value.
    const auto back = parse_option_value(o, value_to_string(o, *v) == "-" ? "" : value_to_string(o, *v), error);
    ASSERT_TRUE(back.has_value()) << s.name << ": " << error;
    EXPECT_EQ(value_to_string(o, *back), value_to_string(o, *v)) << s.name;
    EXPECT_FALSE(s.description.empty()) << s.name;
    EXPECT_TRUE(find_option(s.name) == o);
    if (!s.min_text.empty()) {
      EXPECT_TRUE(parse_option_value(o, s.min_text, error)) << s.name << ": " << error;
    }
    if (!s.max_text.empty()) {
      EXPECT_TRUE(parse_option_value(o, s.max_text, error)) << s.name << ": " << error;
    }
  }
}

struct Expected {
  const char* name;
  OptionType type;
  const char* printed_default;  // as `ceph-conf --show-config-value` prints it (Ceph 16.2)
};

TEST(Schema, HasTheOptionsTheMessengerReadsWithCephsDefaults) {
  const Expected expected[] = {
      {"ms_type", OptionType::str, "async+posix"},
      {"ms_public_type", OptionType::str, ""},
      {"ms_cluster_type", OptionType::str, ""},
      {"ms_async_op_threads", OptionType::uint64, "3"},
      {"ms_bind_ipv4", OptionType::boolean, "true"},
      {"ms_bind_ipv6", OptionType::boolean, "false"},
      {"ms_bind_port_min", OptionType::int64, "6800"},
      {"ms_bind_port_max", OptionType::int64, "7300"},
      {"ms_bind_retry_count", OptionType::int64, "3"},
      {"ms_bind_retry_delay", OptionType::int64, "5"},
      {"ms_tcp_nodelay", OptionType::boolean, "true"},
      {"ms_tcp_rcvbuf", OptionType::size, "0"},
      {"ms_tcp_listen_backlog", OptionType::int64, "512"},
      {"ms_initial_backoff", OptionType::float64, "0.200000"},
      {"ms_max_backoff", OptionType::float64, "15.000000"},
      {"ms_connection_ready_timeout", OptionType::uint64, "10"},
      {"ms_connection_idle_timeout", OptionType::uint64, "900"},
      {"ms_dispatch_throttle_bytes", OptionType::size, "104857600"},
      {"ms_crc_data", OptionType::boolean, "true"},
      {"ms_crc_header", OptionType::boolean, "true"},
      {"ms_die_on_bad_msg", OptionType::boolean, "false"},
      {"ms_inject_socket_failures", OptionType::uint64, "0"},
      {"ms_inject_delay_type", OptionType::str, ""},
      {"ms_inject_delay_max", OptionType::float64, "1.000000"},
      {"ms_inject_delay_probability", OptionType::float64, "0.000000"},
      {"ms_inject_internal_delays", OptionType::float64, "0.000000"},
      {"ms_mon_client_mode", OptionType::str, "secure crc"},
      {"ms_cluster_mode", OptionType::str, "crc secure"},
      {"ms_service_mode", OptionType::str, "crc secure"},
      {"ms_client_mode", OptionType::str, "crc secure"},
      {"ms_async_rdma_device_name", OptionType::str, ""},
      {"ms_async_rdma_port_num", OptionType::uint64, "1"},
      {"ms_async_rdma_gid_idx", OptionType::int64, "0"},
      {"ms_async_rdma_local_gid", OptionType::str, ""},
      {"ms_async_rdma_roce_ver", OptionType::int64, "1"},
      {"ms_async_rdma_sl", OptionType::int64, "3"},
      {"ms_async_rdma_dscp", OptionType::int64, "96"},
      {"ms_async_rdma_buffer_size", OptionType::size, "131072"},
      {"ms_async_rdma_send_buffers", OptionType::uint64, "1024"},
      {"ms_async_rdma_receive_buffers", OptionType::uint64, "32768"},
      {"ms_async_rdma_receive_queue_len", OptionType::uint64, "4096"},
      {"ms_async_rdma_support_srq", OptionType::boolean, "true"},
      {"ms_async_rdma_polling_us", OptionType::uint64, "1000"},
      {"ms_async_rdma_enable_hugepage", OptionType::boolean, "false"},
      {"ms_async_rdma_cm", OptionType::boolean, "false"},
      {"ms_async_rdma_type", OptionType::str, "ib"},
      {"mon_host", OptionType::str, ""},
      {"public_addr", OptionType::addr, "-"},
      {"cluster_addr", OptionType::addr, "-"},
      {"public_network", OptionType::str, ""},
      {"auth_cluster_required", OptionType::str, "cephx"},
      {"auth_service_required", OptionType::str, "cephx"},
      {"auth_client_required", OptionType::str, "cephx, none"},
      {"auth_mon_ticket_ttl", OptionType::float64, "259200.000000"},
      {"fsid", OptionType::uuid, "00000000-0000-0000-0000-000000000000"},
      {"debug_ms", OptionType::str, "0/0"},
  };
  for (const auto& e : expected) {
    const auto o = find_option(e.name);
    ASSERT_TRUE(o.has_value()) << e.name;
    EXPECT_EQ(schema(*o).type, e.type) << e.name;
    EXPECT_EQ(schema(*o).origin, OptionOrigin::ceph) << e.name;
    EXPECT_TRUE(is_ceph_option(e.name)) << e.name;
    EXPECT_EQ(value_to_string(*o, default_value(*o)), e.printed_default) << e.name;
  }
}

TEST(Schema, ExtensionsAreMarkedAndUnknownToCeph) {
  const char* extensions[] = {"ms_async_rdma_credits", "ms_async_rdma_inline_threshold",
                              "ms_async_rdma_zero_copy_threshold", "ms_stack_plugin_dir",
                              "ms_max_frame_size", "ms_max_segment_size", "ms_max_control_frame_size",
                              "ms_max_connections", "ms_async_rdma_soft_inject_seed",
                              "ms_async_rdma_soft_inject_post_failure_probability",
                              "ms_async_rdma_soft_inject_link_drop_probability",
                              "ms_async_rdma_soft_inject_corruption_probability",
                              "ms_inject_corruption_probability"};
  for (const char* name : extensions) {
    const auto o = find_option(name);
    ASSERT_TRUE(o.has_value()) << name;
    EXPECT_EQ(schema(*o).origin, OptionOrigin::siphon) << name;
  }
  for (const auto& s : all_options()) {
    EXPECT_EQ(is_ceph_option(s.name), s.origin == OptionOrigin::ceph) << s.name;
    if (s.origin == OptionOrigin::siphon) {
      // Messenger extensions share Ceph's ms_ prefix, per-subsystem log
      // levels Ceph's debug_ (debug_ms_rdma, debug_siphon_compat: names Ceph
      // does not have, checked above); the reference daemon's own options
      // (tools/objd) use objd_, a prefix Ceph does not have; Siphon's own
      // services (the Prometheus endpoint) use siphon_.
      EXPECT_TRUE(s.name.substr(0, 3) == "ms_" || s.name.substr(0, 5) == "objd_" ||
                  s.name.substr(0, 9) == "debug_ms_" || s.name.substr(0, 13) == "debug_siphon_" ||
                  s.name.substr(0, 7) == "siphon_")
          << s.name;
    }
  }
}

TEST(Schema, FindOptionNormalisesLikeAFile) {
  EXPECT_EQ(find_option("ms type"), Opt::ms_type);
  EXPECT_EQ(find_option("  ms_type "), Opt::ms_type);
  EXPECT_FALSE(find_option("ms-type").has_value());
  EXPECT_FALSE(find_option("MS_TYPE").has_value());
  EXPECT_FALSE(find_option("osd_pool_default_size").has_value());
}

TEST(Schema, InvalidValuesSayWhatIsAccepted) {
  std::string error;
  EXPECT_FALSE(parse_option_value(Opt::ms_async_op_threads, "25", error));
  EXPECT_NE(error.find("above the maximum 24"), std::string::npos) << error;
  EXPECT_FALSE(parse_option_value(Opt::ms_async_op_threads, "0", error));
  EXPECT_NE(error.find("below the minimum 1"), std::string::npos) << error;
  EXPECT_FALSE(parse_option_value(Opt::ms_async_rdma_buffer_size, "1K", error));
  EXPECT_NE(error.find("4K (4096)"), std::string::npos) << error;
  EXPECT_FALSE(parse_option_value(Opt::ms_async_rdma_type, "mlx5_0", error));
  EXPECT_NE(error.find("use ms_async_rdma_device_name = mlx5_0"), std::string::npos) << error;
  EXPECT_FALSE(parse_option_value(Opt::ms_cluster_mode, "tls", error));
  EXPECT_NE(error.find("crc, secure"), std::string::npos) << error;
  EXPECT_FALSE(parse_option_value(Opt::ms_cluster_mode, "", error));
  EXPECT_FALSE(parse_option_value(Opt::auth_cluster_required, "kerberos", error));
  EXPECT_NE(error.find("cephx, none"), std::string::npos) << error;
  EXPECT_FALSE(parse_option_value(Opt::public_network, "10.0.0.0", error));
  EXPECT_NE(error.find("ADDRESS/PREFIX"), std::string::npos) << error;
  EXPECT_FALSE(parse_option_value(Opt::public_network, "10.0.0.0/33", error));
  EXPECT_TRUE(parse_option_value(Opt::public_network, "10.0.0.0/8, fd00::/64", error));
  EXPECT_FALSE(parse_option_value(Opt::ms_inject_delay_type, "osd rgw", error));
  EXPECT_TRUE(parse_option_value(Opt::ms_inject_delay_type, "osd mon", error));
  EXPECT_FALSE(parse_option_value(Opt::ms_async_op_threads, "$foo", error));
  EXPECT_NE(error.find("only to string options"), std::string::npos) << error;
  EXPECT_FALSE(parse_option_value(Opt::ms_public_type, "async+posix+rdma", error));
  EXPECT_TRUE(parse_option_value(Opt::ms_public_type, "", error));
  EXPECT_FALSE(parse_option_value(Opt::ms_type, "", error));
  EXPECT_EQ(std::get<std::string>(*parse_option_value(Opt::debug_ms, "5", error)), "5/5");
}

TEST(Schema, NeverDies) {
  EXPECT_NE(option_value_warning(Opt::ms_die_on_bad_msg, OptionValue(true)).find("never aborts"),
            std::string::npos);
  EXPECT_EQ(option_value_warning(Opt::ms_die_on_bad_msg, OptionValue(false)), "");
  EXPECT_EQ(option_value_warning(Opt::ms_crc_data, OptionValue(true)), "");
}

TEST(Names, CephOptionsAndSuggestions) {
  EXPECT_TRUE(is_ceph_option("osd_pool_default_size"));
  EXPECT_TRUE(is_ceph_option("debug_ms"));
  EXPECT_TRUE(is_ceph_option("keyring"));
  EXPECT_FALSE(is_ceph_option("ms_tpye"));
  EXPECT_FALSE(is_ceph_option("ms_async_rdma_credits"));
  EXPECT_EQ(edit_distance("ms_type", "ms_type"), 0u);
  EXPECT_EQ(edit_distance("ms_tpye", "ms_type"), 1u);  // a transposition
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(suggest_option("ms_tpye"), "ms_type");
  EXPECT_EQ(suggest_option("ms_async_rdma_devce_name"), "ms_async_rdma_device_name");
  EXPECT_FALSE(suggest_option("ms_async_rdma_device").has_value());  // 5 edits: too far
  EXPECT_EQ(suggest_option("async_rdma_device_name"), "ms_async_rdma_device_name");
  EXPECT_EQ(suggest_option("osd_pool_default_sise"), "osd_pool_default_size");
  EXPECT_FALSE(suggest_option("completely_different_thing").has_value());
  EXPECT_NE(unknown_option_message("ms_tpye").find("did you mean 'ms_type'?"), std::string::npos);
  EXPECT_NE(unknown_option_message("ms-async-op-threads").find("dashes are not underscores"), std::string::npos);
  EXPECT_NE(unknown_option_message("MS_TYPE").find("case-sensitive"), std::string::npos);
  EXPECT_NE(unknown_option_message("ms__type").find("second underscore"), std::string::npos);
  EXPECT_NE(unknown_option_message("zzz_qqq").find("neither Siphon nor Ceph"), std::string::npos);
}

TEST(SchemaMarkdown, OneRowPerOptionAndTheRules) {
  const std::string md = schema_markdown();
  for (const auto& s : all_options()) {
    const std::string row = "| `" + std::string(s.name) + "` |";
    const auto at = md.find(row);
    ASSERT_NE(at, std::string::npos) << s.name;
    EXPECT_EQ(md.find(row, at + 1), std::string::npos) << "two rows for " << s.name;
    const std::string line = md.substr(at, md.find('\n', at) - at);
    EXPECT_EQ(line.find("**Siphon**") != std::string::npos, s.origin == OptionOrigin::siphon) << line;
  }
  EXPECT_NE(md.find("| `ms_async_rdma_type` | str | `ib` | ib or iwarp (Siphon) |"), std::string::npos);
  EXPECT_NE(md.find("`128K` (131072)"), std::string::npos);
  for (const char* rule : {"## File syntax", "## `$` expansion", "## Values", "## Where a value comes from",
                           "## `ms_type`"})
    EXPECT_NE(md.find(rule), std::string::npos) << rule;
}

}  // namespace
}  // namespace siphon::compat

// The perf counter commands (Ceph 16.2.15's perf dump|schema|reset and perf
// histogram dump|schema; Reef's counter dump|schema for ceph-exporter) over
// a siphon::perf::Collection. Its dumps are passed through as written, so
// Ceph's number formatting (times as <sec>.<9 digits>) survives.
#include <optional>
#include <string>

#include "msgr/admin/commands.h"
#include "msgr/perf/perf_counters.h"

namespace siphon::admin {

namespace {

perf::DumpFilter filter_of(const Request& r) {
  perf::DumpFilter f;
  if (r.has("logger")) f.logger = r.str("logger");
  if (r.has("counter")) f.counter = r.str("counter");
  return f;
}

}  // namespace

void register_perf_commands(AdminSocket& sock, perf::Collection* c) {
  perf::Collection& col = c != nullptr ? *c : perf::process_collection();
  constexpr const char* kFilter =
      " name=logger,type=CephString,req=false name=counter,type=CephString,req=false";
  sock.register_command(std::string("perf dump") + kFilter, "dump perfcounters value",
                        [&col](const Request& r) { return Reply::json_text(col.perf_dump(filter_of(r))); });
  sock.register_command("perf schema", "dump perfcounters schema",
                        [&col](const Request&) { return Reply::json_text(col.perf_schema()); });
  sock.register_command(std::string("perf histogram dump") + kFilter, "dump perf histogram values",
                        [&col](const Request& r) { return Reply::json_text(col.histogram_dump(filter_of(r))); });
  sock.register_command("perf histogram schema", "dump perf histogram schema",
                        [&col](const Request&) { return Reply::json_text(col.histogram_schema()); });
  sock.register_command("perf reset name=var,type=CephString",
                        "perf reset <name>: perf reset all or one perfcounter name", [&col](const Request& r) {
                          const std::string var = r.str("var");
                          const std::optional<std::string> which =
                              var == "all" ? std::nullopt : std::optional<std::string>(var);
                          // As Ceph: an unknown logger is an "error" key, not an ERROR: reply.
                          if (!col.reset(which)) return Reply::json({{"error", "Not find: " + var}});
                          return Reply::json({{"success", "perf reset " + var}});
                        });
  sock.register_command("counter dump", "dump all labeled and non-labeled counters and their values",
                        [&col](const Request&) { return Reply::json_text(col.counter_dump()); });
  sock.register_command("counter schema", "dump all labeled and non-labeled counters schemas",
                        [&col](const Request&) { return Reply::json_text(col.counter_schema()); });
}

}  // namespace siphon::admin
